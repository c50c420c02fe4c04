"""Reads of a job's files and processes for recovery, each bounded in time: the folders a job
writes to are often on the very mount that hung it."""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

import psutil

from debug_stuck.bounded import call_or
from debug_stuck.inputs import READ_SECONDS, InputError, read_input

SOURCE_MAX_BYTES = 2 * 1024 * 1024
READ_ERRORS = (OSError, ValueError, psutil.Error)


# The root a live job's files are seen from: /proc/P/root when its mount namespace (a container, a
# private /tmp) or its root differs from ours, so that its paths name its own files, never others in
# our namespace (which, as root, could be files the job's user may not read).
_JOB_ROOT: ContextVar[Optional[str]] = ContextVar("job_root", default=None)


def at(path: str) -> str:
    """Where to open the job's absolute `path` from here."""
    root = _JOB_ROOT.get()
    return root + path if root and path.startswith("/") else path


@contextmanager
def seen_from(pid: int) -> Iterator[Optional[str]]:
    """Read the job's files as process `pid` sees them, for the duration of the block."""
    token = _JOB_ROOT.set(_root_of(pid))
    try:
        yield _JOB_ROOT.get()
    finally:
        _JOB_ROOT.reset(token)


def _root_of(pid: int) -> Optional[str]:
    def differs() -> bool:
        ours = os.stat("/proc/self/ns/mnt").st_ino
        theirs = os.stat(f"/proc/{pid}/ns/mnt").st_ino
        return ours != theirs or os.readlink(f"/proc/{pid}/root") != "/"

    # not ours to look into (another user's job, no root): our own view, with our own rights
    if not bounded_read(differs, f"reading the mount namespace of {pid}", False):
        return None
    root = f"/proc/{pid}/root"
    return root if bounded_read(lambda: os.path.isdir(root), f"opening {root}", False) else None


def bounded_read(fn, what: str, default=None, seconds: float = READ_SECONDS):
    """fn() within `seconds`; `default` when it runs out of time or fails to read."""
    return call_or(default, fn, seconds, what, READ_ERRORS)


def read_source(path: Optional[str]) -> str:
    """A script's or config file's text (never imported or run), bounded in size and time; "" when
    it is not a regular file we can read."""
    if not path:
        return ""
    try:
        return read_input(at(path), "source", SOURCE_MAX_BYTES, READ_SECONDS).decode("utf-8", "replace")
    except InputError:
        return ""


def mtime_of(path: str) -> float:
    return bounded_read(lambda: os.stat(at(path)).st_mtime, f"stat {path}", 0.0) or 0.0


def home_dir(env) -> str:
    return env.get("HOME") or os.path.expanduser("~")
