"""A thread that waits for an Event (or a Condition) which another thread of its process sets only
after its own wait, for the waiting thread, has ended.

    futures = [pool.submit(evaluate, i) for i in range(4)]
    wait(futures)               # waits for the tasks...
    weights_synced.set()        # ...which wait for this

The setter's own code holds the set() a few lines below the line where it waits: read from its
source (never run), the Event named as the waiting line names it. The setter is the next hop, and
the chain closes on itself.
"""

from __future__ import annotations

from typing import Optional, Tuple

from debug_stuck.live.loops import enclosing_function, own_frame_index
from debug_stuck.live.selflock import attribute_calls, frame_source, parse_source

# what ends a wait on each call: an Event's or a Condition's wait, a queue.Queue's get (CPython 3.11
# Lib/queue.py: get blocks until an item is available, which put() adds)
SETTERS = {"wait": ("set", "notify", "notify_all"), "get": ("put", "put_nowait")}


def _waited_call(frame, pid) -> Optional[Tuple[str, str]]:
    """(object, method) the frame's line waits in: ("weights_synced", "wait"), ("grads", "get")."""
    calls = attribute_calls(parse_source(frame_source(frame, pid)), tuple(SETTERS))
    return next(((target, call.func.attr) for call, target in calls if call.lineno == frame.line), None)


def _waited(frame, pid) -> Optional[str]:
    """The object the frame's line waits on: `weights_synced` for `weights_synced.wait()`."""
    found = _waited_call(frame, pid)
    return found[0] if found is not None and found[1] == "wait" else None


def _calls_below(frame, pid, methods) -> list:
    """(line, receiver) of each x.m() with m in methods below the frame's line, in its function (or
    module code), in line order."""
    tree = parse_source(frame_source(frame, pid))
    scope = (enclosing_function(tree, frame.line) or tree) if tree is not None else None
    calls = attribute_calls(scope, methods) if scope is not None else []
    return sorted((call.lineno, receiver) for call, receiver in calls if call.lineno > frame.line)


def _set_below(frame, pid, target: str, method: str = "wait") -> Optional[int]:
    """The first line after the frame's own, in the same function (or module code), that calls
    target.set() (notify, notify_all; for a get, target.put())."""
    return next((line for line, receiver in _calls_below(frame, pid, SETTERS[method]) if receiver == target), None)


def _sets_below(frame, pid) -> list:
    """(line, receiver) of each x.set() below the frame's line, in its function (or module code)."""
    return _calls_below(frame, pid, ("set",))


def set_after_wait(job, hop, thread) -> Optional[Tuple[int, int]]:
    """(pid, tid) of the thread whose own code sets what hop's thread waits for, below the line where
    that thread itself waits; the hop's words say so (`setter`, `set_at`). None when no such thread."""
    if thread is None:
        return None
    index = own_frame_index(thread.frames)
    waited = _waited_call(thread.frames[index], hop.pid) if index is not None else None
    if waited is None:
        return None
    target, method = waited
    for other in job.threads(hop.pid):
        if other.tid == thread.tid or (job.wait(hop.pid, other.tid) or {}).get("op") != "futex":
            continue
        at = own_frame_index(other.frames)
        if at is None:
            continue
        frame = other.frames[at]
        line = _set_below(frame, hop.pid, target, method)
        if line is None:
            continue
        hop.kind, hop.object = "thread", str(other.tid)
        set_at = f"{frame.bare_name} ({frame.file}:{line})"
        if method == "get":  # a queue the other thread fills below its own wait
            hop.facts.update(putter=other.name or str(other.tid), put_at=set_at, queue=target)
        else:
            hop.facts.update(setter=other.name or str(other.tid), set_at=set_at, event=target)
        verb = "puts into" if method == "get" else "sets"
        hop.detail = (
            f"waits for {target} at {thread.frames[index].text()}, which thread {other.name!r} {verb} only at "
            f"{frame.file}:{line}, after {frame.text()}, where it waits itself"
        )
        return hop.pid, other.tid
    return None


def parent_sets_after_join(job, hop, thread) -> Optional[Tuple[int, int]]:
    """(parent pid, its main thread) when hop's process waits at a multiprocessing Event (or
    Condition) its parent sets only below the line where the parent waits for this process to end
    (`ev.join()`, then `ckpt_ready.set()`): read from the parent's source (never run), the Event as
    each side's code names it. The hop's words say so (`setter`, `set_at`, `event`, `setter_pid`)."""
    index = own_frame_index(thread.frames) if thread is not None else None
    target = _waited(thread.frames[index], hop.pid) if index is not None else None
    info = job.procs.get(hop.pid)
    parent = job.procs.get(info.ppid) if info is not None and target is not None else None
    main = job.thread(parent.pid) if parent is not None else None
    if main is None or (job.wait(parent.pid, main.tid) or {}).get("op") != "wait-child":
        return None
    at = own_frame_index(main.frames)
    if at is None:
        return None
    frame = main.frames[at]
    line = _set_below(frame, parent.pid, target)
    if line is None:
        # the child names the Event as its parameter (`ready`), the parent as its own variable: the one
        # Event the parent's code sets below its join
        found = _sets_below(frame, parent.pid)
        if len({receiver for _, receiver in found}) != 1:
            return None
        line, target = found[0]
    hop.kind, hop.object = "process", str(parent.pid)
    set_at = f"{frame.bare_name} ({frame.file}:{line})"
    hop.facts.update(setter=main.name or "MainThread", setter_pid=str(parent.pid), set_at=set_at, event=target)
    hop.detail = (
        f"waits for {target} at {thread.frames[index].text()}, which its parent pid {parent.pid} sets only at "
        f"{frame.file}:{line}, after {frame.text()}, where it waits for this process to end"
    )
    return parent.pid, main.tid


def waits_for_itself(job, hop, thread) -> bool:
    """Mark hop (end `self-wait`, `waited` the queue or Event as the line names it, `put_by`) when its
    thread waits at its own line for a queue item (an Event's set) that only one of its own outer
    frames puts, on a line below the one it stands at: after the call it is in returns (a batch
    sampler waiting for the loss the training loop puts, called by a DataLoader that prefetches the
    next indices). No other thread of the job's code runs in the process."""
    from debug_stuck.live.loops import is_library, job_roots
    from debug_stuck.live.parties import python_frames

    index = own_frame_index(thread.frames) if thread is not None else None
    waited = _waited_call(thread.frames[index], hop.pid) if index is not None else None
    if waited is None or "end" in hop.facts:
        return False
    others = [t for t in job.threads(hop.pid) if t.tid != thread.tid and own_frame_index(t.frames) is not None]
    if others:
        return False
    target, method = waited
    short = target.rsplit(".", 1)[-1]
    roots = job_roots([thread.frames])
    for outer in python_frames(thread.frames[index + 1 :]):
        if is_library(outer, roots):
            continue
        found = next(
            (
                line
                for line, receiver in _calls_below(outer, hop.pid, SETTERS[method])
                if receiver.rsplit(".", 1)[-1] == short
            ),
            None,
        )
        if found is None:
            continue
        put_by = f"{outer.bare_name} ({outer.file}:{found})"
        hop.facts.update(end="self-wait", put_by=put_by, waited=target)
        hop.detail += (
            f"; only its own outer code {'puts into' if method == 'get' else 'sets'} {target}, at {put_by}, once the "
            f"call it makes at {outer.text()} returns: it waits for itself"
        )
        return True
    return False
