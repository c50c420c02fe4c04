"""Who a wait depends on: the worker process, thread or other party that would release it.

The chain (debug_stuck.live.chain) asks these at each hop: which of a pool's workers runs the task a
parent waits for, which thread a join or a queue's exit waits for, which dead or stopped process a
shared multiprocessing primitive waits for. Each reads one job's snapshot through `JobView`.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from debug_stuck.core.libfacts import chosen_wait, match_frame
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.gcframes import frames_in_gc
from debug_stuck.live.jobfacts import DATALOADER_FILE, frames_table, runs_dataloader
from debug_stuck.live.loops import own_frame_index
from debug_stuck.probes.collectors.procs import SPAWNED_CHILD
from debug_stuck.probes.collectors.stacks import main_thread

POOL_WORKER = re.compile(r"concurrent/futures/thread\.py")
EVENT_LOOP = re.compile(r"asyncio/base_events\.py")
POOL_WAIT = re.compile(r"multiprocess(ing)?/pool\.py")
# Waits for a pool's results that poll in a loop, caught in whatever the poll is doing (a sleep, a
# lock, a read of the manager's socket): joblib 1.6.0 joblib/parallel.py (Parallel._retrieve sleeps
# 0.01 s between looks at the next job's status); datasets 5.2.0 datasets/utils/py_utils.py
# (iflatmap_unordered loops queue.get(timeout=0.05) on a Manager queue while the pool works)
POLLED_POOL_WAIT = re.compile(r"joblib/parallel\.py|datasets/utils/py_utils\.py")
FUTURE_WAIT = re.compile(r"concurrent/futures/_base\.py|Future\.result|_base\.py")
THREAD_JOIN = re.compile(r"_wait_for_tstate_lock|^join$")
# Thread.join is threading.py's; queue.Queue.join (queue.py) waits for task_done() calls, not a thread
THREADING_FILE = re.compile(r"(^|/)threading\.py$")
# CPython 3.11.7 Lib/multiprocessing/synchronize.py: Barrier, Event, Condition, Semaphore and Lock
# across processes: only another process that shares the primitive releases it
MP_SYNC_FILE = re.compile(r"multiprocess(ing)?/synchronize\.py$")
# torch 2.x torch/multiprocessing/spawn.py: ProcessContext.join waits on the children's sentinels
# (multiprocessing.connection.wait), not in wait4.
SPAWN_JOIN = re.compile(r"torch/multiprocessing/spawn\.py")
# CPython 3.8+ Lib/multiprocessing/queues.py: Queue._finalize_join joins the thread that
# Queue._start_thread names 'QueueFeederThread' (target Queue._feed).
QUEUE_EXIT_JOIN = re.compile(r"^(_finalize_join|join_thread)$")
QUEUE_FEEDER = re.compile(r"^_feed$")
# CPython 3.11.7 Lib/concurrent/futures/thread.py: shutdown(wait=True) and _python_exit join the pool's threads
EXECUTOR_JOIN = re.compile(r"^(shutdown|_python_exit)$")
THREAD_SYNC_FILE = re.compile(r"(^|/)(threading|queue)\.py$")
REPLACEMENT_GAP = 0.1  # seconds between a pool's workers' births that only a replacement shows
# A process multiprocessing forked keeps its parent's stack up to os.fork (popen_fork.Popen._launch).
FORKED_BY_MULTIPROCESSING = re.compile(r"(^|/)multiprocess(ing)?/popen_fork\.py$")
# subprocess's C fork-exec (CPython 3.11 Modules/_posixsubprocess.c): a Python frame above these runs
# in the forked child before exec, a preexec_fn
PREEXEC_FRAMES = ("child_exec", "do_fork_exec", "subprocess_fork_exec")


def in_preexec_fn(frames) -> bool:
    """The thread runs Python inside subprocess's forked child, before exec: a Popen preexec_fn."""
    return any(f.native and f.bare_name in PREEXEC_FRAMES for f in frames)


IDLE_CALLS = ("get", "_recv", "_recv_bytes", "poll")
IDLE_QUEUE = re.compile(r"multiprocess(ing)?/queues\.py|(^|/)queue\.py")
# a child's own code runs inside this machinery when it is not running a task: a pool worker's loop,
# a Manager's server, their connections (forked children keep their parent's frames below it)
PROCESS_MACHINERY = re.compile(r"multiprocess(ing)?/|loky/")
SYNC_FILES = re.compile(r"(^|/)(threading|queue|selectors)\.py$|concurrent/futures/|multiprocessing/")


