"""A thread that blocks while it holds a lock the thread it waits for needs.

- join-under-lock: a thread waits for a lock which the thread joining it holds: the join waits for the
  thread to end, the thread for the lock, the lock is released only after the join. A watchdog Timer
  whose callback takes the training step's lock while the step, holding it, cancels and joins the
  Timer is the common case.
- wait-under-lock: a thread waits on a queue (or an Event, a Condition) while it holds a lock, and the
  thread whose code would fill, drain or set it waits for that lock. A logging handler whose emit puts
  on a bounded queue (logging.Handler.handle holds the handler's lock around emit) while the queue's
  drainer logs through the same handler is the common case.
- pipe-under-lock: a thread blocks writing (or reading) a pipe whose other end only its own process
  holds while it holds a lock, and the one other thread that could use that end waits for the lock:
  a stderr forwarder thread that stamps each line under the training step's lock, while the step,
  holding it, prints a dump larger than the pipe's 64 KiB.

Which locks a thread holds is read from the source of each of its frames (each `with` and .acquire()
enclosing its line, live.selflock.locks_at), never run."""

from __future__ import annotations

import ast
import re
from typing import List, Optional, Set, Tuple

from debug_stuck.live.loops import enclosing_function, own_frame_index
from debug_stuck.live.parties import (
    SYNC_FILES,
    THREADING_FILE,
    joined_thread,
    lock_waiters,
    locks_of,
    python_frames,
    thread_party,
)
from debug_stuck.live.selflock import attribute_calls, frame_source, locks_at, parse_source

MP_LOCK_FILE = re.compile(r"(^|/)multiprocessing/synchronize\.py$")
LOGGING_FILE = re.compile(r"(^|/)logging/__init__\.py$")
# the call a blocked thread makes, and the calls of another thread that would end it
RELEASED_BY = {
    "put": ("get", "get_nowait"),
    "get": ("put", "put_nowait"),
    "wait": ("set", "notify", "notify_all", "release"),
}


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
        held, _ = locks_at(frame_source(frame, hop.pid), frame.line)
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


def _held(frames, pid) -> Set[Tuple[str, str]]:
    """(file, lock) for every lock the frames hold, read from each frame's own source."""
    out = set()
    for frame in frames:
        held, _ = locks_at(frame_source(frame, pid), frame.line)
        out.update((frame.path or frame.file, name) for name in held)
    return out


def _wanted(frames, pid) -> Set[Tuple[str, str]]:
    """(file, lock) a thread waiting to acquire asks for, at each frame up to its own code: a wrapper
    (logging's Handler.acquire) names the lock one way, its caller (`self.acquire()`) another."""
    out = set()
    for frame in frames[:8]:
        _, wanted = locks_at(frame_source(frame, pid), frame.line)
        if wanted:
            out.add((frame.path or frame.file, wanted))
    return out


def _blocking_call(frame, pid) -> Optional[Tuple[str, str]]:
    """(object, method) of the queue put or get, or the wait, that the frame's line calls."""
    calls = attribute_calls(parse_source(frame_source(frame, pid)), RELEASED_BY)
    return next(((target, call.func.attr) for call, target in calls if call.lineno == frame.line), None)


def _calls_on(frame, pid, target: str, methods) -> bool:
    """The function around the frame's line calls target.<one of methods>(...)."""
    tree = parse_source(frame_source(frame, pid))
    scope = enclosing_function(tree, frame.line) if tree is not None else None
    return scope is not None and any(receiver == target for _, receiver in attribute_calls(scope, methods))


def _lock_label(file: str, name: str, frames, pid) -> str:
    """The lock as a reader knows it: its name, or for `self` and `self.x` the class whose method took it."""
    if name != "self" and not name.startswith("self."):
        return name
    for frame in frames:
        if (frame.path or frame.file) != file:
            continue
        tree = parse_source(frame_source(frame, pid))
        owner = _class_of(tree, frame.line) if tree is not None else None
        if owner:
            return f"the {owner} lock ({owner}.{frame.bare_name} holds it)"
    return name


def _class_of(tree, line: int) -> Optional[str]:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.name if best is not None else None


