"""Reads of files someone hands us (answers, reports, logs, a job's config and hook files): regular
files only, bounded in bytes and in time.

A FIFO nobody writes blocks open() and read() forever, /dev/zero never ends, and a log on a hung
mount never answers: the tool must say so in one line instead of hanging or filling memory.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import Iterator, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.errors import BadInput

READ_SECONDS = 5.0
LOG_EXPECTED = "give the job's log file"
MISSING = "cannot read: it does not exist"
_CHUNK = 1 << 20
# O_NONBLOCK: a FIFO swapped in between the stat and the open cannot block the open (nor a read).
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(BadInput):
    """A file we were given cannot be read as one: missing, not a regular file, unreadable or too
    slow. One line, `{what} {path}: {reason}; {expected}`; exit 2 where it is the user's input."""

    def __init__(self, what: str, path: str, reason: str, expected: str = ""):
        super().__init__(f"{what} {path}: {reason}", expected)
        self.what, self.path, self.reason = what, path, reason

    @property
    def missing(self) -> bool:
        return self.reason == MISSING

    def naming(self, path: str) -> str:
        """The same line about `path` (the name the user knows, where another was read)."""
        return InputError(self.what, path, self.reason, self.hint).one_line()


def read_input(
    path: str, what: str, max_bytes: int, seconds: float = READ_SECONDS, tail: bool = False, expected: str = ""
) -> bytes:
    """At most `max_bytes` of regular file `path` (its end when `tail`), read within `seconds`.

    `what` names the file in messages ("answers file", "log"); `expected` says what would do instead
    ("give a JSON report file"). Raises InputError, whatever went wrong."""

    def read() -> bytes:
        with open_input(path, what, expected) as (fd, st):
            offset = max(0, st.st_size - max_bytes) if tail else 0
            return read_span(fd, offset, min(max_bytes, st.st_size - offset))

    return within(read, path, what, seconds, expected)


def check_input(path: str, what: str, expected: str = "", seconds: float = READ_SECONDS) -> None:
    """Raise InputError unless `path` is a regular file we may open (nothing is read)."""

    def check() -> None:
        with open_input(path, what, expected):
            pass

    within(check, path, what, seconds, expected)


def within(fn, path: str, what: str, seconds: float, expected: str = ""):
    """fn() under a time bound; running out of time or failing to read is an InputError."""
    try:
        return call_with_timeout(fn, seconds, f"reading {path}")
    except CallTimedOut:
        reason = f"not read within {seconds:g} s (is it on a hung network mount?)"
        raise InputError(what, path, reason, expected) from None
    except InputError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte in it
        raise InputError(what, path, f"cannot read: {getattr(exc, 'strerror', None) or exc}", expected) from None


@contextmanager
def open_input(path: str, what: str, expected: str = "") -> Iterator[Tuple[int, os.stat_result]]:
    """(fd, its fstat) of regular file `path`, closed on leaving. No time bound of its own: run it
    under `within` (or another call_with_timeout)."""
    try:
        _require_regular(os.stat(path), path, what, expected)  # a device or FIFO is never opened
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError(what, path, MISSING, expected) from None
    except OSError as exc:
        raise InputError(what, path, f"cannot read: {exc.strerror or exc}", expected) from None
    try:
        st = os.fstat(fd)
        _require_regular(st, path, what, expected)  # the file opened may not be the one looked at
        yield fd, st
    finally:
        os.close(fd)


def read_span(fd: int, offset: int, count: int) -> bytes:
    """Up to `count` bytes from `offset`, in chunks: never more memory than the bytes there are."""
    parts = []
    while count > 0:
        chunk = os.pread(fd, min(count, _CHUNK), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        count -= len(chunk)
    return b"".join(parts)


def _require_regular(st: os.stat_result, path: str, what: str, expected: str) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
    raise InputError(what, path, f"is {kind}, not a regular file", expected)
