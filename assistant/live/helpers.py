"""The helpers a main thread waits for, when every one of them computes.

A trainer waiting for its next batch while all its DataLoader workers compute, or a main thread
waiting on futures while every worker of its thread pool (or its multiprocessing / process pool)
computes in the job's own code: that is what a slow pipeline looks like, and also what a task that
never ends looks like. One window cannot tell them apart. A task stuck for good leaves the other
helpers idle once the work queued for them is done (torch 2.13.0 torch/utils/data/dataloader.py:
_try_put_index keeps at most prefetch_factor * num_workers batches outstanding and _next_data
returns them in order; a concurrent.futures or multiprocessing pool hands out its queued tasks and
its idle workers wait in their queue's get), so helpers that all compute are not called hung.
The same holds for a child process it runs and waits for (or reads a socket from, or waits for the
file lock of), a prefetcher thread of its own, a native
library's thread pool (seen through the process's CPU), and a main thread that computes inside a
library routine itself (`computes_in_library`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.libfacts import chosen_wait, innermost_wait, match_frame
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.eventloop import runs_event_loop
from debug_stuck.live.loops import library_at_work, loop_header, own_frame_index
from debug_stuck.live.managers import calls_manager, serves_manager
from debug_stuck.live.progress import BUSY_CPU, cpu_used, running, thread_motion
from debug_stuck.probes.collectors.procs import is_library_helper
from debug_stuck.probes.collectors.stacks import main_thread

THREAD_POOL_WORKER = re.compile(r"(^|/)concurrent/futures/thread\.py$")  # ThreadPoolExecutor's _worker
# What a main thread waits in for its pool's results: a future (concurrent.futures, a Pool's
# AsyncResult.get), an event (AsyncResult.wait), a condition (Pool.imap's next) or a queue the
# workers fill (datasets' Dataset.map with num_proc polls one), or a join of threads (Thread.join: a
# worker thread that extracts features while the main thread waits for it to end). The helpers counted
# for them are a ThreadPoolExecutor's threads, else the process's pool workers, else the threads of the
# job's own code; a wait of these kinds with none of them finds none.
POOL_WAITS = ("future", "event", "condition", "queue", "join")
# a pool's worker process: multiprocessing's Pool, concurrent.futures' ProcessPoolExecutor, and loky's
# (joblib 1.6.0 joblib/externals/loky/process_executor.py: _process_worker, joblib's default backend)
PROCESS_POOL_WORKER = re.compile(
    r"(^|/)multiprocess(ing)?/pool\.py$|(^|/)concurrent/futures/process\.py$|(^|/)loky/process_executor\.py$"
)


@dataclass
class Helpers:
    what: str  # "DataLoader workers", "thread pool workers", "pool worker processes"
    members: List[str]  # "pid 12 (98% CPU)", "thread ThreadPoolExecutor-0_0"
    first_pid: int  # the process whose locals tell (a worker's, or the process of the threads)
    one: str = ""  # `what` for one of them: "child process"
    clause: Optional[str] = None  # what it waits for, when its helpers cannot be listed (a native pool)
    check: Optional[str] = None  # what tells slow from stuck, when the locals do not

    def said(self) -> str:
        """What the main thread waits for, after its process's label."""
        if self.clause:
            return self.clause
        if len(self.members) == 1:
            member = self.members[0]
            named = member if member.startswith(self.one or self.what) else f"{self.one or self.what} {member}"
            return f"waits for its {named}, which computes"
        return f"waits for its {self.what} while all {len(self.members)} of them compute ({', '.join(self.members)})"

    def tells(self) -> str:
        return self.check or (
            f"the locals in `py-spy dump --locals --pid {self.first_pid}` (a sample or task index), taken twice a "
            "minute apart, tell them apart"
        )


