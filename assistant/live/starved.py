"""A thread pool starved by its own queue: every worker of a ThreadPoolExecutor waits, inside its
task, on a queue.Queue that only a task still queued in that same pool would drain (or fill).

CPython 3.11.7 Lib/concurrent/futures/thread.py: a ThreadPoolExecutor runs at most max_workers
tasks at once and starts a queued one only when a worker returns from its task; Lib/queue.py: put
blocks while the queue is full, get while it is empty. Readers submitted before their consumer fill
the queue and wait for room that only the consumer, still waiting for a worker, would make.
"""

from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from debug_stuck.live.parties import JobView, pool_of, python_frames
from debug_stuck.live.selflock import attribute_calls, receivers_at
from debug_stuck.live.syncwaits import EXECUTOR_FILE, QUEUE_FILE, in_first_frames, own_source

# the other side of a blocked call: a worker blocked in put waits for a get, one in get for a put
_OTHER_SIDE = {"put": ("get", "get_nowait"), "get": ("put", "put_nowait")}
_SUBMITS = ("submit", "map")


def _pool_workers(job: JobView, pid: int) -> dict:
    """The process's ThreadPoolExecutor workers, by pool name (from the thread names, parties.pool_of)."""
    pools: dict = {}
    for thread in job.threads(pid):
        py = python_frames(thread.frames)
        if pool_of(thread.name) and any(f.bare_name == "_worker" and EXECUTOR_FILE.search(f.file or "") for f in py):
            pools.setdefault(pool_of(thread.name), []).append(thread)
    return pools


def _blocked_on(job: JobView, pid: int, worker) -> Optional[Tuple[str, str, object]]:
    """(put or get, the queue as the worker's own line names it, that frame with its parsed file)."""
    for side in ("put", "get"):
        if not in_first_frames(worker, (side,), QUEUE_FILE):
            continue
        frame, tree = own_source(worker.frames, pid)
        if tree is None:
            return None
        calls = receivers_at(tree, (side, f"{side}_nowait"), frame.line)
        return (side, calls[0], (frame, tree)) if len(calls) == 1 else None
    return None


def _queued_tasks(tree: ast.AST, queue: str, side: str) -> List[Tuple[str, int]]:
    """(function, line of its submit) for each function of the file that calls the other side on the
    queue and is handed to an executor's submit() or map()."""
    short = queue.rsplit(".", 1)[-1]
    serving = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(r.rsplit(".", 1)[-1] == short for _c, r in attribute_calls(node, _OTHER_SIDE[side]))
    }
    return [
        (call.args[0].id, call.lineno)
        for call, _r in attribute_calls(tree, _SUBMITS)
        if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in serving
    ]


def queued_behind(job: JobView, hop, thread) -> bool:
    """The hop's thread, outside the pool, waits on a queue or a future, while every worker of one of
    its process's thread pools waits on one queue whose other side only a function the file submits
    to a pool would serve, and no thread runs that function: it waits in the pool's work queue for a
    worker that will never be free. The hop ends at the pool (`end` queued-behind, `queue`, `queued`,
    `submitted_at`, `threads`)."""
    if pool_of(thread.name) and any(EXECUTOR_FILE.search(f.file or "") for f in python_frames(thread.frames)):
        return False
    for pool, workers in _pool_workers(job, hop.pid).items():
        blocked = [_blocked_on(job, hop.pid, w) for w in workers]
        if None in blocked or len({(side, queue) for side, queue, _ in blocked}) != 1:
            continue
        side, queue, (frame, tree) = blocked[0]
        running = {f.bare_name for t in job.threads(hop.pid) for f in python_frames(t.frames)}
        queued = [(name, line) for name, line in _queued_tasks(tree, queue, side) if name not in running]
        if len(queued) != 1:
            continue
        name, line = queued[0]
        hop.kind, hop.object = "pool", pool
        hop.facts.update(end="queued-behind", queue=queue, queued=name, submitted_at=f"{frame.file}:{line}")
        hop.parties = [{"tid": w.tid, "name": w.name, "where": f"{frame.file}:{frame.line}"} for w in workers]
        room = "room in" if side == "put" else "an item from"
        hop.detail += (
            f"; all {len(workers)} workers of thread pool {pool!r} wait for {room} {queue} "
            f"({frame.file}:{frame.line}), "
            f"which only {name} would {'drain' if side == 'put' else 'fill'}, and {name} (submitted at "
            f"{frame.file}:{line}) waits in that pool's queue for a worker that will never be free"
        )
        return True
    return False