def wait_under_lock(job, hop, thread) -> bool:
    """When hop's thread waits on a queue (or an Event, a Condition) while it holds a lock, and the one
    thread of its process that waits for that lock is the one whose code gets from (puts on, sets)
    that same object: the hop becomes that cycle (kind lock-cycle, `end` wait-under-lock, `lock`, both
    threads as its parties). False otherwise, and when another thread may hold a lock of that name."""
    if thread is None or "end" in hop.facts or (job.wait(hop.pid, thread.tid) or {}).get("op") != "futex":
        return False
    frames = python_frames(thread.frames)
    at = next((i for i, f in enumerate(frames) if not SYNC_FILES.search(f.file or "")), None)
    if at is None or at == 0:
        return False  # the wait must be a queue's or a primitive's, called from the frame at `at`
    call = _blocking_call(frames[at], hop.pid)
    if call is None:
        return False
    target, method = call
    held = _held(frames[at:], hop.pid)
    if not held:
        return False
    waiters: List = []
    for other in lock_waiters(job, hop.pid, thread.tid):
        wanted = _wanted(python_frames(other.frames), hop.pid) & held
        if wanted:
            waiters.append((other, wanted))
    if len(waiters) != 1:
        return False
    other, wanted = waiters[0]
    rivals = [
        t
        for t in job.threads(hop.pid)
        if t.tid not in (thread.tid, other.tid) and _held(python_frames(t.frames), hop.pid) & wanted
    ]
    releases = RELEASED_BY[method]
    theirs = python_frames(other.frames)
    if rivals or not any(_calls_on(f, hop.pid, target, releases) for f in theirs):
        return False
    file, name = sorted(wanted)[0]
    lock = _lock_label(file, name, frames[at:], hop.pid)
    blocked, releaser = thread_party(thread), thread_party(other)
    own = own_frame_index(other.frames)
    if own is not None:  # where its own code stands, not logging's acquire
        frame = other.frames[own]
        releaser.update(function=frame.bare_name, file=frame.path or frame.file, line=frame.line, where=frame.text())
    blocked.update(call=f"{target}.{method}()")
    releaser["calls"] = f"{target}.{releases[0]}()"
    _mark_cycle(hop, "wait-under-lock", target, [blocked, releaser], lock, file)
    hop.detail += (
        f", holding {lock}; thread {other.name!r}, whose code calls {target}.{releases[0]}() "
        f"(at {releaser.get('where')}), waits for that lock: neither can go on"
    )
    return True


def _mark_cycle(hop, end: str, target: str, parties: list, lock: str, file: str) -> None:
    """The hop becomes a lock cycle: `end`, `lock`, both threads as its parties, and `lock_module`
    "logging" when the lock is a logging handler's (logging.Handler.handle holds it around emit)."""
    hop.kind, hop.object, hop.parties = "lock-cycle", target, parties
    hop.facts.update(end=end, lock=lock)
    if LOGGING_FILE.search(file):
        hop.facts["lock_module"] = "logging"


def pipe_under_lock(job, hop, thread, other) -> bool:
    """hop's thread blocks on a pipe whose other end only its own process holds while it holds a lock
    (by its source), and `other`, the one other thread that could use that end, waits for that lock:
    the hop becomes that cycle (kind lock-cycle, `end` pipe-under-lock, `lock`, both threads as its
    parties). pipe(7): a write to a full pipe blocks until it is read."""
    held = _held(python_frames(thread.frames), hop.pid)
    if not held or other not in lock_waiters(job, hop.pid, thread.tid):
        return False
    wanted = _wanted(python_frames(other.frames), hop.pid) & held
    if not wanted:
        return False
    file, name = sorted(wanted)[0]
    lock = _lock_label(file, name, python_frames(thread.frames), hop.pid)
    blocked, releaser = thread_party(thread), thread_party(other)
    reading = hop.op != "write"
    blocked["call"] = "a read of the pipe" if reading else "a write to the pipe"
    releaser["calls"] = "a write to it" if reading else "a read of it"
    _mark_cycle(hop, "pipe-under-lock", "pipe", [blocked, releaser], lock, file)
    hop.detail += (
        f", holding {lock}; thread {other.name!r}, the only one that can {'write' if reading else 'read'} "
        f"that pipe, waits for that lock at {releaser.get('where')}: neither can go on"
    )
    return True


