"""Walk the folders a job writes to, bounded in depth, count and time (never following links)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Iterable, List

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.recovery.reading import at

SCAN_SECONDS = 10.0
SCAN_MAX_ENTRIES = 20_000
SCAN_MAX_DEPTH = 4  # cwd/lightning_logs/version_0/checkpoints/x.ckpt

SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    "node_modules",
    "site-packages",
    "dist-packages",
    "venv",
    ".venv",
    "wandb",
    ".ipynb_checkpoints",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
}
SKIP_ROOTS = ("/proc", "/sys", "/dev", "/run")


@dataclass
class Entry:
    path: str
    is_dir: bool
    mtime: float
    names: List[str] = field(default_factory=list)  # a directory's entries


@dataclass
class Scan:
    entries: List[Entry] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def dirs(self) -> List[Entry]:
        return [e for e in self.entries if e.is_dir]

    def files(self) -> List[Entry]:
        return [e for e in self.entries if not e.is_dir]


def walk(roots: Iterable[str], max_depth: int = SCAN_MAX_DEPTH, seconds: float = SCAN_SECONDS) -> Scan:
    """Files and directories under roots (depth- and count-limited, never following links), bounded
    in time: a walk on a hung mount returns what it found so far, with a note saying so."""
    scan = Scan()
    seen: set = set()
    stop = threading.Event()
    found: List[Entry] = []

    def visit(path: str, depth: int) -> None:
        if stop.is_set() or len(found) >= SCAN_MAX_ENTRIES:
            return
        try:
            with os.scandir(at(path)) as it:
                children = list(it)
        except OSError:
            return
        names = sorted(c.name for c in children)
        try:
            mtime = os.stat(at(path)).st_mtime
        except OSError:
            mtime = 0.0
        found.append(Entry(path, True, mtime, names))
        if "pyvenv.cfg" in names:
            return
        for child in sorted(children, key=lambda c: c.name):
            if stop.is_set() or len(found) >= SCAN_MAX_ENTRIES:
                return
            named = os.path.join(path, child.name)  # as the job names it, not as it is reached from here
            try:
                if child.is_dir(follow_symlinks=False):
                    if child.name in SKIP_DIRS or (child.name.startswith(".") and child.name != ".cache"):
                        continue
                    if depth < max_depth:
                        visit(named, depth + 1)
                    else:
                        found.append(Entry(named, True, child.stat(follow_symlinks=False).st_mtime))
                elif child.is_file():
                    found.append(Entry(named, False, child.stat().st_mtime))
                elif not child.is_symlink():
                    found.append(Entry(named, False, child.stat(follow_symlinks=False).st_mtime))
            except OSError:
                continue

    def run() -> None:
        for root in roots:
            real = os.path.realpath(root)
            if real in seen or real.startswith(SKIP_ROOTS) or real == "/":
                continue
            seen.add(real)
            visit(root, 0)

    try:
        call_with_timeout(run, seconds, "walking the job's folders")
    except CallTimedOut:
        stop.set()
        scan.notes.append(
            f"walking {', '.join(roots)} did not finish within {seconds:g} s (a hung mount?): "
            "only what was found by then was considered"
        )
    if len(found) >= SCAN_MAX_ENTRIES:
        scan.notes.append(f"looked at the first {SCAN_MAX_ENTRIES} files and folders only")
    scan.entries = list(found)
    return scan
