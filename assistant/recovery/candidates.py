"""Checkpoint candidates: checked with the format checks, the newest first, steps read from names."""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.model import Checkpoint
from debug_stuck.recovery.reading import mtime_of

MAX_CANDIDATES = 50  # checked per plan, newest first: a results folder may hold thousands of .pt files


def newest_first(found: List[Checkpoint]) -> List[Checkpoint]:
    unique = {c.path: c for c in found}
    return sorted(unique.values(), key=lambda c: (c.mtime, c.step if c.step is not None else -1), reverse=True)


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


def newest_paths(paths: List[Tuple[str, float]]) -> List[str]:
    """The newest MAX_CANDIDATES paths."""
    return [p for p, _ in sorted(paths, key=lambda x: x[1], reverse=True)[:MAX_CANDIDATES]]


def step_from_name(name: str) -> Tuple[Optional[int], Optional[int]]:
    step = re.search(r"(?:^|[^a-z])(?:global_step|step|iter|it)[=_-]?(\d+)", name, re.I)
    epoch = re.search(r"(?:^|[^a-z])epoch[=_-]?(\d+)", name, re.I)
    return (int(step.group(1)) if step else None, int(epoch.group(1)) if epoch else None)