def busy_helpers(snap: Snapshot, knowledge: Knowledge, pid: int) -> Optional[Helpers]:
    """The helpers pid's main thread waits for, when there is at least one and every one computes."""
    thread = snap.latest_main_thread(pid)
    if thread is None:
        return None
    entries = [match_frame(knowledge.frames, f.function, f.file) or {} for f in thread.frames]
    waits = [e for e in entries if e.get("wait") not in (None, "busy")]
    # a native pool's threads (rayon's, libgomp's team): a native frame's wait; a Pool's has Python frames
    native = next((e for f, e in zip(thread.frames, entries) if f.native and e.get("lost_at_fork")), None)
    if native is not None:
        return _native_pool(snap, pid, native)
    if any("dataloader" in (e.get("facts") or ()) for e in waits):
        workers = [p for p in snap.processes if p.ppid == pid and p.role == "dataloader-worker"]
        return _processes(snap, knowledge, workers, "DataLoader workers", "DataLoader worker")
    if any(e.get("wait") == "subprocess" or _joins_processes(e) for e in waits):
        # subprocess.run / Popen.wait / multiprocessing's Process.join: a conversion, preprocessing or
        # evaluation child that computes (a Python one, whose stack says where; a child that writes is
        # progress already)
        children = [p for p in snap.processes if p.ppid == pid and not is_library_helper(p.cmdline)]
        return _processes(snap, knowledge, children, "child processes", "child process")
    if calls_manager(thread):
        # a proxy call to a multiprocessing Manager (a queue's get): its other clients would fill it;
        # the manager's server process idles between requests by design
        clients = [p for p in snap.processes if p.ppid == pid and not is_library_helper(p.cmdline)]
        clients = [p for p in clients if not serves_manager(_latest_threads(snap, p.pid))]
        found = _processes(snap, knowledge, clients, "processes that use its multiprocessing Manager", "process")
        if found is not None:
            return found
    if runs_event_loop(thread):
        # asyncio's create_subprocess_exec(...) and `await proc.communicate()`: the loop waits in its
        # selector on the child's pipes (CPython 3.11 Lib/asyncio/subprocess.py), no subprocess frame
        children = [p for p in snap.processes if p.ppid == pid and not is_library_helper(p.cmdline)]
        found = _processes(snap, knowledge, children, "child processes", "child process")
        if found is not None:
            return found
    peers, what, one = _waited_processes(snap, pid, thread.tid)
    if peers:
        # a process of the job that streams its results over a socket, or holds a file lock while it
        # builds what the lock guards (a cache): the thread waits, the other process computes
        found = _processes(snap, knowledge, peers, what, one)
        if found is not None:
            return found
    polling = _sleeps_beside_children(snap, knowledge, pid, thread) if _sleeps(snap, pid, thread.tid) else None
    polling = polling or _sleeps_between_calls(snap, pid, thread) or _backs_off(snap, entries, pid, thread)
    if polling is not None:
        return polling  # a poll of its own (a library's poll for its pool's results goes on below)
    if not any(e.get("wait") in POOL_WAITS for e in waits):
        return None
    others = [t for t in _latest_threads(snap, pid) if t.tid != thread.tid]
    pool = [t for t in others if any(THREAD_POOL_WORKER.search(f.file or "") for f in t.frames if not f.native)]
    if pool:
        return _threads(snap, knowledge, pid, pool, "thread pool workers", "thread pool worker")
    children = [p for p in snap.processes if p.ppid == pid and _in_pool(snap, p.pid)]
    if children:
        return _processes(snap, knowledge, children, "pool worker processes", "pool worker process")
    # no pool: the threads of its own code that would fill what it waits on (a prefetcher thread putting
    # batches on a queue.Queue); library threads (tqdm's monitor, a tracker's) fill nothing of its own
    own = [t for t in others if own_frame_index(list(t.frames)) is not None]
    found = _threads(snap, knowledge, pid, own, "threads", "thread") if own else None
    return found or _serving_children(snap, pid)


def _serving_children(snap: Snapshot, pid: int) -> Optional[Helpers]:
    """Child processes that serve the thread's wait over a channel no system call of it shows (a gRPC
    stream, whose connections a library's own thread polls): when every child of the process runs,
    and a thread of each computes inside a library routine under its own code (numpy, LAPACK, torch),
    it is at work on what the thread waits for, or on something of its own; either way one window
    cannot call it stuck. A child spinning in its own Python code is not counted."""
    children = [p for p in snap.processes if p.ppid == pid and not is_library_helper(p.cmdline)]
    if not children or not all(running(p) and p.state not in "DZT" for p in children):
        return None
    for child in children:
        threads = _latest_threads(snap, child.pid)
        at_work = [t for t in threads if own_frame_index(list(t.frames)) is not None and _in_library(list(t.frames))]
        if not at_work:
            return None
    members = [f"pid {p.pid} ({p.cpu_percent or 0:.0f}% CPU)" for p in children]
    return Helpers("child processes", members, children[0].pid, "child process")


