"""Waits on a threading or queue primitive that nothing is left to release, told from a lock-order
cycle: a queue.Queue.join whose task_done() calls never come, a Semaphore whose permits leaked."""

from __future__ import annotations

import ast
import re
from typing import Optional

from debug_stuck.live.loops import loops_around, own_frame_index
from debug_stuck.live.parties import (
    MP_SYNC_FILE,
    SPAWN_JOIN,
    SYNC_FILES,
    THREAD_SYNC_FILE,
    THREADING_FILE,
    JobView,
    idle_for_work,
    in_thread_sync,
    primitive_of,
    python_frames,
)
from debug_stuck.live.selflock import attribute_calls, frame_source, parse_source, receivers_at
from debug_stuck.probes.collectors.procs import HELPER_CHILD

QUEUE_FILE = re.compile(r"(^|/)queue\.py$")
# CPython 3.11.7 Lib/multiprocessing: a parent in Process.join (process.py -> popen_fork.py wait), or
# in connection.wait on its children's sentinels; the resource tracker and the fork server idle in
# their own loops. None of them can arrive at a barrier of the job's code.
WAITS_FOR_CHILDREN = re.compile(r"multiprocess(ing)?/(process|popen_\w+|connection)\.py$")


def _caller(frames) -> Optional[str]:
    """The first frame of the code that called into the synchronisation machinery."""
    py = python_frames(frames)
    caller = next((f for f in py if not SYNC_FILES.search(f.file or "")), None)
    return caller.text() if caller is not None else (py[0].text() if py else None)


def task_done_missing(job: JobView, hop, thread) -> None:
    """A thread in queue.Queue.join while every other Python thread of its process idles in a queue's
    get: each item put was taken, yet one was never marked done (CPython 3.11.7 Lib/queue.py: join
    waits until unfinished_tasks, raised by put and lowered only by task_done, is 0), so a consumer
    skips task_done() on some path (a `continue`, an exception it catches)."""
    py = python_frames(thread.frames)
    if not any(f.bare_name == "join" and QUEUE_FILE.search(f.file or "") for f in py[:3]):
        return
    others = [t for t in job.threads(hop.pid) if t.tid != thread.tid and python_frames(t.frames)]
    idle = [t for t in others if idle_for_work(t)]
    if not idle or len(idle) != len(others):
        return
    names = sorted({t.name or str(t.tid) for t in idle})
    hop.detail += (
        f"; its {len(idle)} consumer thread{'s' if len(idle) > 1 else ''} ({', '.join(repr(n) for n in names)}) "
        "wait for new items in get(): every item was taken and one was never marked done"
    )
    hop.facts["end"] = "task-done-missing"


def two_queues(job: JobView, hop, thread) -> None:
    """A thread waiting for an item in queue.Queue.get while another thread of its process waits for
    room in queue.Queue.put: a queue waits in get only when empty and in put only when full (CPython
    3.11.7 Lib/queue.py: not_empty, not_full), never both, so the two wait on two queue objects: the
    producer fills one that nobody reads (a queue replaced, or one made twice). The hop names the
    putter (`end` other-queue, `threads`)."""
    if not in_first_frames(thread, ("get",), QUEUE_FILE):
        return
    putters = [
        t
        for t in job.threads(hop.pid)
        if t.tid != thread.tid
        and in_first_frames(t, ("put",), QUEUE_FILE)
        and (job.wait(hop.pid, t.tid) or {}).get("op") == "futex"
    ]
    if len(putters) != 1:
        return
    putter = putters[0]
    # a third thread between the two (a stage that reads one queue and fills the other) could move both
    rest = [t for t in job.threads(hop.pid) if t.tid not in (thread.tid, putter.tid) and python_frames(t.frames)]
    if feeding_threads(rest):
        return
    where = _caller(putter.frames)
    hop.detail += (
        f", while thread {putter.name!r} waits for room in a queue at {where}: a queue is never "
        "empty and full at once, so they wait on two different queues, and the one it fills is not the one read"
    )
    hop.facts["end"] = "other-queue"
    hop.parties = [{"tid": putter.tid, "name": putter.name, "where": where}]