class JobView:
    def __init__(self, snap: Snapshot):
        self.snap = snap
        self.procs = {p.pid: p for p in snap.processes}
        self.has_dataloader = bool(runs_dataloader(snap))

    def thread(self, pid: int, tid: Optional[int] = None):
        series = self.snap.stacks.get(pid)
        dump = series.latest() if series is not None else None
        if dump is None:
            return None
        if tid is None:
            return main_thread(dump, pid)
        return next((t for t in dump.threads if t.tid == tid), None)

    def threads(self, pid: int):
        series = self.snap.stacks.get(pid)
        dump = series.latest() if series is not None else None
        return list(dump.threads) if dump is not None else []

    def wait(self, pid: int, tid: int) -> Optional[dict]:
        info = self.procs.get(pid)
        return (info.waits or {}).get(tid) if info is not None else None

    def motion(self, pid: int, tid: int) -> Optional[str]:
        series = self.snap.stacks.get(pid)
        return series.thread_motion().get(tid) if series is not None else None

    def in_gc(self, pid: int, tid: Optional[int]) -> bool:
        """The thread is in the garbage collector in any sample of the window."""
        series = self.snap.stacks.get(pid)
        for dump in series.dumps if series is not None else []:
            thread = next((t for t in dump.threads if t.tid == tid), None)
            if thread is not None and frames_in_gc(thread.frames):
                return True
        return False

    def children(self, pid: int) -> List[int]:
        return [p.pid for p in self.snap.processes if p.ppid == pid]


def python_frames(frames) -> list:
    return [f for f in frames if not f.native]


def thread_party(thread) -> dict:
    """A thread of a lock cycle: its name and the frame of the job's code where it waits."""
    caller = next((f for f in python_frames(thread.frames) if not SYNC_FILES.search(f.file or "")), None)
    out = {"tid": thread.tid, "name": thread.name}
    if caller is not None:
        out.update(function=caller.bare_name, file=caller.path or caller.file, line=caller.line, where=caller.text())
    return out


SYNC_PRIMITIVES = ("Barrier", "Event", "Condition", "BoundedSemaphore", "Semaphore", "RLock", "Lock")


def primitive_of(frames) -> str:
    """The primitive the job's code called (multiprocessing's Barrier runs threading.Barrier's code on
    a multiprocessing Condition): the outermost class name of the synchronisation frames."""
    for frame in reversed(python_frames(frames)):
        if MP_SYNC_FILE.search(frame.file or "") or THREAD_SYNC_FILE.search(frame.file or ""):
            owner = frame.function.rsplit(".", 1)[0] if "." in frame.function else ""
            if owner in SYNC_PRIMITIVES:
                return owner
    return "primitive"


def sync_party(job: JobView, pid: int) -> Optional[int]:
    """The other process a wait on a shared multiprocessing primitive depends on: a child of pid (or
    its parent) that is dead, stopped or in the kernel. A live one may not share the primitive at
    all (a parent joining its children is no party to their barrier): no guess then."""
    info = job.procs.get(pid)
    others = [c for c in job.children(pid) if job.procs[c].role != "other"]
    if info is not None and info.ppid in job.procs:
        others.append(info.ppid)
    return next((p for p in others if job.procs[p].state in ("Z", "T", "t", "D")), None)


def runs_own_task(job: JobView, pid: int) -> bool:
    """The child runs a task of the job's own code: its innermost own frame has no process machinery
    (a pool's loop, a Manager's server) inside it."""
    thread = job.thread(pid)
    py = python_frames(thread.frames) if thread is not None else []
    index = own_frame_index(py)
    return index is not None and not any(PROCESS_MACHINERY.search(f.file or "") for f in py[:index])


def idle_in_queue(job: JobView, pid: int) -> bool:
    thread = job.thread(pid)
    if thread is None:
        return False
    py = python_frames(thread.frames)
    library_part = py[: own_frame_index(py)]  # what it runs above the job's own code
    # a get waits for work; a put (a pool worker sending its result) is a worker with a result to hand in
    return any(IDLE_QUEUE.search(f.file or "") and f.bare_name in IDLE_CALLS for f in library_part)


def replacement_worker(workers):
    """The worker born well after all its siblings (pools fork theirs together)."""
    born = sorted((w for w in workers if w.create_time is not None), key=lambda w: w.create_time)
    if len(born) < 2 or born[-1].create_time - born[-2].create_time < REPLACEMENT_GAP:
        return None
    return born[-1]


