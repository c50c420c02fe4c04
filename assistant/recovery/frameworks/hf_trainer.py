"""Hugging Face Trainer (and TRL): checkpoint-N folders; resume with `resume_from_checkpoint`."""

from __future__ import annotations

import os
import re
from typing import List, Optional

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan, note_broken_latest
from debug_stuck.recovery.scan import Entry, walk
from debug_stuck.recovery.source import imports, resume_flag

NAME = "hf-trainer"


HF_DIR = re.compile(r"^(tmp-)?checkpoint-(\d+)$")


def claims(job: TrainingJob) -> bool:
    source = job.source
    if imports(source, "trl"):
        return True
    if not imports(source, "transformers"):
        return False
    # the Trainer's own names, or a subclass of it; not any *Trainer (tokenizers' BpeTrainer, a
    # job's own class that trains a tokenizer)
    return bool(re.search(r"\b(Trainer|Seq2SeqTrainer|TrainingArguments|Seq2SeqTrainingArguments)\b", source))


def files_say(entry: Entry) -> bool:
    return bool(HF_DIR.match(os.path.basename(entry.path))) and "trainer_state.json" in entry.names


def find(job: TrainingJob) -> List[Checkpoint]:
    output_dir = job.opt("--output_dir")
    if output_dir:
        scan = walk([job.path(output_dir)], max_depth=1)
        job.notes.extend(scan.notes)
    else:
        scan = job.scan()
    dirs = [(e.path, e.mtime) for e in scan.dirs() if HF_DIR.match(os.path.basename(e.path))]
    out = []
    for path in newest_paths(dirs, lambda p: int(HF_DIR.match(os.path.basename(p)).group(2))):
        step = int(HF_DIR.match(os.path.basename(path)).group(2))
        out.append(checked(path, "hf-dir", lambda p=path: ck.check_hf_checkpoint(p), step))
    return out


def _hf_flag(job: TrainingJob) -> Optional[str]:
    own = resume_flag(job.source)
    if own is not None and "resume_from_checkpoint" in own.flag.replace("-", "_"):
        return own.flag
    declared = re.search(r"^\s*resume_from_checkpoint\s*:", job.source, re.M)
    hf_parser = re.search(r"\b(HfArgumentParser|TrlParser)\b", job.source) and re.search(
        r"\b(TrainingArguments|\w+Config)\b", job.source
    )
    uses = re.search(r"\w+\.resume_from_checkpoint\b", job.source)
    if declared or (hf_parser and uses):
        return "--resume_from_checkpoint"
    return own.flag if own is not None and not own.store_true else None


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    output_dir = job.opt("--output_dir")
    if cp is None:
        where = output_dir or job.cwd
        plan.notes.append(
            f"no checkpoint-N folder under {where}: the Trainer saves one every save_steps (default 500) "
            "when save_strategy is 'steps'"
        )
        return list(job.cmdline)
    chosen_step = cp.step or 0
    note_broken_latest(
        plan,
        "resume_from_checkpoint=True (and get_last_checkpoint)",
        # HF takes the highest checkpoint-N by number; its tmp-checkpoint staging folders are not looked at
        lambda c: os.path.basename(c.path).startswith("checkpoint-") and (c.step or 0) > chosen_step,
    )
    config_mode = job.config and not any(a.startswith("-") for a in job.args)
    flag = _hf_flag(job)
    if config_mode:
        plan.notes.append(
            f"the script reads its arguments from a config file: set resume_from_checkpoint: {cp.path} there, "
            "then run the same command"
        )
        return list(job.cmdline)
    if flag:
        if job.flag("--overwrite_output_dir"):
            plan.notes.append("--overwrite_output_dir is set: keep it off when resuming, or the checkpoints go")
        return set_option(job.cmdline, flag, cp.path)
    if re.search(r"resume_from_checkpoint\s*=\s*(True|last_checkpoint|\w*checkpoint\w*)", job.source):
        plan.notes.append("the script resumes from the newest checkpoint-N of output_dir by itself")
    elif job.source:
        plan.notes.append(
            f"the script calls trainer.train() without resume_from_checkpoint: change it to trainer.train("
            f'resume_from_checkpoint="{cp.path}"), then run the same command'
        )
    else:
        plan.notes.append(
            f'the training script must call trainer.train(resume_from_checkpoint="{cp.path}") '
            "(its source was not found to check how it resumes)"
        )
    return list(job.cmdline)