def own_source(frames, pid: int):
    """(the innermost frame of the job's own code, its file parsed), or (None, None)."""
    index = own_frame_index(frames)
    frame = frames[index] if index is not None else None
    return frame, (parse_source(frame_source(frame, pid)) if frame is not None else None)


def joiner_drains(job: JobView, hop, thread) -> None:
    """A thread in queue.Queue.put (the queue full), reached from a thread that joins it, when the
    joining thread's own code is the one that reads that queue (`q.get()` in its file, the queue named
    alike): the reader waits for the writer to end, and the writer for the reader to make room (CPython
    3.11.7 Lib/queue.py: put blocks while full). `end` join-full-queue, `queue` the queue."""
    if hop.facts.get("via") != "thread" or not in_first_frames(thread, ("put",), QUEUE_FILE):
        return
    frame, tree = own_source(thread.frames, hop.pid)
    if tree is None:
        return
    puts = receivers_at(tree, ("put",), frame.line)
    if len(puts) != 1:
        return
    name = puts[0].rsplit(".", 1)[-1]
    for joiner in job.threads(hop.pid):
        if joiner.tid == thread.tid or not in_first_frames(joiner, ("join", "_wait_for_tstate_lock"), THREADING_FILE):
            continue
        mine, reader = own_source(joiner.frames, hop.pid)
        gets = [c for c, r in attribute_calls(reader, ("get", "get_nowait")) if r.rsplit(".", 1)[-1] == name]
        if gets:
            hop.facts["queue"] = puts[0]
            hop.detail += (
                f"; the queue {puts[0]} is read by thread {joiner.name!r} ({mine.file}:{gets[0].lineno}), which joins "
                "this thread instead of reading it: no room will ever be made"
            )
            hop.facts["end"] = "join-full-queue"
            return


def notify_one_of_many(job: JobView, hop, thread) -> None:
    """A thread in Condition.wait at a line of the job's code where other threads of its process wait
    too, on a Condition the file only wakes with notify() (one waiter: CPython 3.11.7 Lib/threading.py
    Condition.notify(n=1), "wake up one thread waiting on this condition"): each notify wakes one of
    them, the others wait for a notify that is not sent. `end` notify-one, `notify_at`."""
    if not in_first_frames(thread, ("Condition.wait",), THREADING_FILE):
        return
    frame, tree = own_source(thread.frames, hop.pid)
    waits = receivers_at(tree, ("wait",), frame.line) if tree is not None else []
    if len(waits) != 1:
        return
    name = waits[0].rsplit(".", 1)[-1]
    wakes = [
        (c, c.func.attr) for c, r in attribute_calls(tree, ("notify", "notify_all")) if r.rsplit(".", 1)[-1] == name
    ]
    if not wakes or any(attr == "notify_all" or c.args or c.keywords for c, attr in wakes):
        return

    def at_same_wait(other) -> bool:
        own = own_frame_index(other.frames)
        return own is not None and (other.frames[own].file, other.frames[own].line) == (frame.file, frame.line)

    alike = [t for t in job.threads(hop.pid) if at_same_wait(t)]
    if len(alike) < 2:
        return
    hop.facts.update(end="notify-one", notify_at=f"{frame.file}:{wakes[0][0].lineno}")
    hop.detail += (
        f"; {len(alike)} threads wait on {waits[0]} at this line, and the job's code wakes it only with "
        f"{waits[0]}.notify() ({frame.file}:{wakes[0][0].lineno}), which wakes one of them"
    )