def busy_worker(job: JobView, pid: int) -> Optional[int]:
    """The DataLoader worker of pid that is not idle waiting for work (or any dead one). A worker that
    exited with code 0 ended normally: an IterableDataset worker that ran out of data, which the
    loader shuts down and never joins while it runs (torch 2.13.0 torch/utils/data/dataloader.py
    _next_data: on _IterableDatasetStopIteration, _mark_worker_as_unavailable, which says "we don't
    actually join the worker here"). It is the one waited for only when no other worker works."""
    workers = [p for p in job.snap.processes if p.ppid == pid and p.role == "dataloader-worker"]
    finished = [w for w in workers if w.state == "Z" and w.exit_status == 0]
    for worker in workers:
        if worker.state in ("Z", "D", "T") and worker not in finished:
            return worker.pid
    # the DataLoader's own workers (in its worker loop), before any other child forked beside them (a
    # server the job runs, a helper): they are what a wait for a batch waits on
    loaders = [w for w in workers if _in_worker_loop(job, w.pid)]
    for worker in loaders + [w for w in workers if w not in loaders]:
        thread = job.thread(worker.pid)
        if thread is None:
            continue
        py = python_frames(thread.frames)
        idle = idle_for_work(thread) is not None  # its index queue's get, under selectors and connection frames
        # a queue's get by its name, in a library: the job's own `get` (a cache's) is its own work
        idle_call = py and py[0].bare_name in IDLE_CALLS and own_frame_index(py) != 0
        if py and (fetching(py) or (not idle and not IDLE_QUEUE.search(py[0].file) and not idle_call)):
            return worker.pid
    return finished[0].pid if finished else None


FETCH_FILE = re.compile(r"torch/utils/data/_utils/fetch\.py$")


def fetching(py) -> bool:
    """A DataLoader worker inside its fetcher's fetch: it makes a batch (its dataset's own code runs,
    whatever queue that code waits on), not idle for its next index, which the worker loop gets before
    it fetches (torch 2.13.0 torch/utils/data/_utils/worker.py _worker_loop: index_queue.get, then
    fetcher.fetch(index))."""
    return any(is_fetch(f.function, f.file) for f in py)


def is_fetch(function: str, file: Optional[str]) -> bool:
    """The frame is a DataLoader fetcher's fetch (torch/utils/data/_utils/fetch.py)."""
    return function.rsplit(".", 1)[-1] == "fetch" and bool(FETCH_FILE.search(file or ""))


def _in_worker_loop(job: JobView, pid: int) -> bool:
    thread = job.thread(pid)
    return thread is not None and any(DATALOADER_FILE.search(f.file or "") for f in python_frames(thread.frames))


def pool_worker_thread(job: JobView, pid: int, tid: Optional[int]) -> Optional[int]:
    for thread in job.threads(pid):
        if thread.tid == tid:
            continue
        py = python_frames(thread.frames)
        # idle: waiting for work in its queue (queue.get), or in the executor's own loop at the top
        # of its stack (_worker's work_queue.get on a C SimpleQueue has no frame of its own:
        # frames.yaml cf-thread-worker); a task that runs has its own frames above _WorkItem.run
        idle = IDLE_QUEUE.search(py[0].file) or POOL_WORKER.search(py[0].file) if py else True
        if any(POOL_WORKER.search(f.file) for f in py) and not idle:
            return thread.tid
    return None


def pool_of(name: str) -> str:
    """The pool a ThreadPoolExecutor worker belongs to, from its thread's name: CPython's
    ThreadPoolExecutor._adjust_thread_count names each '<prefix>_<n>', the prefix
    thread_name_prefix or 'ThreadPoolExecutor-<k>' (Lib/concurrent/futures/thread.py)."""
    head, _, number = (name or "").rpartition("_")
    return head if head and number.isdigit() else ""


def exhausted_pool(job: JobView, pid: int, thread) -> Optional[Tuple[str, int]]:
    """(the pool's name, its size) when `thread` is a ThreadPoolExecutor worker waiting inside its
    task for a future, and every worker of its pool does the same: a task queued in that pool
    starts only when a worker is free, and none will be (the deadlock the concurrent.futures docs
    show for a callable that waits on another future of a max_workers=1 pool)."""
    pool = pool_of(thread.name) if thread is not None else ""
    if not pool:
        return None
    members = [t for t in job.threads(pid) if pool_of(t.name) == pool]

    def waits_in_task(t) -> bool:
        files = " ".join(f.file or "" for f in python_frames(t.frames))
        return bool(POOL_WORKER.search(files) and FUTURE_WAIT.search(files))

    # a future may also be set from an event loop's thread (asyncio.run_coroutine_threadsafe)
    loops = [t for t in job.threads(pid) if any(EVENT_LOOP.search(f.file or "") for f in python_frames(t.frames))]
    if members and all(waits_in_task(t) for t in members) and not loops:
        return pool, len(members)
    return None