def _in_library(frames) -> bool:
    own = own_frame_index(frames)
    return own is not None and own > 0 and library_at_work(frames, own) is not None


def _waited_processes(snap: Snapshot, pid: int, tid: int):
    """([the job's processes a thread's system call waits on], what, one): those at the other end of
    the socket it receives on, or those holding the file lock it asks for (probes.collectors.waits
    reads both from /proc)."""
    info = snap.process(pid)
    wait = (info.waits.get(tid) if info is not None else None) or {}
    found = wait.get("object") or {}
    if wait.get("op") in ("recv", "read", "poll") and found.get("kind") == "socket":
        ends, what, one = {peer.get("pid") for peer in found.get("peer") or []}, "connection peers", "connection's peer"
    elif wait.get("op") == "lock":
        ends, what, one = set(wait.get("lock_holders") or ()), "lock holders", "lock's holder"
    elif wait.get("op") in ("read", "poll") and (pipe_ends := _pipe_ends(wait)) is not None:
        # results that arrive through pipes (multiprocessing's Pipe, connection.wait over several):
        # the processes holding their other ends write them when they finish computing
        ends, what, one = pipe_ends, "pipe writers", "pipe's writer"
    elif wait.get("op") in ("read", "poll") and _untraced(found):
        # a pseudo-terminal's master (its child writes to the slave), an inotify, eventfd or signalfd
        # descriptor: no peer /proc can name; its children are whom the read waits on, if anyone
        ends, what, one = {p.pid for p in snap.processes if p.ppid == pid}, "child processes", "child process"
    else:
        return [], "", ""
    return [p for p in snap.processes if p.pid in ends - {pid} and not is_library_helper(p.cmdline)], what, one


def _untraced(found: dict) -> bool:
    """A descriptor whose other end /proc does not name: a pseudo-terminal master (/dev/ptmx), or an
    anonymous inode (inotify, eventfd, signalfd)."""
    if found.get("kind") == "device":
        return str(found.get("path") or "").startswith(("/dev/ptmx", "/dev/pts/"))
    return found.get("kind") == "anon" and found.get("what") in ("inotify", "eventfd", "signalfd", "[eventfd]")


def _pipe_ends(wait: dict) -> Optional[set]:
    """The pids holding the other ends of the pipes a read or a poll waits on; None when it waits on
    anything but pipes (a poll over a socket, an event loop's wakeup socket)."""
    if wait.get("op") == "read":
        found = wait.get("object") or {}
        return {p.get("pid") for p in wait.get("peers") or []} if found.get("kind") == "pipe" else None
    watched = [w.get("object") or {} for w in wait.get("watched") or []]
    if not watched or any(w.get("kind") != "pipe" for w in watched):
        return None
    return {p.get("pid") for w in watched for p in w.get("peers") or []}


def _joins_processes(entry: dict) -> bool:
    """A join of multiprocessing's child processes (frames.yaml: wait join, fact multiprocess)."""
    return entry.get("wait") == "join" and "multiprocess" in (entry.get("facts") or ())


def _threads(snap: Snapshot, knowledge: Knowledge, pid: int, threads, what: str, one: str) -> Optional[Helpers]:
    """Threads taking turns at the GIL: one sample shows some of them "idle" in its futex; their frames
    in the job's own code, with no wait inside it, while the process runs, say they compute."""
    process = snap.process(pid)
    if process is None or not all(_computes(knowledge, t.frames) for t in threads):
        return None
    # threads that share one CPU with others (the GIL, another job) get part of it, and want the rest
    wanted = sum(process.thread_demand.get(t.tid, 0.0) for t in threads)
    if running(process) or wanted >= BUSY_CPU:
        return Helpers(what, [f"thread {t.name or t.tid}" for t in threads], pid, one)
    return None


def _native_pool(snap: Snapshot, pid: int, entry: dict) -> Optional[Helpers]:
    """A wait on a native library's own thread pool (frames.yaml `lost_at_fork`: rayon's under
    tokenizers), whose threads py-spy cannot see: they compute when the process burns CPU while its
    Python threads wait. In a process forked after the pool started they do not exist (the process
    idles: no helpers, and the chain names the lost pool)."""
    process = snap.process(pid)
    cpu = (process.cpu_percent or 0.0) if process is not None else 0.0
    if process is None or process.state in "DZT" or cpu < BUSY_CPU:
        return None
    pool = str(entry.get("object") or "its native thread pool").split(":")[0]
    return Helpers(
        "native pool threads",
        [pool],
        pid,
        clause=f"waits for {pool}, whose threads compute ({cpu:.0f}% CPU for the process)",
        check=f"the pool's threads in `top -H -p {pid}`, busy while they work and idle once the work is done or lost, "
        "tell them apart",
    )


