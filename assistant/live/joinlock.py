"""A thread that waits for a lock which the thread joining it holds: the join waits for the thread to
end, the thread waits for the lock, the lock is released only after the join. A watchdog Timer whose
callback takes the training step's lock while the step, holding it, cancels and joins the Timer is the
common case. Which locks a thread holds is read from the job's source (each `with` and .acquire()
enclosing its line, live.selflock.locks_at), never run."""

from __future__ import annotations

from debug_stuck.live.loops import own_frame_index
from debug_stuck.live.parties import joined_thread, locks_of, thread_party
from debug_stuck.live.selflock import locks_at, source_of


def join_under_lock(job, hop, thread) -> bool:
    """When hop's thread waits at its own line for a lock that another thread of its process holds
    (by its source) while it joins hop's thread: the hop becomes that cycle (kind lock-cycle, `end`
    join-under-lock, both threads as its parties). False otherwise."""
    if thread is None or "end" in hop.facts:
        return False
    mine = locks_of(job, hop.pid, thread)
    if mine is None:
        return False
    wanted = mine[1]
    for other in job.threads(hop.pid):
        if other.tid == thread.tid:
            continue
        joined = joined_thread(job, hop.pid, other)
        if joined is None or joined.tid != thread.tid:
            continue
        index = own_frame_index(other.frames)
        if index is None:
            continue
        frame = other.frames[index]
        held, _ = locks_at(source_of(getattr(frame, "path", None) or frame.file, hop.pid), frame.line)
        if wanted not in held:
            continue
        joiner, waiter = thread_party(other), thread_party(thread)
        hop.kind, hop.parties = "lock-cycle", [waiter, joiner]
        hop.facts.update(end="join-under-lock", lock=wanted)
        hop.detail = (
            f"waits for {wanted} at {waiter.get('where')}, which thread {other.name!r} holds while it joins this "
            f"thread at {joiner.get('where')}: the join waits for the thread to end, the thread for the lock"
        )
        return True
    return False