def spawn_children(job: JobView, hop, thread) -> List[int]:
    """The children a parent waits for in torch.multiprocessing's ProcessContext.join, the ones not
    idle first (a spawned child has the parent's command line or multiprocessing's spawn main)."""
    if thread is None or not any(
        f.bare_name == "join" and SPAWN_JOIN.search(f.file or "") for f in python_frames(thread.frames)
    ):
        return []
    mine = job.procs[hop.pid].cmdline if hop.pid in job.procs else None
    kids = [
        pid
        for pid in job.children(hop.pid)
        if job.procs[pid].cmdline == mine or SPAWNED_CHILD.search(" ".join(job.procs[pid].cmdline or ()))
    ]
    return sorted(kids, key=lambda pid: idle_in_queue(job, pid))


def queue_feeder(job: JobView, pid: int, thread) -> Optional[int]:
    """The feeder thread a process's exit waits for: a multiprocessing.Queue joins it until every
    item put has gone into the pipe, which only a reader draining the pipe lets happen."""
    if thread is None or not in_queue_code(thread, QUEUE_EXIT_JOIN):
        return None
    for other in job.threads(pid):
        if other.tid != thread.tid and in_queue_code(other, QUEUE_FEEDER):
            return other.tid
    return None


def joined_thread(job: JobView, pid: int, thread):
    """The thread a Thread.join waits for: a ThreadPoolExecutor's shutdown joins its worker that is
    running a task; any other join, the one other thread of the process not idle in a queue."""
    if thread is None:
        return None
    py = python_frames(thread.frames)
    # CPython 3.11.7 Lib/threading.py: _shutdown acquires each non-daemon thread's tstate lock itself
    at_shutdown = bool(py) and py[0].bare_name == "_shutdown" and bool(THREAD_SYNC_FILE.search(py[0].file or ""))
    if not at_shutdown and not any(
        THREAD_JOIN.search(f.bare_name) and THREADING_FILE.search(f.file or "") for f in py[:3]
    ):
        return None
    others = [t for t in job.threads(pid) if t.tid != thread.tid and python_frames(t.frames)]
    if any(EXECUTOR_JOIN.match(f.bare_name) and POOL_WORKER.search(f.file or "") for f in py):
        running = [t for t in others if any(POOL_WORKER.search(f.file or "") for f in python_frames(t.frames))]
        running = [t for t in running if not IDLE_QUEUE.search(python_frames(t.frames)[0].file or "")]
        return running[0] if running else None
    busy = [t for t in others if not IDLE_QUEUE.search(python_frames(t.frames)[0].file or "")]
    if len(busy) == 1:
        return busy[0]
    if busy and all(in_thread_sync(t) for t in busy):
        return busy[0]  # all at the same kind of wait (a barrier, an event): one stands for the others
    # at exit, the one other thread, idle or not: Python waits for it unless it is a daemon
    return others[0] if at_shutdown and not busy and len(others) == 1 else None


def blocked_handler(job: JobView, pid: int, busy_main: bool = False) -> Optional[int]:
    """A server process (its main thread waits for connections on a listening socket: idle by design)
    with a thread of Python code blocked on a lock or primitive: the thread its clients wait for, where
    a chain through the process goes. None otherwise."""
    wait = job.wait(pid, pid) or {}
    blocked = [
        thread.tid
        for thread in job.threads(pid)
        if thread.tid != pid and python_frames(thread.frames) and (job.wait(pid, thread.tid) or {}).get("op") == "futex"
    ]
    if (wait.get("object") or {}).get("state") == "LISTEN":
        return blocked[0] if blocked else None
    # `busy_main`, for a peer whose connection never answers: a server thread in a process whose main
    # thread does other work (a rank serving batches to its peers), the one thread of Python code
    # blocked on a lock or primitive there
    return blocked[0] if busy_main and len(blocked) == 1 else None


IDLE_CPU = 10.0  # percent of one CPU: a process under it computes nothing that could answer


def _stuck_server(job: JobView, pid: int) -> bool:
    """A process of the job whose main thread waits on a lock or primitive in Python code (a request's
    handler run inline by its serve loop), or whose one other Python thread does: held up, not idle."""
    main = next((t for t in job.threads(pid) if t.tid == pid), None)
    in_code = main is not None and bool(python_frames(main.frames))
    return (in_code and (job.wait(pid, pid) or {}).get("op") == "futex") or blocked_handler(job, pid, True) is not None


