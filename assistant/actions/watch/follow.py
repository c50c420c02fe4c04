"""Follow a growing log: new complete lines since the last read (tqdm redraws count as lines),
echoed as they come, bounded in time (a log on a hung mount costs an error line)."""

from __future__ import annotations

import os
import re
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.recovery.reading import READ_SECONDS

MAX_READ_PER_TICK = 1 << 20
MAX_PARTIAL_LINE = 64 * 1024


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def unique_logs(paths: Iterable[str], opened: Optional[Dict[str, str]] = None) -> List[str]:
    """Each log once, named by its real path: the same file given absolutely and relatively, through a
    link, or by a second hard link is one log (same device and inode), read once. A file that does not
    exist yet keeps its real path (it is matched by that). Bounded: a hung mount costs the dedup by
    inode, never the watch. `opened`: logs an attached job holds open (its path -> /proc/P/fd/N):
    named as the job names them and looked at through its descriptor, never resolved in our mount
    namespace, where the same path may be another file."""
    paths = [str(p) for p in paths]
    opened = opened or {}

    def resolve() -> List[str]:
        seen, out = set(), []
        for path in paths:
            real = path if path in opened else os.path.realpath(os.path.expanduser(path))
            try:
                st = os.stat(opened.get(path, real))
                key: tuple = ("inode", st.st_dev, st.st_ino)
            except OSError:
                key = ("path", real)
            if key not in seen and ("path", real) not in seen:
                seen.update({key, ("path", real)})
                out.append(real)
        return out

    try:
        return call_with_timeout(resolve, READ_SECONDS, "resolving the log paths")
    except CallTimedOut:
        return list(dict.fromkeys(p if p in opened else os.path.abspath(os.path.expanduser(p)) for p in paths))


class LogFollower:
    """New complete lines of a growing log file since the last read (tqdm redraws count as lines)."""

    def __init__(
        self,
        path: str,
        echo: Optional[Callable[[bytes], None]] = None,
        from_end: bool = False,
        read_path: Optional[str] = None,
    ):
        self.path = path
        self.read_path = read_path  # /proc/P/fd/N: an attached job's own open log
        self.echo = echo
        self.offset = 0
        self.partial = b""
        self.error: Optional[str] = None
        if from_end:
            try:
                where = read_path or path
                self.offset = call_with_timeout(lambda: os.stat(where).st_size, READ_SECONDS, f"stat {path}")
            except (OSError, CallTimedOut):
                self.offset = 0

    def _read_new(self) -> bytes:
        from debug_stuck.inputs import open_input, read_span

        with open_input(self.read_path or self.path, "log") as (fd, st):
            size = st.st_size
            if size < self.offset:  # truncated or rotated: start over
                self.offset, self.partial = 0, b""
            if size == self.offset:
                return b""
            data = read_span(fd, self.offset, min(MAX_READ_PER_TICK, size - self.offset))
        self.offset += len(data)
        return data

    def read(self, final: bool = False) -> Tuple[List[str], bool]:
        """(new lines, whether the file grew). Never raises; a read problem lands in .error."""
        from debug_stuck.inputs import InputError

        try:
            data = call_with_timeout(self._read_new, READ_SECONDS, f"reading {self.path}")
        except InputError as exc:
            if not exc.missing:  # a log that does not exist yet is no error: the job may create it
                self.error = exc.naming(self.path)
            return [], False
        except (OSError, CallTimedOut) as exc:
            self.error = f"log {self.path}: {exc}"
            return [], False
        if not data:
            if final and self.partial:
                text, self.partial = self.partial, b""
                return _lines(text), False
            return [], False
        if self.echo is not None:
            self.echo(data)
        data = self.partial + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if final:
            complete, self.partial = data, b""
        else:
            complete, self.partial = data[: cut + 1], data[cut + 1 :]
            if len(self.partial) > MAX_PARTIAL_LINE:  # a line that never ends is taken in pieces
                complete, self.partial = data, b""
        return _lines(complete), True


def _lines(raw: bytes) -> List[str]:
    text = raw.decode("utf-8", errors="replace")
    out = []
    for segment in re.split(r"[\r\n]", text):
        segment = _ANSI.sub("", segment).strip()
        if segment:
            out.append(segment)
    return out
