"""Bounded reads of /proc: a process in uninterruptible sleep can block its /proc files, and a
machine in trouble has many of those."""

from __future__ import annotations

import os
from typing import Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout

READ_SECONDS = 1.0


def bounded_read(fn, what: str, default=None):
    try:
        return call_with_timeout(fn, READ_SECONDS, what)
    except (CallTimedOut, OSError, ValueError):
        return default


def read_text(path: str, limit: int = 1 << 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(limit)


def fd_target(pid: int, fd: int) -> Optional[str]:
    return bounded_read(lambda: os.readlink(f"/proc/{pid}/fd/{fd}"), f"fd {fd} of {pid}")