def blocked_server_peer(job: JobView, hop, wait: dict, files: str) -> Optional[Tuple[int, Optional[int]]]:
    """The process of the job at the other end of a connection that never answers, when it is a server
    whose handler thread is blocked (blocked_handler): the chain goes on into it, to that thread; for a
    unix socket (whose state /proc does not give), the job's process at its other end. (pid, the thread
    to go on to, or None for its own choice). `files`: the waiting thread's Python files, joined."""
    obj = wait.get("object") or {}
    if hop.kind == "poll" and wait.get("op") in ("epoll", "poll", "select"):
        # an event loop (an asyncio server) idle on a connection whose other end, a process of the job,
        # waits to read from it too, and computes nothing: neither will send
        for conn in (w.get("object") or {} for w in wait.get("watched") or []):
            for peer in conn.get("peer") or [] if conn.get("kind") == "socket" else []:
                other = job.procs.get(peer.get("pid"))
                if other is None or other.pid == hop.pid or (other.cpu_percent or 0) >= IDLE_CPU:
                    continue
                if reads_from(job, other.pid, hop.pid):
                    hop.kind, hop.object = "socket", str(conn.get("remote") or conn.get("path"))
                    hop.detail += f"; pid {other.pid}, at the other end of its connection, waits to read from it too"
                    return other.pid, None
    pooled = POOL_WAIT.search(files) or POLLED_POOL_WAIT.search(files)
    # a unix socket to a process of the job (a multiprocessing Manager, a local server): go on into it,
    # whatever holds it up (stopped, its handler blocked); a send on a TCP connection waits for the other
    # end to read, which a process of the job there does or not. Not for a pool's results, which its
    # workers compute: the Manager only passes them on.
    sending = hop.op in ("send", "write") and obj.get("proto") == "tcp"
    if hop.kind == "socket" and (obj.get("proto") == "unix" or sending) and not pooled:
        ends = [p["pid"] for p in obj.get("peer") or [] if p.get("pid") in job.procs and p["pid"] != hop.pid]
        return (ends[0], None) if ends else None
    listeners = [
        p["pid"]
        for p in obj.get("listener_by") or []
        if p.get("pid") in job.procs and p["pid"] != hop.pid and _stuck_server(job, p["pid"])
    ]
    if hop.kind == "socket" and hop.facts.get("end") == "never-accepted" and listeners:
        # the listener is a process of the job held up inside a request: what holds it up is the end
        hop.facts.pop("end")
        hop.detail = hop.detail.replace("the listener at the other end never accepted it", "")
        hop.detail += f"the listener, pid {listeners[0]} of this job, has not accepted it"
        return listeners[0], None
    if hop.kind != "socket" or hop.facts.get("end") != "no-answer":
        return None
    if obj.get("kind") != "socket":  # an event loop's epoll: the watched connection the hop names
        watched = [w.get("object") or {} for w in wait.get("watched") or []]
        obj = next((w for w in watched if w.get("kind") == "socket" and w.get("remote") == hop.object), {})
    peers = obj.get("peer") or []
    handlers = ((p["pid"], blocked_handler(job, p["pid"], busy_main=True)) for p in peers if p.get("pid") in job.procs)
    served, handler = next(((pid, tid) for pid, tid in handlers if tid is not None), (None, None))
    if served is not None:
        hop.facts.pop("end")  # it answers once its handler can: the end is what blocks the handler
        hop.detail = re.sub(
            r": the peer never answers.*$", f": its server, pid {served} of this job, has not answered", hop.detail
        )
        return served, handler
    # the process at the other end is itself blocked sending to someone else (a single-threaded server
    # publishing to a subscriber that does not read): it answers once that send completes
    sender = next(
        (p["pid"] for p in peers if p.get("pid") in job.procs and _sends_elsewhere(job, p["pid"], hop.pid)), None
    )
    if sender is not None:
        hop.facts.pop("end")
        hop.detail = re.sub(
            r": the peer never answers.*$", f": its server, pid {sender} of this job, is blocked sending", hop.detail
        )
        return sender, sender
    # the process at the other end waits to read from this one too: neither will send (a request
    # without the end its reader waits for, a newline or a length): the chain closes on the first
    reading = next((p["pid"] for p in peers if p.get("pid") in job.procs and reads_from(job, p["pid"], hop.pid)), None)
    if reading is not None:
        hop.facts.pop("end")
        hop.detail = hop.detail.replace(": the peer never answers", ": the other end waits to read from it too")
    return (reading, None) if reading is not None else None


def _sends_elsewhere(job: JobView, pid: int, other: int) -> bool:
    """pid's main thread is blocked writing to a socket or pipe whose other end `other` does not hold."""
    wait = job.wait(pid, pid) or {}
    obj = wait.get("object") or {}
    peers = [p.get("pid") for p in (obj.get("peer") or []) + (wait.get("peers") or [])]
    return wait.get("op") in ("send", "write") and obj.get("kind") in ("socket", "pipe", "fifo") and other not in peers


