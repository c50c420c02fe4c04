"""The files a job holds open: its stdout/stderr logs and the regular files it writes.

Each is read through ``/proc/P/fd/N``, the job's own open file, never by re-resolving the path that
``readlink`` shows: that path means something in the job's mount namespace (a container, a private
/tmp) and possibly something else, even a root-only file, in ours. A file the job appends to during
the sampling window is progress, whatever its name (a FileHandler log, a metrics CSV, a journal).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Dict, List, Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout

STAT_SECONDS = 2.0  # a stat of a file on a hung network mount never returns
LIST_SECONDS = 2.0
MAX_FDS_PER_PROCESS = 4096  # listed; a process with more is read up to this many
MAX_WRITTEN_PER_PROCESS = 32
MAX_WRITTEN = 128
# Text the job writes line by line: worth reading the tail of, like its stdout.
TEXT_LOG = re.compile(r"\.(log|txt|out|err|stdout|stderr)(\.\d+)?$|(^|/)(stdout|stderr|log)$", re.I)
_NOT_FILES = ("pipe:", "socket:", "anon_inode:", "/dev/", "/proc/", "/sys/", "/memfd:")


@dataclass
class JobFile:
    path: str  # as the job sees it (readlink of its fd)
    read_path: str  # /proc/P/fd/N: the very file the job has open
    pid: int
    fd: int
    role: str  # stdout | stderr | written

    @property
    def text_log(self) -> bool:
        return self.role in ("stdout", "stderr") or bool(TEXT_LOG.search(self.path))


def _bounded(fn, seconds: float, what: str, default=None):
    try:
        return call_with_timeout(fn, seconds, what)
    except (OSError, CallTimedOut, ValueError):
        return default


def sizes_of(read_paths: List[str], seconds: float = STAT_SECONDS) -> Dict[str, Optional[int]]:
    """Sizes of many files within one time bound: each stat in its own daemon thread, so a file on a
    hung mount costs the budget once and never blocks the others (or the tool's exit)."""
    import threading
    import time

    found: Dict[str, Optional[int]] = {}

    def one(path: str) -> None:
        try:
            st = os.stat(path)
            found[path] = st.st_size if stat.S_ISREG(st.st_mode) else None
        except (OSError, ValueError):
            found[path] = None

    threads = []
    for path in dict.fromkeys(read_paths):
        thread = threading.Thread(target=one, args=(path,), name="jobfiles:stat", daemon=True)
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {path: found.get(path) for path in read_paths}


def _write_mode(fdinfo: str) -> bool:
    for line in fdinfo.splitlines():
        if line.startswith("flags:"):
            try:
                flags = int(line.split()[1], 8)
            except (IndexError, ValueError):
                return False
            return (flags & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    return False


def _read_small(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:
        return fh.read(4096)


def _is_file(target: Optional[str]) -> bool:
    return bool(target) and target.startswith("/") and not target.startswith(_NOT_FILES)


def _scan(pid: int) -> List[JobFile]:
    """readlink and fdinfo of /proc entries never touch the file system the file lives on, so one
    time bound covers the whole scan of a process."""
    out: List[JobFile] = []
    written = 0
    names = sorted((n for n in os.listdir(f"/proc/{pid}/fd") if n.isdigit()), key=int)
    for name in names[:MAX_FDS_PER_PROCESS]:
        fd = int(name)
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not _is_file(target):
            continue
        if fd in (1, 2):
            out.append(JobFile(target, f"/proc/{pid}/fd/{fd}", pid, fd, "stdout" if fd == 1 else "stderr"))
            continue
        if written >= MAX_WRITTEN_PER_PROCESS or target.endswith(" (deleted)"):
            continue
        try:
            info = _read_small(f"/proc/{pid}/fdinfo/{fd}")
        except OSError:
            continue
        if _write_mode(info):
            out.append(JobFile(target, f"/proc/{pid}/fd/{fd}", pid, fd, "written"))
            written += 1
    return out


def process_files(pid: int) -> List[JobFile]:
    """pid's stdout/stderr when they are files, and the regular files it holds open for writing."""
    return _bounded(lambda: _scan(pid), LIST_SECONDS, f"listing the files of {pid}", []) or []


def std_streams(pid: int) -> List[JobFile]:
    """pid's stdout and stderr, where they are regular files."""
    return [f for f in process_files(pid) if f.role != "written"]


def job_files(pids: List[int], writers: Optional[List[int]] = None) -> List[JobFile]:
    """stdout/stderr files first, then the files written; one entry per file the job sees.
    Only the files that `writers` (default: every pid) write count: a tracker's service process
    (wandb-core, a child of the trainer) keeps writing its own logs while the training is hung."""
    from concurrent.futures import ThreadPoolExecutor

    writers = set(pids if writers is None else writers)
    streams: List[JobFile] = []
    written: List[JobFile] = []
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="jobfiles") as pool:
        for found in pool.map(process_files, pids):
            streams += [f for f in found if f.role != "written"]
            written += [f for f in found if f.role == "written" and f.pid in writers]
    seen = set()
    out = []
    for entry in streams + written[:MAX_WRITTEN]:
        if entry.path in seen:
            continue
        seen.add(entry.path)
        out.append(entry)
    return out