def _same_lock(wanted: str, held: str) -> bool:
    """Whether two processes' names for a lock are one lock: the same name (`stats_lock`, passed to a
    child), or one attribute reached through two names (`self.cache_lock` in a Dataset's method in a
    DataLoader worker, `ds.cache_lock` in the main process that made the Dataset)."""
    if wanted == held:
        return True
    return "." in wanted and "." in held and wanted.rsplit(".", 1)[1] == held.rsplit(".", 1)[1]


def thread_lock_holder(job, hop, thread):
    """(pid, tid) of the one other thread of hop's process whose frames hold, by their own source, the
    threading lock hop's thread waits for at its own line (`with state_lock:` around a checkpoint's
    pickling): the hop names it (`lock`; its kind stays futex). None when no one, or more than one,
    holds it."""
    if thread is None or (job.wait(hop.pid, thread.tid) or {}).get("op") != "futex":
        return None
    at = own_frame_index(thread.frames)
    between = thread.frames[:at] if at is not None else []
    if at is None or any(not (f.native or THREADING_FILE.search(f.file or "")) for f in between):
        return None  # only the lock's own acquire (a C lock's has no frame; a Condition's is threading.py)
    _, wanted = locks_at(frame_source(thread.frames[at], hop.pid), thread.frames[at].line)
    if not wanted:
        return None
    holders = []
    for other in job.threads(hop.pid):
        if other.tid == thread.tid:
            continue
        names = [name for _, name in _held(python_frames(other.frames), hop.pid) if _same_lock(wanted, name)]
        if names:
            holders.append((other, names[0]))
    if len(holders) != 1:
        return None
    other, name = holders[0]
    index = own_frame_index(other.frames)
    inside = f" encloses {other.frames[index].text()}" if index is not None else ""
    hop.object = wanted  # kind stays futex: a thread's lock, not a file's
    hop.facts["lock"] = name
    where = thread_party(thread).get("where")
    hop.detail = f"waits for {wanted} at {where}, which thread {other.name!r} holds: its `with {name}:`{inside}"
    return hop.pid, other.tid


def process_lock_holder(job, hop, thread):
    """(pid, tid) of the thread of another process of the job that holds, by its own source, the
    multiprocessing lock hop's thread waits for at its own line (the lock passed to a child keeps its
    name on both sides, `with stats_lock:`): the hop names it (`lock`). None when no one, or more than
    one, holds a lock of that name."""
    if thread is None:
        return None
    at = own_frame_index(thread.frames)
    between = thread.frames[:at] if at is not None else []
    if at is None or any(not (f.native or MP_LOCK_FILE.search(f.file or "")) for f in between):
        return None  # only the lock's own acquire (multiprocessing.synchronize's __enter__) under the job's line
    _, wanted = locks_at(frame_source(thread.frames[at], hop.pid), thread.frames[at].line)
    if not wanted:
        return None
    holders = []
    for pid in job.procs:
        if pid == hop.pid:
            continue
        for other in job.threads(pid):
            index = own_frame_index(other.frames)
            if index is None:
                continue
            frame = other.frames[index]
            held, _ = locks_at(frame_source(frame, pid), frame.line)
            name = next((h for h in held if _same_lock(wanted, h)), None)
            if name is not None:
                holders.append((pid, other, name))
    if len(holders) != 1:
        return None
    pid, other, name = holders[0]
    index = own_frame_index(other.frames)
    hop.kind, hop.object = "process", str(pid)
    hop.facts["lock"] = name  # as the holder's code names it: the `with` block to change
    hop.detail = (
        f"waits for the multiprocessing lock {wanted} at {thread_party(thread).get('where')}, which pid {pid} holds: "
        f"its `with {name}:` encloses {other.frames[index].text()}, where it waits"
    )
    return pid, other.tid