def reads_from(job: JobView, pid: int, other: int) -> bool:
    """pid's main thread waits to receive on a connection whose other end `other` holds: in a read of
    its own, or in its event loop's epoll or poll that watches that connection (an asyncio server
    awaiting the next request)."""
    wait = job.wait(pid, pid) or {}
    objects = [wait.get("object") or {}]
    if wait.get("op") in ("epoll", "poll", "select"):
        objects += [w.get("object") or {} for w in wait.get("watched") or []]
    return wait.get("op") in ("recv", "read", "poll", "epoll", "select") and any(
        obj.get("kind") == "socket" and any(p.get("pid") == other for p in obj.get("peer") or []) for obj in objects
    )


def in_thread_sync(thread) -> bool:
    """The thread waits on a threading or queue primitive (its innermost Python frame is there)."""
    py = python_frames(thread.frames) if thread is not None else []
    return bool(py) and bool(THREAD_SYNC_FILE.search(py[0].file or ""))


def idle_for_work(thread) -> Optional[str]:
    """The queue call a thread idles in, waiting for work (queue.Queue.get, a multiprocessing
    queue's get), or None."""
    py = python_frames(thread.frames) if thread is not None else []
    # Queue.get(timeout) -> Connection.poll -> _poll -> wait -> selector.select: the get is 5th
    inside = [f for f in py[:6] if IDLE_QUEUE.search(f.file or "") and f.bare_name == "get"]
    if inside and all(SYNC_FILES.search(f.file or "") for f in py[: py.index(inside[0])]):
        return inside[0].bare_name
    return None


def awaits_stop(job: JobView, pid: int, thread) -> Optional[str]:
    """How a thread waits for work or a signal to stop, said for Python's exit (which joins it): idle
    in a queue's get, asleep in a loop of the job's own code, or in threading's wait (a flusher's
    `while not stop.wait(5.0)`, a Condition) called from the job's own code; None for any other wait
    (a lock, a socket)."""
    idle = idle_for_work(thread)
    if idle is not None:
        return f"idles in {idle}() waiting for work nobody will give it"
    py = python_frames(thread.frames) if thread is not None else []
    own = next((f for f in py if not SYNC_FILES.search(f.file or "")), None)
    if own is None:
        return None
    if (job.wait(pid, thread.tid) or {}).get("op") == "sleep" and own is py[0]:
        return f"sleeps in a loop at {own.text()} until something stops it, and nothing will"
    if THREAD_SYNC_FILE.search(py[0].file or "") and py[0].bare_name == "wait":
        return f"waits at {own.text()} in threading's wait (an Event or Condition) for a signal nobody will send now"
    return None


def in_queue_code(thread, function: re.Pattern) -> bool:
    return any(function.match(f.bare_name) and IDLE_QUEUE.search(f.file or "") for f in python_frames(thread.frames))


LOCK_WAIT = re.compile(r"^(acquire|_acquire_restore|wait)$")


def lock_cycle(job: JobView, pid: int, tid: Optional[int], inside: List[str], thread) -> list:
    """The threads of a lock-order deadlock the hop's thread is part of or waits on: the other threads
    of pid that wait for a lock, when the hop waits for a lock or joins (two or more, or one when it
    acquires); else, when the hop's own line takes a lock, the thread whose own line takes a lock
    this one holds while it holds the one this one wants (read from the job's source, each `with`
    and .acquire() enclosing its line), with the hop's thread first. [] when neither."""
    if inside and (LOCK_WAIT.match(inside[0]) or THREAD_JOIN.search(" ".join(inside))):
        others = lock_waiters(job, pid, tid)
        if len(others) >= 2 or (others and inside[0] == "acquire"):
            return others
    if thread is None:
        return []
    mine = locks_of(job, pid, thread)
    if mine is None:
        return []
    for other in lock_waiters(job, pid, tid):
        theirs = locks_of(job, pid, other)
        if theirs is not None and mine[1] in theirs[0] and theirs[1] in mine[0]:
            return [thread, other]
    return []


def locks_of(job: JobView, pid: int, thread) -> Optional[Tuple[List[str], str]]:
    """(locks held, the lock wanted) at the thread's own line, when that line takes a lock and the
    thread sleeps in a futex there."""
    from debug_stuck.live.selflock import frame_source, locks_at

    if (job.wait(pid, thread.tid) or {}).get("op") != "futex":
        return None
    index = own_frame_index(thread.frames)
    # only the lock's own acquire (a C one has no frame; a Semaphore's is threading.py) between the
    # job's line and the wait: a library call there is not the `with` itself that waits
    if index is None or any(not (f.native or THREADING_FILE.search(f.file or "")) for f in thread.frames[:index]):
        return None
    frame = thread.frames[index]
    held, wanted = locks_at(frame_source(frame, pid), frame.line)
    return (held, wanted) if wanted else None


