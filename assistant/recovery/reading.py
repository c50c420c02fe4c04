"""Reads of a job's files and processes for recovery, each bounded in time: the folders a job
writes to are often on the very mount that hung it."""

from __future__ import annotations

import os
from typing import Optional

import psutil

from debug_stuck.bounded import call_or

SOURCE_MAX_BYTES = 2 * 1024 * 1024
READ_SECONDS = 5.0
READ_ERRORS = (OSError, ValueError, psutil.Error)


def bounded_read(fn, what: str, default=None, seconds: float = READ_SECONDS):
    """fn() within `seconds`; `default` when it runs out of time or fails to read."""
    return call_or(default, fn, seconds, what, READ_ERRORS)


def read_source(path: Optional[str]) -> str:
    """A script's text (never imported or run), bounded in size and time; "" when unreadable."""
    if not path:
        return ""

    def read():
        if not os.path.isfile(path):
            return ""
        with open(path, "rb") as fh:
            return fh.read(SOURCE_MAX_BYTES).decode("utf-8", "replace")

    return bounded_read(read, f"reading {path}", "") or ""


def mtime_of(path: str) -> float:
    return bounded_read(lambda: os.stat(path).st_mtime, f"stat {path}", 0.0) or 0.0


def home_dir(env) -> str:
    return env.get("HOME") or os.path.expanduser("~")
