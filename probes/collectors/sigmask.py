"""A process's signal masks, from /proc/PID/status (proc(5)): SigBlk, the signals its main thread
blocks; SigPnd and ShdPnd, the signals pending for that thread and for the whole process.

A signal that is pending and blocked is never delivered until the mask changes. A blocked mask
survives fork() and execve() (signal(7): "A child created via fork(2) inherits a copy of its
parent's signal mask; the signal mask is preserved across execve(2)"), so a parent that blocks
SIGTERM starts children that terminate() cannot stop.
"""

from __future__ import annotations

import re
import signal
from typing import List, Tuple

_MASK = re.compile(r"^(SigPnd|ShdPnd|SigBlk):\s+([0-9a-fA-F]+)\s*$", re.M)


def mask_names(mask: int) -> List[str]:
    """The signal names of a mask's set bits (bit n-1 is signal n), real-time ones as SIGRTMIN+k."""
    names = []
    for number in range(1, 65):
        if mask >> (number - 1) & 1:
            try:
                names.append(signal.Signals(number).name)
            except ValueError:
                names.append(f"SIG{number}")
    return names


def blocked_and_held(status: str) -> Tuple[List[str], List[str]]:
    """(signals the main thread blocks, signals pending while blocked), from /proc/PID/status text."""
    masks = {name: int(value, 16) for name, value in _MASK.findall(status)}
    blocked = masks.get("SigBlk", 0)
    pending = masks.get("SigPnd", 0) | masks.get("ShdPnd", 0)
    return mask_names(blocked), mask_names(blocked & pending)