def lock_waiters(job: JobView, pid: int, tid: Optional[int]):
    """The other threads of pid that wait to acquire a lock (their top frames show acquire, or the
    user's own code sits in a futex wait: a C lock taken in a `with` line has no frame of its own)."""
    out = []
    for thread in job.threads(pid):
        if thread.tid == tid:
            continue
        py = python_frames(thread.frames)
        if not py:
            continue
        wait = job.wait(pid, thread.tid) or {}
        acquiring = any(f.bare_name == "acquire" for f in py[:3])
        user_futex = wait.get("op") == "futex" and not SYNC_FILES.search(py[0].file or "")
        if acquiring or user_futex:
            out.append(thread)
    return out


# -- the chains of a job -------------------------------------------------------------------------------


def forked_holding_a_lock(job: JobView, pid: int, thread) -> Optional[Tuple[int, int, dict]]:
    """(the parent's pid, how many threads it runs, the frame table's entry for the wait) when this
    thread waits to acquire a lock, or waits on a pool whose threads a fork does not copy (the
    entry's `lost_at_fork`), in a process that multiprocessing forked from a parent running several
    threads, and no other thread of the process runs Python. fork(2) copies the lock as it was, held,
    and makes the child "with a single thread, the one that called fork()" (POSIX): a lock another
    thread of the parent held at that moment has no holder in the child, a pool's threads are not
    there to finish its work (CPython 3.12+ warns of it: "This process (pid=N) is multi-threaded, use
    of fork() may lead to deadlocks in the child")."""
    frames = thread.frames
    if any(MP_SYNC_FILE.search(f.file or "") for f in frames if not f.native):
        return None  # a multiprocessing lock is one semaphore shared with the parent: its holder there releases it
    by_multiprocessing = any(FORKED_BY_MULTIPROCESSING.search(f.file or "") for f in frames if not f.native)
    by_multiprocessing = by_multiprocessing or in_preexec_fn(frames)  # forked by subprocess: the same copy
    info = job.procs.get(pid)
    # a pool wait in a process of one thread: the pool's threads are not there, whoever forked it (os.fork
    # too); a process that runs more threads may be running them
    alone = info is not None and info.threads == 1
    if not by_multiprocessing and not alone:
        return None
    # what the thread waits on, from the frame table, up to the first Python frame the table does not
    # know (the code that made the call): a `with lock:` line has no frame of its own, CPython's C
    # acquire says it; a library frame above a C wait says what for (`defers`)
    table = frames_table() or []
    matched = []
    for frame in frames:
        entry = match_frame(table, frame.bare_name, frame.file)
        if entry is None and not frame.native:
            break
        if entry is not None:
            matched.append(entry)
    # a pool's wait says what for even under the threading primitive it ends in (Pool.map's Event.wait)
    pool = next((entry for entry in reversed(matched) if entry.get("lost_at_fork")), None)  # the call made
    chosen = chosen_wait(matched)
    if pool is None and (chosen is None or matched[chosen].get("wait") != "lock"):
        return None
    if not by_multiprocessing and pool is None:
        return None  # a lock in a process of one thread that was not forked: its own frames hold it
    if any(t.tid != thread.tid and python_frames(t.frames) for t in job.threads(pid)):
        return None
    parent = info.ppid if info is not None else None
    count = len(job.threads(parent)) if parent in job.procs else 0
    if pool is not None and alone:
        # a native pool's threads run no Python: the parent's own thread count says they were there
        return parent, max(count, job.procs[parent].threads if parent in job.procs else 0), pool
    return (parent, count, pool or matched[chosen]) if count >= 2 else None


def silent_among(conns: List[dict], silent_ms: int, delivering_ms: int) -> Optional[Tuple[List[str], List[dict], str]]:
    """Of established connections to several addresses, the one address whose connections have
    received nothing for `silent_ms` while every other connection received data in the last
    `delivering_ms` (`last_received_ms`, from the kernel's tcp_info): ([that address], its
    connections, how the others compare), or None when the times do not single one out."""
    silent = sorted({str(w["remote"]) for w in conns if w.get("last_received_ms", 0) >= silent_ms})
    if len(silent) != 1:
        return None
    mine = [w for w in conns if str(w["remote"]) == silent[0]]
    alive = [w for w in conns if w.get("last_received_ms", delivering_ms) < delivering_ms]
    if not alive or len(alive) + len(mine) != len(conns):
        return None
    quiet = max(w["last_received_ms"] for w in mine) / 1000
    latest = min(w["last_received_ms"] for w in alive) / 1000
    addresses = ", ".join(sorted({str(w["remote"]) for w in alive}))
    verb = "deliver" if len(alive) > 1 else "delivers"
    return (
        silent,
        mine,
        f", silent for {quiet:.0f} s, beside {len(alive)} to {addresses} that {verb} (data {latest:.1f} s ago)",
    )


