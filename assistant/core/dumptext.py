"""Python's faulthandler dump as text ("Thread 0x... (most recent call first):" then `File "...",
line N in func` frames, innermost first), and file names shortened the way py-spy shows them.
Shared by the log reader (stack dumps pasted in logs) and the hook reader (dumps the job wrote)."""

from __future__ import annotations

import re
from typing import List, Tuple

FH_START = re.compile(
    r"^(?:Current thread|Thread) (?P<ident>0x[0-9a-f]+)(?: \[(?P<name>[^\]]*)\])? \(most recent call first\):"
)
FH_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def short_path(path: str, basename: bool = False) -> str:
    """site-packages/x/y.py -> x/y.py, /usr/lib/python3.11/threading.py -> threading.py; any other
    path as it is, or its last part with `basename` (what py-spy's short_filename gives)."""
    path = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    m = re.search(r"/lib/python\d+\.\d+t?/(.+)$", path)
    if m:
        return m.group(1)
    return (path.rsplit("/", 1)[-1] or path) if basename else path


def parse_faulthandler(lines: List[str]) -> List[Tuple[str, List[Tuple[str, str, int]]]]:
    """Every thread of a faulthandler dump: (ident, frames as (function, file, line), innermost first)."""
    threads = []
    current = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        head = FH_START.match(line.strip())
        if head:
            current = (head["ident"], [])
            threads.append(current)
            continue
        frame = FH_FRAME.match(line)
        if frame and current is not None:
            current[1].append((frame["func"], frame["file"], int(frame["line"])))
        elif line.strip():
            current = None
    return threads
