"""A forked child waiting on a queue that only a thread of its parent fills.

fork(2) copies the parent's memory, a queue.Queue with it, but "a process shall be created with a
single thread" (POSIX): a thread the parent started before the fork (a Dataset's prefetch thread
started in __init__, then DataLoader workers forked from it) has no copy in the child. The child's
get() waits on its own copy of the queue, which nothing in it fills, once the items copied with it
are taken (CPython 3.11.7 Lib/queue.py: get blocks while the queue is empty).
"""

from __future__ import annotations

from typing import Optional

from debug_stuck.live.loops import enclosing_function, own_frame_index
from debug_stuck.live.parties import FORKED_BY_MULTIPROCESSING, JobView, python_frames
from debug_stuck.live.selflock import attribute_calls, receivers_at
from debug_stuck.live.syncwaits import QUEUE_FILE, in_first_frames, own_source


def _queue_read(job: JobView, pid: int, thread) -> Optional[str]:
    """The queue a thread waits to get from, as its own line names it (self.q)."""
    if not in_first_frames(thread, ("get",), QUEUE_FILE):
        return None
    frame, tree = own_source(thread.frames, pid)
    calls = receivers_at(tree, ("get",), frame.line) if tree is not None else []
    return calls[0] if len(calls) == 1 else None


def fork_lost_filler(job: JobView, hop, thread) -> bool:
    """The hop's thread, the only thread that runs the job's code in a process multiprocessing forked, waits in get() on
    a queue, and a thread of the parent other than its main thread runs a function of the same file
    that puts into a queue named alike: the filler is the parent's, none runs here. `end`
    fork-filler, `queue`, `forked_by`, `filled_by` (the parent's filler thread and where it puts)."""
    frames = [f for f in thread.frames if not f.native]
    if not any(FORKED_BY_MULTIPROCESSING.search(f.file or "") for f in frames):
        return False
    if any(t.tid != thread.tid and own_frame_index(t.frames) is not None for t in job.threads(hop.pid)):
        return False  # another thread runs the job's code here (multiprocessing's own helpers do not count)
    queue = _queue_read(job, hop.pid, thread)
    info = job.procs.get(hop.pid)
    parent = info.ppid if info is not None else None
    if queue is None or parent not in job.procs:
        return False
    short = queue.rsplit(".", 1)[-1]
    mine, _tree = own_source(thread.frames, hop.pid)
    for other in job.threads(parent):
        if other.tid == parent or not python_frames(other.frames):
            continue
        frame, tree = own_source(other.frames, parent)
        if tree is None or frame.file != mine.file:
            continue
        body = attribute_calls(enclosing_function(tree, frame.line or 0), ("put", "put_nowait"))
        if not any(r.rsplit(".", 1)[-1] == short for _c, r in body):
            continue
        filler = f"thread {other.name!r} of pid {parent} at {frame.text()}"
        hop.facts.update(end="fork-filler", queue=queue, forked_by=str(parent), filled_by=filler)
        hop.parties = [{"tid": other.tid, "name": other.name, "where": frame.text()}]
        hop.detail += (
            f"; only thread {other.name!r} of pid {parent} fills {queue} ({frame.text()}): fork copied the "
            "queue into this process but not that thread, so nothing here puts into it"
        )
        return True
    return False
