"""Plain PyTorch (and nanoGPT-style scripts): checkpoint files; a resume option only when the script declares one."""

from __future__ import annotations

import os
import re
from typing import List

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths, step_from_name
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.source import resume_flag

NAME = "pytorch"


CHECKPOINT_FILE = re.compile(r"\.(pt|pth|ckpt|safetensors)([._-][\w.-]*)?$")
PEEK_KEYS = ("global_step", "step", "iter_num", "iteration", "epoch")


def find(job: TrainingJob) -> List[Checkpoint]:
    files = [(e.path, e.mtime) for e in job.scan().files() if CHECKPOINT_FILE.search(os.path.basename(e.path))]
    out = []
    for path in newest_paths(files):
        kind = "safetensors" if ".safetensors" in os.path.basename(path) else "torch-zip"
        step, epoch = step_from_name(os.path.basename(path))
        out.append(checked(path, kind, lambda p=path: ck.check_file(p, PEEK_KEYS), step, epoch))
    return out


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    launcher = job.launch.launcher
    if cp is None:
        plan.notes.append(
            "no checkpoint file (*.pt, *.pth, *.ckpt, *.safetensors) found in the job's folders: "
            "the same command starts over"
        )
        return list(job.cmdline)
    if "configurator.py" in job.source and re.search(r"^init_from\s*=", job.source, re.M):
        plan.notes.append("nanoGPT-style config: init_from=resume loads out_dir/ckpt.pt")
        return set_option(job.cmdline, "--init_from=resume", None, aliases=("--init_from",))
    own = resume_flag(job.source)
    relaunch = "torchrun relaunches it with the same arguments" if launcher == "torchrun" else "a relaunch"
    if own is not None:
        plan.notes.append(f"the script declares {own.flag}; the checkpoint was picked as the newest valid file")
        if own.store_true:
            return set_option(job.cmdline, own.flag, None)
        if own.int_value and cp.step is not None:
            return set_option(job.cmdline, own.flag, str(cp.step))
        return set_option(job.cmdline, own.flag, cp.path)
    plan.notes.append(
        f"the script must load {cp.path} itself ({relaunch}; it declares no --resume option): "
        "restore model, optimizer and step from it before the training loop"
    )
    return list(job.cmdline)
