"""Checkpoint candidates: checked with the format checks, the newest first, steps read from names.

"Newest" means the furthest in training, not the latest file time: a copy (`cp`, `rsync` without
-t, a restore from a bucket) resets file times, and a `last.pt` copied from an early step is still
that early step. So checkpoints rank by what they say about progress (see `progress_key`):

1. those whose step is known (from inside the file or from its name): the highest step first;
   file time breaks ties only (``last.pt`` and ``ckpt_step20.pt`` both at step 20: the later one);
2. then those whose epoch only is known (a framework where epochs do not compare across runs,
   Ultralytics, opts out): the highest epoch first, time breaking ties;
3. then those whose progress cannot be read at all: by file time, newest first.

A checkpoint of unknown step never outranks one whose step is known: a step is a fact about
training progress, a file time is not.
"""

from __future__ import annotations

import os
import re
from typing import Callable, List, Optional, Tuple

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.model import Checkpoint
from debug_stuck.recovery.reading import mtime_of

MAX_CANDIDATES = 50  # checked per plan, newest first: a results folder may hold thousands of .pt files


def progress_key(c: Checkpoint, epochs: bool = True) -> tuple:
    """How far in training a checkpoint is, for sorting (larger is newer); see the module's doc."""
    if c.step is not None:
        return (2, c.step, c.epoch if c.epoch is not None else -1, c.mtime)
    if epochs and c.epoch is not None:
        return (1, c.epoch, -1, c.mtime)
    return (0, 0, -1, c.mtime)


def newest_first(found: List[Checkpoint], epochs: bool = True) -> List[Checkpoint]:
    """The checkpoints, furthest in training first: by step, then epoch, file time breaking ties."""
    unique = {c.path: c for c in found}
    return sorted(unique.values(), key=lambda c: progress_key(c, epochs), reverse=True)


def checked(path: str, kind: str, check: Callable[[], ck.FileCheck], step=None, epoch=None) -> Checkpoint:
    mtime = mtime_of(path)
    if ck.is_partial_name(path):
        problem = "temporary name: an unfinished save (a finished save is renamed into place)"
        return Checkpoint(path, kind, step, mtime, False, problem, epoch)
    result = check()
    values = result.values
    step = values.get("global_step", step) if values.get("global_step") is not None else step
    for key in ("step", "iter_num", "iteration"):
        if step is None and isinstance(values.get(key), int):
            step = values[key]
    if epoch is None and isinstance(values.get("epoch"), int) and values["epoch"] >= 0:
        epoch = values["epoch"]
    return Checkpoint(path, kind, step, mtime, result.ok, result.problem, epoch)


def newest_paths(paths: List[Tuple[str, float]], step_of: Optional[Callable[[str], Optional[int]]] = None) -> List[str]:
    """The MAX_CANDIDATES paths to check: the highest steps their names carry first (``step_of``,
    by default `step_from_name` of the base name), then the newest by file time."""
    if step_of is None:
        step_of = lambda path: step_from_name(os.path.basename(path.rstrip("/")))[0]  # noqa: E731

    def key(item: Tuple[str, float]) -> tuple:
        step = step_of(item[0])
        return (step is not None, step if step is not None else 0, item[1])

    return [p for p, _ in sorted(paths, key=key, reverse=True)[:MAX_CANDIDATES]]


def step_from_name(name: str) -> Tuple[Optional[int], Optional[int]]:
    step = re.search(r"(?:^|[^a-z])(?:global_step|step|iter|it)[=_-]?(\d+)", name, re.I)
    epoch = re.search(r"(?:^|[^a-z])epoch[=_-]?(\d+)", name, re.I)
    return (int(step.group(1)) if step else None, int(epoch.group(1)) if epoch else None)
