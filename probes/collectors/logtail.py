"""Read the tail of a training log: bounded in bytes and time, a regular file only. What the text
says (lines, progress) is debug_stuck.core.logtext's."""

from __future__ import annotations

from typing import Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.core.logtext import LogTail, fill_tail
from debug_stuck.inputs import LOG_EXPECTED, InputError, open_input, read_span

DEFAULT_TAIL_BYTES = 256 * 1024
DEFAULT_READ_SECONDS = 5.0


def read_log_tail(
    path: str,
    max_bytes: int = DEFAULT_TAIL_BYTES,
    timeout: float = DEFAULT_READ_SECONDS,
    read_path: Optional[str] = None,
) -> LogTail:
    """Read and parse the last `max_bytes` of `path`. Never raises: problems land in `.error`.
    `read_path` (/proc/P/fd/N) reads the file a job holds open, reported under its own `path`."""
    tail = LogTail(path=path, read_path=read_path)
    try:
        raw, size, mtime, offset, bom, cut = call_with_timeout(
            lambda: _read_raw(read_path or path, max_bytes), timeout, what=f"reading {path}"
        )
    except CallTimedOut as exc:
        tail.error = f"log {path}: {exc} (is it on a hung network mount?)"
        return tail
    except InputError as exc:
        tail.error = exc.naming(path)
        return tail
    except OSError as exc:
        tail.error = f"log {path}: cannot read: {exc.strerror or exc}"
        return tail
    tail.size, tail.mtime, tail.start_offset = size, mtime, offset
    return fill_tail(tail, raw, bom, cut)


def _read_raw(path: str, max_bytes: int):
    with open_input(path, "log", LOG_EXPECTED) as (fd, st):
        bom = read_span(fd, 0, 4)
        offset = max(0, st.st_size - max_bytes)
        if bom[:2] in (b"\xff\xfe", b"\xfe\xff") and offset % 2:
            offset += 1
        # The first line read is partial unless a newline (or a sparse hole) precedes it.
        cut = offset > 0 and read_span(fd, offset - 1, 1) not in (b"\n", b"\x00")
        raw = read_span(fd, offset, st.st_size - offset)
    return raw, st.st_size, st.st_mtime, offset, bom, cut


GROWN_BYTES = 64 * 1024  # of what a log gained in the window, at most this much is read
BEFORE_BYTES = 8 * 1024  # and this much before it, for what the growth follows


def repeated_error_growth(path: str, start: int, end: int, timeout: float = 2.0) -> Optional[str]:
    """The exception line when all a log gained from byte `start` to `end` (its last GROWN_BYTES) is
    the same child traceback again and again (core.logstacks.only_repeated_errors), or the line when it
    is one failure or retry message again and again (only_repeated_line); None otherwise,
    or when it cannot be read in `timeout` seconds. A short window can gain one traceback or one
    retry line: what the log held just before the growth says whether it repeats."""
    from debug_stuck.core.logstacks import only_repeated_errors, only_repeated_line, since_last_process_error

    def read() -> tuple:
        with open_input(path, "log", LOG_EXPECTED) as (fd, _st):
            offset = max(start, end - GROWN_BYTES)
            raw = read_span(fd, offset, end - offset)
            before = max(0, start - BEFORE_BYTES)
            prior = read_span(fd, before, start - before) if start else b""
            prior = prior if before == 0 else prior.split(b"\n", 1)[-1]
            cut = offset > start or (start > 0 and not prior.endswith(b"\n"))
            prior = prior[: prior.rfind(b"\n") + 1]  # the line the window starts in is left out, whole
            raw = raw.split(b"\n", 1)[-1] if cut else raw  # a line cut in two is left out,
            raw = raw if raw.endswith(b"\n") else raw.rsplit(b"\n", 1)[0]  # and the one still being written
            return raw, prior

    try:
        raw, prior = call_with_timeout(read, timeout, what=f"reading {path}")
    except (CallTimedOut, InputError, OSError):
        return None
    lines = raw.decode("utf-8", "replace").splitlines()
    before = prior.decode("utf-8", "replace").splitlines()
    context = since_last_process_error(before)
    return only_repeated_errors(context + lines, len(context)) or only_repeated_line(before[-1:] + lines)
