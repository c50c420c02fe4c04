"""PyTorch Lightning: .ckpt files (lightning_logs/version_N/checkpoints); resume with `ckpt_path`."""

from __future__ import annotations

import os
import re
from typing import List

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths, step_from_name
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.reading import at, bounded_read
from debug_stuck.recovery.scan import Entry, walk
from debug_stuck.recovery.source import imports, resume_flag

NAME = "lightning"


def claims(job: TrainingJob) -> bool:
    return imports(job.source, "lightning", "pytorch_lightning", "lightning.pytorch")


def files_say(entry: Entry) -> bool:
    return os.path.basename(entry.path) == "lightning_logs"


def find(job: TrainingJob) -> List[Checkpoint]:
    roots = job.output_dirs()
    for m in re.finditer(r"dirpath\s*=\s*[rf]?['\"]([^'\"{}]+)['\"]", job.source):
        full = job.path(m.group(1))
        if bounded_read(lambda full=full: os.path.isdir(at(full)), f"stat {full}", False):
            roots.insert(0, full)
    default_root = job.opt("--trainer.default_root_dir", "--default_root_dir")
    if default_root:
        roots.insert(0, job.path(default_root))
    scan = walk(list(dict.fromkeys(roots)))
    job.notes.extend(scan.notes)
    files = [(e.path, e.mtime) for e in scan.files() if re.search(r"\.ckpt([._-][\w.-]*)?$", e.path)]
    out = []
    for path in newest_paths(files):
        step, epoch = step_from_name(os.path.basename(path))
        out.append(checked(path, "lightning", lambda p=path: ck.check_file(p, ("global_step", "epoch")), step, epoch))
    return out


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    save_last = re.search(r"save_last\s*=\s*(True|['\"]link['\"])", job.source)
    if cp is None:
        plan.notes.append(
            "no .ckpt file found: Lightning saves one per epoch under lightning_logs/version_N/checkpoints "
            "(ModelCheckpoint(save_last=True) keeps last.ckpt)"
        )
        return list(job.cmdline)
    if "LightningCLI" in job.source:
        return set_option(job.cmdline, "--ckpt_path", cp.path)
    own = resume_flag(job.source)
    if own is not None and not own.store_true:
        return set_option(job.cmdline, own.flag, cp.path)
    last_broken = any(os.path.basename(c.path).startswith("last") for c in plan.skipped)
    if last_broken:
        plan.notes.append('ckpt_path="last" would load the broken last.ckpt: pass the path given here')
    elif not save_last:
        plan.notes.append(
            'ckpt_path="last" needs ModelCheckpoint(save_last=True), which the script does not set: pass the path'
        )
    plan.notes.append(
        f'the script must pass the checkpoint to fit: trainer.fit(model, ckpt_path="{cp.path}"), '
        "then run the same command"
    )
    return list(job.cmdline)