def sentinel_never_put(job: JobView, hop, thread) -> None:
    """A thread in queue.Queue.get at `item = q.get()` in a loop that ends on a sentinel (`if item is
    None: return`, or `break`), in a file where no line puts that sentinel on q: the consumer waits for
    a stop signal nobody sends (the exit of a job that joins it, or asyncio.run joining its executor).
    `end` sentinel-missing, `queue`, `sentinel`."""
    if not in_first_frames(thread, ("get",), QUEUE_FILE):
        return
    frame, tree = own_source(thread.frames, hop.pid)
    if tree is None:
        return
    taken = [
        (node.targets[0].id, ast.unparse(node.value.func.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and node.lineno == frame.line
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "get"
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ]
    if len(taken) != 1:
        return
    item, queue = taken[0]
    sentinels = {
        ast.unparse(test.comparators[0])
        for test in ast.walk(tree)
        if isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == item
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.Eq))
    }
    if len(sentinels) != 1:
        return
    sentinel = sentinels.pop()
    puts = [
        c for c, r in attribute_calls(tree, ("put", "put_nowait")) if r.rsplit(".", 1)[-1] == queue.rsplit(".", 1)[-1]
    ]
    if any(c.args and ast.unparse(c.args[0]) == sentinel for c in puts):
        return
    hop.facts.update(end="sentinel-missing", queue=queue, sentinel=sentinel)
    hop.detail += f"; its loop stops on `{item} is {sentinel}`, and no line of {frame.file} puts {sentinel} on {queue}"


def in_first_frames(thread, names, file_pattern) -> bool:
    return any(
        f.function.endswith(names) and file_pattern.search(f.file or "") for f in python_frames(thread.frames)[:3]
    )


EXECUTOR_FILE = re.compile(r"(^|/)concurrent/futures/thread\.py$")


def _idle_executor_worker(thread) -> bool:
    """A ThreadPoolExecutor worker waiting for its next work item (CPython 3.11 Lib/concurrent/futures/
    thread.py _worker: `work_queue.get(block=True)`, a C call with no Python frame): it runs nothing."""
    frames = python_frames(thread.frames)
    return bool(frames) and frames[0].bare_name == "_worker" and bool(EXECUTOR_FILE.search(frames[0].file or ""))


def permits_leaked(job: JobView, hop) -> bool:
    """Threads of the process wait in Semaphore.acquire (threading.py) at one line, and every other
    Python thread only joins threads or idles as a thread pool's worker with no task: none runs that
    could release a permit, so the permits were taken
    and never given back (a path that returns or raises between acquire and release). No cycle: no
    lock order to fix."""
    threads = [t for t in job.threads(hop.pid) if python_frames(t.frames)]
    waiting = [t for t in threads if in_first_frames(t, "Semaphore.acquire", THREAD_SYNC_FILE)]
    joining = [t for t in threads if in_first_frames(t, ("join", "_wait_for_tstate_lock"), THREADING_FILE)]
    # a ThreadPoolExecutor's worker with no task: its innermost Python frame is its loop's get
    idle = [t for t in threads if _idle_executor_worker(t)]
    sites = {_caller(t.frames) for t in waiting}
    if not waiting or len(sites) != 1 or len(waiting) + len(joining) + len(idle) != len(threads):
        return False
    names = ", ".join(repr(t.name) for t in waiting[:3])
    many = len(waiting) > 1
    hop.kind = "futex"
    gone = "no other thread runs to release it: its permits were taken and never given back"
    if [t.tid for t in waiting] == [hop.tid]:  # itself, alone: the threads that took the permits have ended
        hop.detail = f"waits for a permit of a Semaphore at {next(iter(sites))}, and {gone}"
    else:
        hop.detail = (
            f"waits while thread{'s' if many else ''} {names} {'all wait' if many else 'waits'} at one Semaphore at "
            f"{next(iter(sites))} and {gone}"
        )
    hop.facts["end"] = "permits-leaked"
    return True


def _waits_at_barrier(job: JobView, pid: int) -> Optional[str]:
    """Where the main thread of pid waits at a multiprocessing Barrier (its caller), or None."""
    thread = job.thread(pid)
    frames = thread.frames if thread is not None else []
    if not any(MP_SYNC_FILE.search(f.file or "") for f in python_frames(frames)) or primitive_of(frames) != "Barrier":
        return None
    return _caller(frames)


