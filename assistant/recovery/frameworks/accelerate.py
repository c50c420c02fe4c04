"""Hugging Face accelerate: accelerator.save_state folders; resume with `accelerator.load_state(dir)`."""

from __future__ import annotations

import os
import re
from typing import List

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths, step_from_name
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.scan import Entry
from debug_stuck.recovery.source import imports, resume_flag

NAME = "accelerate"


def claims(job: TrainingJob) -> bool:
    return imports(job.source, "accelerate") and bool(re.search(r"\.(save|load)_state\(", job.source))


def files_say(entry: Entry) -> bool:
    return ck.is_accelerate_state(entry.names)


def find(job: TrainingJob) -> List[Checkpoint]:
    dirs = [(e.path, e.mtime) for e in job.scan().dirs() if ck.is_accelerate_state(e.names)]
    out = []
    for path in newest_paths(dirs):
        name = os.path.basename(path)
        step, epoch = step_from_name(name)
        out.append(checked(path, "accelerate-dir", lambda p=path: ck.check_state_dir(p), step, epoch))
    return out


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    if cp is None:
        plan.notes.append("no accelerator.save_state folder found (model, optimizer and random states)")
        return list(job.cmdline)
    automatic = "automatic_checkpoint_naming" in job.source
    if automatic and re.match(r"^checkpoint_\d+$", os.path.basename(cp.path)):
        plan.notes.append(
            "checkpoint_N counts saves, not steps; after load_state, set "
            "accelerator.project_configuration.iteration to N+1 so new saves do not overwrite it"
        )
    own = resume_flag(job.source)
    if own is not None and not own.store_true:
        return set_option(job.cmdline, own.flag, cp.path)
    plan.notes.append(
        f'the script must restore the state itself: accelerator.load_state("{cp.path}") after '
        "accelerator.prepare(...), then run the same command"
    )
    return list(job.cmdline)