def _sleeps(snap: Snapshot, pid: int, tid: int) -> bool:
    process = snap.process(pid)
    return process is not None and ((process.waits or {}).get(tid) or {}).get("op") == "sleep"


def _sleeps_beside_children(snap: Snapshot, knowledge: Knowledge, pid: int, thread) -> Optional[Helpers]:
    """A main thread that sleeps in a loop (polling for a results file, a marker, a status) while every
    child process it started computes: it waits for what they will produce (an evaluator writing its
    scores), slow or stuck alike in one window. Children: running, a CPU busy, in no wait the frame
    table knows."""
    # multiprocessing's resource tracker and fork server sit idle beside any pool, by design
    children = [p for p in snap.processes if p.ppid == pid and not is_library_helper(p.cmdline)]

    def computes(p) -> bool:
        main = snap.latest_main_thread(p.pid)
        frames = [(f.function, f.file) for f in main.frames] if main is not None else []
        return p.state not in "DZT" and cpu_used(p) >= BUSY_CPU and innermost_wait(knowledge.frames, frames) is None

    if not children or not all(computes(p) for p in children):
        return None
    members = [f"pid {p.pid} ({cpu_used(p):.0f}% CPU)" for p in children]
    where = next((f.text() for f in thread.frames if not f.native), None)
    verb = "computes" if len(children) == 1 else "compute"
    return Helpers(
        "child processes",
        members,
        children[0].pid,
        "child process",
        clause=f"sleeps in a loop{f' at {where}' if where else ''} while its child process"
        f"{'es' if len(children) > 1 else ''} {', '.join(members)} {verb}: it polls for what "
        f"{'they produce' if len(children) > 1 else 'that child produces'}",
        check=f"what pid {children[0].pid} writes (`ls -l /proc/{children[0].pid}/fd`, the files it has open, growing) "
        f"and `py-spy dump --pid {children[0].pid}` taken twice a minute apart tell them apart",
    )


def _sleeps_between_calls(snap: Snapshot, pid: int, thread) -> Optional[Helpers]:
    """A main thread that sleeps in a loop of the job's own code while its process exchanged data both
    ways with a service moments ago (live.collect: `service` of its wait): a retry with backoff on a
    busy or rate-limited service, or a poll of a job's status, calls a service that answers between
    its sleeps. Slow or stuck (an answer that never changes) look alike in one window."""
    process = snap.process(pid)
    wait = ((process.waits or {}).get(thread.tid) or {}) if process is not None else {}
    service = wait.get("service")
    if wait.get("op") != "sleep" or not service:
        return None
    where = next((f.text() for f in thread.frames if not f.native), None)
    ago = service["last_received_ms"] / 1000
    return Helpers(
        "service",
        [str(service["remote"])],
        pid,
        clause=f"sleeps in a loop{f' at {where}' if where else ''} between calls to {service['remote']}, which "
        f"answered {ago:.1f} s ago: it retries or polls a service that is up",
        check=f"the answers it gets (a 429 or 503 with Retry-After, a status that never changes) in its log, or "
        f"`py-spy dump --locals --pid {pid}` taken twice a minute apart (a step or attempt counter), tell them apart",
    )


def _backs_off(snap: Snapshot, entries, pid: int, thread) -> Optional[Helpers]:
    """A main thread asleep in a library's retry with backoff (frames.yaml `backoff`: urllib3's Retry,
    tenacity, backoff, huggingface_hub's http_backoff): its last try failed or was refused, and it tries
    again until one succeeds or its tries run out (the library raises). A service that is slow to
    accept (rate limits, a warm-up) and one that never will look alike in one window. `entries`: the
    thread's frames matched in the frame table, innermost first."""
    matched = [(index, entry) for index, entry in enumerate(entries) if entry]
    chosen = chosen_wait([entry for _, entry in matched]) if _sleeps(snap, pid, thread.tid) else None
    if chosen is None or not matched[chosen][1].get("backoff"):
        return None
    index, entry = matched[chosen]
    frame = thread.frames[index]
    return Helpers(
        "retry",
        [entry["library"]],
        pid,
        clause=f"sleeps at {frame.text()}, in {entry['library']}'s retry with backoff: it waits for {entry['object']}",
        check=f"the answers its tries get (a 429 or 503, a refused or reset connection: in its log) and its try "
        f"counter in `py-spy dump --locals --pid {pid}` taken twice a minute apart tell a service slow to accept "
        "from one that never will",
    )