# torch 2.13.0 torch/distributed/rpc/api.py: rpc_sync returns fut.wait() on the call's future; the
# callee runs the function in an RPC thread of its own process, under internal.py's _run_function
# ("exclusively called from C++", python_rpc_handler.cpp), and replies when it returns
RPC_CALLER = re.compile(r"(^|/)torch/distributed/rpc/api\.py$")
RPC_CALLEE = re.compile(r"(^|/)torch/distributed/rpc/internal\.py$")


# CPython 3.11.7 Lib/subprocess.py: Popen.communicate -> _communicate polls the child's stdout and
# stderr pipes (selectors) until the child closes them: it waits for the child's output and exit
SUBPROCESS_FILE = re.compile(r"(^|/)subprocess\.py$")


def awaited_elsewhere(job: JobView, hop, thread) -> Optional[Tuple[int, Optional[int]]]:
    """(pid, tid) of what a thread waits for in another process, read from its frames, with the
    hop's words set: the callee of an RPC (rpc_sync), or the one child whose output
    subprocess's communicate() polls (subprocess.run(capture_output=True)). None otherwise."""
    callee = rpc_callee(job, hop.pid, thread)
    if callee is not None:
        hop.kind, hop.object, hop.detail = "process", str(callee[0]), f"waits in rpc_sync for pid {callee[0]} to reply"
        return callee
    py = python_frames(thread.frames) if thread is not None else []
    kids = [k for k in job.children(hop.pid) if k in job.procs and job.procs[k].state not in "Z"]
    if hop.op in ("poll", "select") and len(kids) == 1:
        if any(f.bare_name == "_communicate" and SUBPROCESS_FILE.search(f.file or "") for f in py):
            hop.kind, hop.object = "child", str(kids[0])
            hop.detail = f"waits in subprocess's communicate() for the output and exit of its child {kids[0]}"
            return kids[0], None
    return None


def rpc_callee(job: JobView, pid: int, thread) -> Optional[Tuple[int, int]]:
    """(pid, tid) of the thread of another process of the job that runs an RPC function, when this
    thread waits in rpc_sync for a reply: the callee the caller waits for (the first, with several)."""
    py = python_frames(thread.frames) if thread is not None else []
    if not any(f.bare_name == "rpc_sync" and RPC_CALLER.search(f.file or "") for f in py):
        return None
    for other in sorted(job.procs):
        if other == pid:
            continue
        for candidate in job.threads(other):
            frames = python_frames(candidate.frames)
            if any(f.bare_name == "_run_function" and RPC_CALLEE.search(f.file or "") for f in frames):
                return other, candidate.tid
    return None


# a loop that waits for one thing: `while not done`, `while x not in seen`, `while seq[0] % 2 == 0` (any
# condition; `while True` names none)
POLL_LOOP = re.compile(r"^while\s+(?!(True|1)\s*:?\s*$)")


def dead_child_of_poll(job: JobView, hop) -> Optional[int]:
    """A child of hop's process that has exited with an error (a zombie not yet reaped: exit code not 0,
    or killed by a signal), when hop's thread polls in a loop of its own for one thing (`while not
    os.path.exists(done)`), waits in accept() for a connection that never comes, or waits for a signal
    (signal.sigwait, signal.pause): what it waits for was most likely that child's to make or send. Or
    it waits in poll on something no hop could follow (a messaging library's own descriptor: ZeroMQ's
    REQ socket waits for a reply from a peer that has died, unnoticed) and that child is its only one."""
    loop = str((job.wait(hop.pid, hop.tid or hop.pid) or {}).get("loop") or "")
    # ... or it waits in accept() for a connection nobody makes: that child was most likely the client
    accepting = hop.facts.get("end") == "no-client" or hop.kind == "signal"
    children = job.children(hop.pid)
    polling = hop.kind == "poll" and not hop.object and "end" not in hop.facts
    polling = polling and all(job.procs[c].state == "Z" for c in children)
    if not accepting and not polling and (hop.kind != "sleep" or not POLL_LOOP.match(loop)):
        return None
    dead = [c for c in children if job.procs[c].state == "Z" and job.procs[c].exit_status not in (None, 0)]
    return dead[0] if len(dead) == 1 else None
