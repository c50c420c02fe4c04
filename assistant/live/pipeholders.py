"""The processes that hold the other end of a pipe the job waits on, outside its process tree.

A child the job started may start one of its own in the background (`sleep 3600 &`, a monitor, a
daemon) and exit: the grandchild is re-parented to init (or a subreaper), so it is no descendant of
the job any more, yet it keeps the job's pipe open, and `subprocess.run(capture_output=True)` waits
for an end-of-file that never comes. Such a process belongs to the job: it holds the job's pipe, runs
in the job's session and was started after the job. It is taken into the job's processes, so the
chain can end at it.
"""

from __future__ import annotations

from typing import Dict, List, Optional

MAX_ADOPTED = 4


def _watched_pipe_holders(wait: dict) -> List[dict]:
    """The holders of every pipe a poll watches (subprocess's communicate()), but the poller's own fd."""
    return [
        end
        for watched in wait.get("watched") or []
        if (watched.get("object") or {}).get("kind") == "pipe"
        for end in (watched["object"].get("peers") or [])
    ]


def pipe_ends(wait: dict) -> List[dict]:
    """The holders of the pipes a wait is on, other than the waiting descriptor itself: a read's or
    write's `peers`, and those of every pipe a poll watches."""
    own = list(wait.get("peers") or []) if (wait.get("object") or {}).get("kind") in ("pipe", "fifo") else []
    return own + _watched_pipe_holders(wait)


def watched_pipe_writers(wait: dict) -> List[dict]:
    """The writers of the pipes a poll watches (the holders with the pipe open for writing)."""
    return [end for end in _watched_pipe_holders(wait) if end.get("mode") in ("w", "rw")]


def _session(pid: int) -> Optional[int]:
    import os

    try:
        return os.getsid(pid)
    except OSError:
        return None


def _belongs(holder: int, waiter) -> bool:
    """Started after the waiting process, in its session: what the job (or a child of it) started."""
    import psutil

    from debug_stuck.probes.collectors.procs import _this_tool

    session = _session(holder)
    if holder in _this_tool() or session is None or session != _session(waiter.pid):
        return False
    try:
        started = psutil.Process(holder).create_time()
    except psutil.Error:
        return False
    return waiter.create_time is None or started >= waiter.create_time


def adopt_pipe_holders(snap) -> List[str]:
    """Take into `snap.processes` the processes outside the job that hold the other end of a pipe a
    thread of one of its Python processes waits on, and belong to the job (_belongs); their state and
    waits are read as the job's were. Returns a note for each."""
    from debug_stuck.probes.collectors.procs import InspectError, read_process, read_states

    job = {p.pid: p for p in snap.processes}
    found: Dict[int, int] = {}
    # the pipes the job's own Python code waits on: a program it runs (a shell asking on its stdin) is
    # itself the end of its wait, whoever holds the other end (live.chain's stdin reads)
    for info in (p for p in snap.processes if p.python):
        for wait in info.waits.values():
            for end in pipe_ends(wait):
                pid = end.get("pid")
                if pid is None or pid in job or pid in found or len(found) >= MAX_ADOPTED:
                    continue
                if _belongs(pid, info):
                    found[pid] = info.pid
    notes = []
    for pid, waiter in found.items():
        try:
            stray = read_process(pid)
        except InspectError:
            continue
        read_states([stray])
        stray.adopted_by = waiter
        snap.processes.append(stray)
        command = " ".join(stray.cmdline)[:80] or stray.name
        notes.append(
            f"pid {pid} ({command}) is taken as part of the job: it holds the other end of a pipe pid {waiter} "
            f"waits on, runs in its session and started after it (its parent is now pid {stray.ppid})"
        )
    return notes