def computes_in_library(snap: Snapshot, knowledge: Knowledge, pid: int) -> Optional[str]:
    """Where pid's main thread computes, when its innermost Python frame is a library's (numpy's svd,
    a model's forward, a solver's fit) and no frame of its stack waits: a library's compute routine
    runs as long as its input needs, so one frozen window of it is no hang by itself (live.loops says
    the same of a moving thread). So is a line of the job's own code that called a library's native
    routine directly (torch.linalg.svd, a BLAS product: the native frames under it are the library's,
    live.loops.library_native_frame). A frozen line of the job's own code, or of the standard library
    it calls (a loop on a flag, a regex, a builtin), is not this: it is read as a spin, unless the line
    is in the body of a `for` loop of the job's own code: a pass over data (counting pairs over a
    corpus) sits on its busiest line in every sample, and ends with its iterable; a spin is a `while`.
    Any sample of the window will do: a line that runs a library routine again and again
    (`w = torch.tanh(w @ w.T)` in a loop) is caught now and then between two of its calls, in the
    interpreter; a spin never shows one."""
    latest = snap.latest_main_thread(pid)
    process = snap.process(pid)
    if latest is None or process is None or not running(process) or process.state in "DZT":
        return None
    found, thread = None, latest
    samples = _main_threads(snap, pid)
    for thread in samples + _unwound_alike(snap, pid, latest, samples):
        own = own_frame_index(thread.frames)
        found = library_at_work(thread.frames, own if own is not None else len(thread.frames))
        if found is not None:
            break
    wait = innermost_wait(knowledge.frames, [(f.function, f.file) for f in latest.frames])
    if found is None:
        # the job's own line, or the standard library under it (a poll of os.path.exists): a spin,
        # unless a `for` loop of the job's own code holds the line, or a builtin's pass over data
        # calls the job back there (a collection that pass's allocations set off is its work too)
        if wait is None:
            return own_for_loop(latest, pid) or callback_pass(latest, pid)
        return callback_pass(latest, pid) if wait[1].get("wait") == "gc" else None
    if wait is not None and wait[1].get("wait") != "gc":  # a collection its allocations set off is its work
        return None
    innermost = next(f for f in thread.frames if not f.native)
    return f"{found.shown_text()}, called from {innermost.text()}" if found.native else innermost.text()


def thread_computes_in_library(snap: Snapshot, pid: int, tid: int) -> Optional[str]:
    """Where a thread of pid computes inside a library routine (library_at_work under its own frame: a
    library's Python or native code, or a standard-library routine whose time grows with its input,
    pickling a large state), when it ran most of the window (its demand, else its process's CPU)."""
    process = snap.process(pid)
    if process is None or process.state in "DZT":
        return None
    demand = (process.thread_demand or {}).get(tid)
    if (demand if demand is not None else cpu_used(process)) < BUSY_CPU:
        return None
    series = snap.stacks.get(pid)
    samples = [t for d in reversed(series.dumps) for t in d.threads if t.tid == tid] if series is not None else []
    for thread in samples:  # any sample will do: one caught between two calls of the routine shows none
        own = own_frame_index(list(thread.frames))
        found = library_at_work(thread.frames, own) if own else None
        if found is not None:
            break
    else:
        return None
    mine = thread.frames[own]
    return f"{found.shown_text()}, called from {mine.text()}" if found.native else f"{found.text()}, from {mine.text()}"


def own_for_loop(thread, pid: int) -> Optional[str]:
    """ "F (file:line), in its own loop `for x in y`" when the thread's innermost frame of the job's own
    code is at a line in the body of a `for` loop (the innermost loop holding it), read from the job's
    source; None for a `while`, or a source not read."""
    from debug_stuck.live.selflock import frame_source

    own = own_frame_index(thread.frames)
    if own is None or any(not f.native for f in thread.frames[:own]):
        return None  # a Python frame of a library under it: that library's loop, not the job's
    frame = thread.frames[own]
    source = frame_source(frame, pid)
    header = loop_header(source, frame.line) if source and isinstance(frame.line, int) else None
    if header is None or not header.startswith(("for ", "async for ")):
        return None
    return f"{frame.text()}, in its own loop `{header}`"


