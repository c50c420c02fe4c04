"""The watched job's process tree: CPU and I/O counters, cheap enough for every poll."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.recovery.reading import READ_SECONDS

TREE_REFRESH_SECONDS = 5.0  # how often the process tree is re-listed
MAX_STACK_PROCESSES = 8


@dataclass
class TreeSample:
    alive: bool
    processes: int = 0
    cpu_percent: Optional[float] = None  # % of one core, the whole tree
    cpu_by_pid: Dict[int, float] = field(default_factory=dict)  # % of one core, each process seen twice
    io_bytes_per_second: Optional[float] = None
    states: Dict[int, str] = field(default_factory=dict)


class ProcessTree:
    def __init__(self, root: int):
        self.root = root
        self.procs: Dict[int, psutil.Process] = {}
        self.python: Dict[int, bool] = {}
        self.listed_at: Optional[float] = None
        self.counters: Dict[int, Tuple[float, Optional[int]]] = {}
        self.sampled_at: Optional[float] = None

    def _list(self) -> None:
        top = psutil.Process(self.root)
        found = {top.pid: top}
        for child in top.children(recursive=True):
            found[child.pid] = child
        for pid, proc in found.items():
            if pid not in self.python:
                try:
                    head = " ".join(proc.cmdline()[:1]) + " " + proc.name()
                except psutil.Error:
                    head = ""
                self.python[pid] = "python" in head.lower()
        self.procs = found

    def _counters(self) -> Dict[int, Tuple[float, Optional[int], str]]:
        out = {}
        for pid, proc in list(self.procs.items()):
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    status = proc.status()
                    try:
                        io = proc.io_counters()
                        moved = getattr(io, "read_chars", io.read_bytes) + getattr(io, "write_chars", io.write_bytes)
                    except (psutil.AccessDenied, AttributeError):
                        moved = None
            except psutil.Error:
                continue
            out[pid] = (times.user + times.system, moved, status)
        return out

    def sample(self, now: float) -> TreeSample:
        """Never raises: a tree that cannot be read is reported as such (alive stays True)."""
        try:
            if not psutil.pid_exists(self.root):
                return TreeSample(alive=False)
            if self.listed_at is None or now - self.listed_at >= TREE_REFRESH_SECONDS:
                call_with_timeout(self._list, READ_SECONDS, f"listing the processes of {self.root}")
                self.listed_at = now
            counters = call_with_timeout(self._counters, READ_SECONDS, f"reading counters of {self.root}")
        except psutil.NoSuchProcess:
            return TreeSample(alive=False)
        except (psutil.Error, OSError, CallTimedOut):
            return TreeSample(alive=True)
        sample = TreeSample(alive=True, processes=len(counters))
        sample.states = {pid: c[2] for pid, c in counters.items()}
        if self.sampled_at is not None and now > self.sampled_at:
            elapsed = now - self.sampled_at
            cpu = io = 0.0
            known_io = False
            for pid, (cpu_s, moved, _) in counters.items():
                before = self.counters.get(pid)
                if before is None:
                    continue
                used = max(0.0, cpu_s - before[0])
                cpu += used
                sample.cpu_by_pid[pid] = round(100.0 * used / elapsed, 1)
                if moved is not None and before[1] is not None:
                    io += max(0, moved - before[1])
                    known_io = True
            sample.cpu_percent = round(100.0 * cpu / elapsed, 1)
            sample.io_bytes_per_second = round(io / elapsed) if known_io else None
        self.counters = {pid: (c[0], c[1]) for pid, c in counters.items()}
        self.sampled_at = now
        if self.root in sample.states and sample.states[self.root] == psutil.STATUS_ZOMBIE:
            sample.alive = False
        return sample

    def refresh(self, now: float) -> None:
        """List the tree again now (a launcher's ranks may have appeared since the last listing)."""
        try:
            call_with_timeout(self._list, READ_SECONDS, f"listing the processes of {self.root}")
            self.listed_at = now
        except (psutil.Error, OSError, CallTimedOut):
            pass

    def python_pids(self) -> List[int]:
        pids = [pid for pid in self.procs if self.python.get(pid)]
        pids.sort(key=lambda p: (p != self.root, p))
        return pids[:MAX_STACK_PROCESSES]

    def remembered(self) -> List[int]:
        return list(self.procs)
