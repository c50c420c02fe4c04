"""What watch is told (its settings, validated) and the names it shares: its events, the responses
to a hang, its defaults and its pacing."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from debug_stuck.actions.watch.clock import (
    DEFAULT_FLOOR,
    DEFAULT_MULTIPLE,
    DEFAULT_PHASE_MULTIPLE,
    DEFAULT_STARTUP,
)
from debug_stuck.errors import BadInput

EVENTS = (
    "started",
    "progress",
    "phase",
    "stall",
    "report",
    "action",
    "restarted",
    "resumed",
    "gave-up",
    "exited",
    "warning",
)
ON_HANG = ("report", "stop", "restart")

DEFAULT_POLL = 1.0
DEFAULT_MAX_RESTARTS = 3
DEFAULT_GRACE = 10.0
DEFAULT_PROGRESS_EVERY = 60.0
DEFAULT_REPORT_DIR = "debug-stuck-reports"

# Exit status when the job stalled and watch ended it (--on-hang stop, or restart gave up);
# `timeout` uses the same number for "the command ran out of time".
EXIT_STALLED = 124

TICK = 0.25  # the log is followed (and echoed) this often; everything else once per poll
GPU_EVERY_SECONDS = 5.0
STACK_TIMEOUT = 3.0
HOOK_LOOK_EVERY = 2.0  # seconds between looks for a process's debug_stuck.hook marker, until found
CPU_ACTIVE_PERCENT = 10.0  # the tree's CPU use (% of one core) above which it counts as doing something
IO_ACTIVE_BYTES_PER_SECOND = 64 * 1024
GPU_ACTIVE_UTIL = 5.0
DIAGNOSIS_SECONDS = 90.0
RESUME_PLAN_SECONDS = 30.0
JOURNAL_LOOKBACK_SECONDS = 7 * 86400  # earlier stalls of the same command this recent tell same-step from random


@dataclass
class WatchSettings:
    on_hang: str = "report"
    max_restarts: int = DEFAULT_MAX_RESTARTS
    report_dir: Path = Path(DEFAULT_REPORT_DIR)
    poll: float = DEFAULT_POLL
    floor: float = DEFAULT_FLOOR
    multiple: float = DEFAULT_MULTIPLE
    phase_multiple: float = DEFAULT_PHASE_MULTIPLE
    startup: float = DEFAULT_STARTUP
    progress_every: float = DEFAULT_PROGRESS_EVERY
    grace: float = DEFAULT_GRACE
    native: bool = True
    logs: List[str] = field(default_factory=list)  # extra logs to follow
    echo: Optional[Callable[[bytes], None]] = None  # where the job's output is teed (None: quiet)
    journal: bool = True
    gpu: bool = True

    def validate(self) -> None:
        if self.on_hang not in ON_HANG:
            raise BadInput(f"--on-hang {self.on_hang!r} is not valid", f"valid: {', '.join(ON_HANG)}")
        checks = (
            ("--poll", self.poll, 0.1, 60.0),
            ("--floor", self.floor, 1.0, 86400.0),
            ("--multiple", self.multiple, 1.0, 1000.0),
            ("--phase-multiple", self.phase_multiple, 1.0, 1000.0),
            ("--startup", self.startup, 1.0, 86400.0),
            ("--grace", self.grace, 0.0, 3600.0),
        )
        for flag, value, low, high in checks:
            if not low <= value <= high:
                raise BadInput(f"{flag} {value:g} is out of range", f"give a number from {low:g} to {high:g}")
        if self.max_restarts < 0:
            raise BadInput(f"--max-restarts {self.max_restarts} is negative", "give 0 or more")
        if self.progress_every < 0:
            raise BadInput(f"--progress-every {self.progress_every:g} is negative", "give seconds, or 0 for none")


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