def callback_pass(thread, pid: int) -> Optional[str]:
    """Where a builtin's pass over data calls the job back, when the thread's innermost frame of the
    job's own code is at a line that hands one of its functions to a routine (`sorted(order,
    key=cmp_to_key(by_length))`), or is that function, at a line that calls nothing and turns in
    no loop, called from there (live.loops.call_with_callback): "by_length (x.py:25), called for each
    item by `sorted(...)` (x.py:29)". None otherwise: a frozen line with no such caller is a spin."""
    from debug_stuck.live.loops import call_with_callback, calls_nothing_outside_loops
    from debug_stuck.live.selflock import frame_source

    own = own_frame_index(thread.frames)
    if own is None or any(not f.native for f in thread.frames[:own]):
        return None
    python = [f for f in thread.frames[own:] if not f.native]
    sources = [frame_source(f, pid) for f in python[:2]]
    if not sources[0] or not isinstance(python[0].line, int):
        return None
    found = call_with_callback(sources[0], python[0].line)
    if found is not None:
        return f"{python[0].text()}, in `{found[0]}`, which calls {found[1]} for each item"
    callee = python[0].bare_name
    if len(python) < 2 or not sources[1] or not isinstance(python[1].line, int):
        return None
    if not calls_nothing_outside_loops(sources[0], python[0].line, callee):
        return None
    found = call_with_callback(sources[1], python[1].line, callee)
    return f"{python[0].text()}, called for each item by `{found[0]}` ({python[1].text()})" if found else None


def _processes(snap: Snapshot, knowledge: Knowledge, procs, what: str, one: str = "") -> Optional[Helpers]:
    def computes(p) -> bool:
        # in its own code now, or its stack moved in the window (a worker caught sending the result it
        # computed: working, not stuck; a stuck worker's stack stays, an idle one's waits for a task)
        thread = snap.latest_main_thread(p.pid)
        if thread is None:
            return False
        return _computes(knowledge, thread.frames) or thread_motion(snap.stacks.get(p.pid), thread.tid) == "moving"

    if procs and all(running(p) and p.state not in "DZT" and computes(p) for p in procs):
        return Helpers(what, [f"pid {p.pid} ({p.cpu_percent or 0:.0f}% CPU)" for p in procs], procs[0].pid, one)
    return None


def _computes(knowledge: Knowledge, frames) -> bool:
    """In the job's own code, and in no wait the frame table knows inside it (the library frames
    that called that code, a worker's loop, wait for nothing now)."""
    frames = list(frames)
    own = own_frame_index(frames)
    if own is None:
        return False
    return innermost_wait(knowledge.frames, [(f.function, f.file) for f in frames[: own + 1]]) is None


def _main_threads(snap: Snapshot, pid: int) -> list:
    """pid's main thread in each stack sample of the window, the latest first."""
    series = snap.stacks.get(pid)
    found = [main_thread(d, pid) for d in reversed(series.dumps)] if series is not None else []
    return [t for t in found if t is not None]


def _unwound_alike(snap: Snapshot, pid: int, latest, samples: list) -> list:
    """When no sample of pid (`samples`: its main thread in each) was unwound natively: the main
    threads of the processes at the same Python stack (line for line) that were. The sampler unwinds
    one process per distinct stack (probes.collectors.stacks.sample_stacks: ranks at one line run the
    same code), so theirs stand for pid's."""
    if any(f.native for t in samples for f in t.frames):
        return []
    key = latest.signature(lines=True)
    alike = []
    for other in snap.stacks:
        threads = _main_threads(snap, other) if other != pid else []
        if threads and threads[0].signature(lines=True) == key:
            alike += [t for t in threads if any(f.native for f in t.frames)]
    return alike


def _latest_threads(snap: Snapshot, pid: int) -> list:
    series = snap.stacks.get(pid)
    latest = series.latest() if series is not None else None
    return list(latest.threads) if latest is not None else []


def _in_pool(snap: Snapshot, pid: int) -> bool:
    thread = snap.latest_main_thread(pid)
    return thread is not None and any(PROCESS_POOL_WORKER.search(f.file or "") for f in thread.frames if not f.native)