def _cannot_arrive(job: JobView, pid: int) -> bool:
    """The process waits for its children, or is multiprocessing's own helper: it will not reach the
    job's barrier."""
    info = job.procs[pid]
    if info.state == "Z" or HELPER_CHILD.search(" ".join(info.cmdline)):
        return True
    thread = job.thread(pid)
    py = python_frames(thread.frames) if thread is not None else []
    return info.state == "S" and any(
        WAITS_FOR_CHILDREN.search(f.file or "") or SPAWN_JOIN.search(f.file or "") for f in py
    )


def barrier_short(job: JobView, hop, thread) -> bool:
    """Processes of the job wait at one multiprocessing Barrier (CPython 3.11.7 Lib/threading.py:
    Barrier.wait returns once `parties` callers have arrived) at one line, and every other process
    waits for its children or is multiprocessing's helper: nobody is left to arrive. The barrier was
    set for more parties than reach it (more than the processes started), or a party left its loop."""
    if hop.op != "futex" or primitive_of(thread.frames) != "Barrier":
        return False
    sites = {pid: _waits_at_barrier(job, pid) for pid in job.procs}
    waiting = [pid for pid, site in sites.items() if site is not None]
    if len({sites[pid] for pid in waiting}) != 1 or hop.pid not in waiting:
        return False
    if not all(_cannot_arrive(job, pid) for pid in job.procs if pid not in waiting):
        return False
    hop.kind, hop.object = "futex", sites[hop.pid]
    others = ", ".join(str(pid) for pid in waiting if pid != hop.pid)
    hop.detail = (
        f"waits at a multiprocessing Barrier at {sites[hop.pid]}"
        + (f" with pid {others}" if others else "")
        + f": {len(waiting)} process{'es' if len(waiting) > 1 else ''} arrived, and no other process of the job "
        "runs to arrive (the rest wait for their children): the barrier was set for more parties than reach it"
    )
    hop.facts["end"] = "barrier-short"
    hop.facts["parties_arrived"] = str(len(waiting))
    return True


BUSY_PARTY = 50.0  # percent of one CPU: a party this busy is still at work, on its way to the barrier


def barrier_sibling(job: JobView, hop, thread) -> Optional[int]:
    """A process waiting at a multiprocessing Barrier whose sibling (a child of the same parent, not at
    the barrier) computes: the party that has not arrived yet, still at work (Barrier.wait returns once
    `parties` callers have arrived, CPython 3.11.7 Lib/threading.py). The hop says so; None otherwise."""
    info = job.procs.get(hop.pid)
    if info is None or hop.op != "futex" or _waits_at_barrier(job, hop.pid) is None:
        return None
    siblings = [c for c in job.children(info.ppid) if c != hop.pid and c in job.procs] if info.ppid in job.procs else []
    busy = [c for c in siblings if (job.procs[c].cpu_demand or job.procs[c].cpu_percent or 0) >= BUSY_PARTY]
    working = [c for c in busy if _waits_at_barrier(job, c) is None]
    if len(working) != 1:
        return None
    hop.kind, hop.object = "process", str(working[0])
    hop.detail = f"waits at a multiprocessing Barrier for pid {working[0]}, a party that has not arrived: it computes"
    return working[0]


def at_thread_barrier(thread) -> bool:
    return primitive_of(thread.frames) == "Barrier" and not any(
        MP_SYNC_FILE.search(f.file or "") for f in python_frames(thread.frames)
    )


def barrier_feeders(thread, others) -> list:
    """The threads a queue's get waits on when every other Python thread of the process waits at a
    threading.Barrier: they would put the items once the barrier opens (CPython 3.11.7
    Lib/threading.py: Barrier.wait returns when `parties` threads have called it), so the chain goes
    on to them."""
    if idle_for_work(thread) is None and primitive_of(thread.frames) != "Queue":
        return []
    if not others or not all(at_thread_barrier(t) for t in others):
        return []
    return list(others)


