"""Ultralytics (YOLO): weights/last.pt under runs/; resume with `yolo train resume model=.../last.pt`."""

from __future__ import annotations

import os
import re
from typing import List

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.reading import at, bounded_read, home_dir, read_source
from debug_stuck.recovery.scan import Entry, walk
from debug_stuck.recovery.source import imports

NAME = "ultralytics"
# Epochs do not compare across runs (runs/detect/train, train2...: each starts at epoch 0), and
# Ultralytics itself resumes the latest run: its last.pt files rank by time, not by epoch.
RANK_BY_EPOCH = False


def claims_command(job: TrainingJob) -> bool:
    """The `yolo` console command: decided before any script's source is read."""
    return job.launch.console == "yolo"


def claims(job: TrainingJob) -> bool:
    return imports(job.source, "ultralytics")


def files_say(entry: Entry) -> bool:
    return entry.path.endswith(os.sep + "weights") and "last.pt" in entry.names


def _ultralytics_runs(job: TrainingJob) -> List[str]:
    project = job.opt("project")
    if project:
        return [job.path(project)]
    roots = [os.path.join(job.cwd, "runs")]
    config_dir = job.env.get("YOLO_CONFIG_DIR") or os.path.join(home_dir(job.env), ".config", "Ultralytics")
    for name in ("settings.json", "settings.yaml"):
        text = read_source(os.path.join(config_dir, name))
        m = re.search(r"""["']?runs_dir["']?\s*:\s*["']?([^"',\n}]+)""", text)
        if m:
            roots.append(m.group(1).strip())
    return [r for r in dict.fromkeys(roots) if bounded_read(lambda r=r: os.path.isdir(at(r)), f"stat {r}", False)]


def find(job: TrainingJob) -> List[Checkpoint]:
    roots = _ultralytics_runs(job)
    scan = walk(roots, max_depth=3)
    job.notes.extend(scan.notes)
    name = job.opt("name")
    files = []
    for entry in scan.files():
        base = os.path.basename(entry.path)
        parent = os.path.dirname(entry.path)
        if os.path.basename(parent) != "weights" or not re.match(r"^last\.pt([._-][\w.-]*)?$", base):
            continue
        if name and not os.path.basename(os.path.dirname(parent)).startswith(name):
            continue
        files.append((entry.path, entry.mtime))
    out = []
    for path in newest_paths(files):
        out.append(checked(path, "ultralytics", lambda p=path: ck.check_file(p, ("epoch", "optimizer"))))
    return out


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    launch = job.launch
    cp = plan.checkpoint
    if cp is not None:
        values = ck.check_file(cp.path, ("epoch", "optimizer")).values
        if values.get("epoch") == -1 or ("optimizer" in values and values["optimizer"] is None):
            plan.notes.append(
                f"{cp.path} is from a finished training (its optimizer was stripped): Ultralytics refuses to resume "
                "it; train again with model=<it> to fine-tune from those weights"
            )
    if launch.console == "yolo":
        if cp is None:
            plan.notes.append("no weights/last.pt under runs/: Ultralytics saves it at the end of every epoch")
            return list(job.cmdline)
        head = job.cmdline[: launch.launcher_index + 1]
        mode = [a for a in launch.program_args if a in ("detect", "segment", "classify", "pose", "obb")]
        plan.notes.append("resume takes every other setting (data, epochs, batch...) from the checkpoint")
        return head + mode + ["train", "resume", f"model={cp.path}"]
    if cp is not None:
        plan.notes.append(
            f'the script uses the ultralytics API: resume with YOLO("{cp.path}").train(resume=True) '
            "in place of its train() call, then run the same command"
        )
    return list(job.cmdline)
