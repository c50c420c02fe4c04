"""A process waiting for a multiprocessing Pool's results (Pool.map, apply_async(...).get()): which of
its workers holds the result up, or why none will deliver it."""

from __future__ import annotations

import re
from typing import Optional

from debug_stuck.live.hop import Hop
from debug_stuck.live.parties import JobView, idle_in_queue, python_frames, replacement_worker, runs_own_task

POOL_FILE = re.compile(r"(^|/)multiprocessing/pool\.py$")


def pool_wait(job: JobView, hop: Hop) -> Optional[int]:
    """A process waiting for a multiprocessing Pool's results: its worker that is dead, stopped or
    working; when every worker idles waiting for a task, the task in flight was lost."""
    workers = [p for p in job.snap.processes if p.ppid == hop.pid and p.role == "dataloader-worker"]
    if not workers:
        return None
    hop.object = ",".join(str(w.pid) for w in workers)
    if results_handler_gone(job, hop.pid):
        hop.kind = "pool"
        hop.facts["end"] = "result-handler-died"
        hop.detail = (
            "waits for a result from its pool, but the pool's result-handler thread (Pool._handle_results) has "
            "ended: it is the one thread that hands results to waiters, so none will come. It dies when a result "
            "cannot be unpickled, most often an exception a worker raised whose __init__ takes arguments its args "
            "do not hold"
        )
        return None
    stuck = next((w for w in workers if w.state in ("Z", "D", "T", "t")), None)
    in_task = next((w for w in workers if runs_own_task(job, w.pid)), None)  # not a manager or helper
    busy = stuck or in_task or next((w for w in workers if not idle_in_queue(job, w.pid)), None)
    if busy is not None:
        hop.kind, hop.object = "worker", str(busy.pid)
        hop.detail = "waits for results from its pool workers"
        return busy.pid
    hop.kind = "pool"
    hop.facts["end"] = "lost-task"
    pids = ", ".join(str(w.pid) for w in workers)
    hop.detail = (
        f"waits for a result from its pool, but every worker (pid {pids}) idles waiting for a task: the task "
        "in flight was lost, as when a worker dies mid-task (killed, out of memory) and the pool replaces it"
    )
    newest = replacement_worker(workers)
    if newest is not None:
        hop.detail += f"; pid {newest.pid} started after its siblings: the replacement"
    return None


def results_handler_gone(job: JobView, pid: int) -> bool:
    """The process runs a multiprocessing Pool (its worker- and task-handler threads are there) whose
    result-handler thread is not: CPython 3.11.7 Lib/multiprocessing/pool.py Pool._handle_results
    unpickles each result (`task = get()`), and an exception there ends the thread; nothing else sets
    the results the waiters' ApplyResult and MapResult objects wait for."""
    functions = {
        frame.bare_name
        for thread in job.threads(pid)
        for frame in python_frames(thread.frames)
        if POOL_FILE.search(frame.file or "")
    }
    return {"_handle_workers", "_handle_tasks"} <= functions and "_handle_results" not in functions
