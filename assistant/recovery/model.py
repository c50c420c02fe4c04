"""The resume plan and the checkpoints it weighs: what front ends show and watch relaunches with."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

NO_CHECKPOINT = "no usable checkpoint: training restarts from step 0"


@dataclass
class Checkpoint:
    path: str
    kind: str  # torch-zip|safetensors|hf-dir|accelerate-dir|lightning|kohya-state|ultralytics|nanochat
    step: Optional[int]
    mtime: float
    valid: bool
    problem: Optional[str]  # why it is not usable, e.g. "truncated: zip central directory missing"
    epoch: Optional[int] = None

    def label(self) -> str:
        where = []
        if self.step is not None:
            where.append(f"step {self.step}")
        if self.epoch is not None:
            where.append(f"epoch {self.epoch}")
        return f"{self.path} ({', '.join(where)})" if where else self.path

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "kind": self.kind,
            "step": self.step,
            "epoch": self.epoch,
            "mtime": self.mtime,
            "valid": self.valid,
            "problem": self.problem,
        }


@dataclass
class ResumePlan:
    framework: str
    launcher: str  # torchrun|accelerate|deepspeed|python
    checkpoint: Optional[Checkpoint]
    skipped: List[Checkpoint]  # invalid ones, newest first, each with its problem
    command: Optional[str]
    notes: List[str]
    lost: Optional[str]  # "no usable checkpoint: training restarts from step 0", or "steps after N"
    argv: Optional[List[str]] = None  # the command as a list, to run in cwd with env added
    cwd: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)  # variables the command needs (already in `command`)

    def summary(self) -> str:
        """What to run, in a few lines (front ends that show one block of text)."""
        lines = [f"{self.framework} (launcher: {self.launcher})"]
        lines.append(f"checkpoint: {self.checkpoint.label() if self.checkpoint else 'none usable'}")
        lines += [f"skipped: {c.path}: {c.problem}" for c in self.skipped]
        if self.lost:
            lines.append(f"lost: {self.lost}")
        lines += [f"note: {n}" for n in self.notes]
        if self.command:
            lines.append(f"cd {shlex.quote(self.cwd)} && {self.command}" if self.cwd else self.command)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The report's ``resume`` object."""
        return {
            "framework": self.framework,
            "checkpoint": self.checkpoint.path if self.checkpoint else None,
            "command": self.command,
            "launcher": self.launcher,
            "step": self.checkpoint.step if self.checkpoint else None,
            "epoch": self.checkpoint.epoch if self.checkpoint else None,
            "cwd": self.cwd,
            "skipped": [{"path": c.path, "kind": c.kind, "step": c.step, "problem": c.problem} for c in self.skipped],
            "notes": list(self.notes),
            "lost": self.lost,
        }


def note_broken_latest(plan: ResumePlan, what: str, picks: Callable[[Checkpoint], bool] = lambda c: True) -> None:
    """Warn when the framework's own "resume from the latest" would take a broken checkpoint."""
    picked = [c for c in plan.skipped if picks(c)]
    if picked and plan.checkpoint is not None:
        newest = picked[0]
        plan.notes.append(
            f"{what} would pick {newest.path}, which is broken ({newest.problem}): "
            f"resume from the path given here, or move the broken one aside "
            f"(mv {shlex.quote(newest.path)} {shlex.quote(newest.path + '.broken')})"
        )