def barrier_action_runner(thread, others):
    """The thread that runs the threading.Barrier's action while this one waits at the barrier: the last
    party to arrive runs it before any party is let go (CPython 3.11.7 Lib/threading.py Barrier._release
    calls self._action()), so the others wait for that action to return."""
    if not at_thread_barrier(thread):
        return None
    return next(
        (t for t in others if any(f.bare_name == "_release" and THREADING_FILE.search(f.file or "") for f in t.frames)),
        None,
    )


# Library threads that only watch their own library's objects and never put into, set or notify
# anything of the job's: tqdm's TMonitor (tqdm/_monitor.py: it checks the open bars' miniters), the
# async writer of TensorBoard's event files (tensorboard/summary/writer/event_file_writer.py:
# _AsyncWriterThread, draining its own queue into the file).
SERVICE_THREAD_FILE = re.compile(r"(^|/)(tqdm/_monitor|tensorboard/summary/writer/event_file_writer)\.py$")


def feeding_threads(others) -> list:
    """The threads that could release a wait of the job's own: not a library's watcher thread."""
    return [t for t in others if not any(SERVICE_THREAD_FILE.search(f.file or "") for f in python_frames(t.frames))]


def none_left_to_release(thread, others) -> bool:
    """The thread waits on a threading or queue primitive (Condition, Event, Barrier, Queue,
    Semaphore: in CPython's source only another thread of the same process releases them), and it
    is the only Python thread left; or it waits at a threading.Barrier and every other Python
    thread of the process waits on such a primitive too: a party never arrives. (An Event or a
    future with every thread waiting may still be one nobody was ever going to set: no claim.)
    `others`: the process's other threads with Python frames."""
    if not in_thread_sync(thread):
        return False
    others = feeding_threads(others)
    if not others:
        return True
    return at_thread_barrier(thread) and all(in_thread_sync(t) for t in others)


def none_left_words(thread, others) -> str:
    """How a wait that no thread is left to end says so (none_left_to_release held)."""
    others = feeding_threads(others)
    if not others:
        return (
            ", and no other thread is left in the process to provide it: the thread that would have has ended "
            "(or was never started)"
        )
    everyone = f"(the process's {len(others) + 1} threads all wait on threading primitives)"
    if at_thread_barrier(thread):
        return f", and no other thread is left to arrive {everyone}: it waits for a party that is not there"
    return (
        f", and no other thread is left to provide it {everyone}: the thread that would have has ended "
        "(or never started)"
    )


def event_cleared(job: JobView, hop, thread) -> None:
    """A thread in Event.wait (threading, or multiprocessing's shared one) at a line of a file that
    makes exactly one Event, which the file clear()s inside a loop with no set() of it anywhere in
    that loop: the loop pauses the waiters and never lets them go again (CPython 3.11.7
    Lib/threading.py Event.clear: "threads calling wait() will block until set() is called"; the
    multiprocessing Event behaves alike). `end` event-cleared, `cleared_event`, `cleared_at`."""
    if primitive_of(thread.frames) != "Event" and not in_first_frames(thread, ("Event.wait",), SYNC_FILES):
        return
    frame, tree = own_source(thread.frames, hop.pid)
    if tree is None:
        return
    made = {
        ast.unparse(node.targets[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.value, ast.Call)
        and (getattr(node.value.func, "attr", None) or getattr(node.value.func, "id", None)) == "Event"
    }
    if len(made) != 1:
        return
    event = made.pop()
    short = event.rsplit(".", 1)[-1]
    sets = [c.lineno for c, r in attribute_calls(tree, ("set",)) if r.rsplit(".", 1)[-1] == short]
    for clear, receiver in attribute_calls(tree, ("clear",)):
        if receiver.rsplit(".", 1)[-1] != short:
            continue
        loops = loops_around(tree, clear.lineno)
        if loops and not any(loop.lineno <= line <= (loop.end_lineno or line) for loop in loops for line in sets):
            hop.facts.update(end="event-cleared", cleared_event=event, cleared_at=f"{frame.file}:{clear.lineno}")
            hop.detail += (
                f"; the job's one Event, {event}, is cleared in a loop at {frame.file}:{clear.lineno} "
                "and no line of that loop sets it again"
            )
            return
