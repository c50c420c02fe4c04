"""Follow the wait to its end: from the stuck job to the thing it waits on.

Each hop is one thread of one process and what it waits on. A hop leads to the next when what it
waits on is another party of the job (or of the machine): the ranks waiting in a collective lead to
the culprit rank; a trainer waiting for a batch leads to its DataLoader worker; a thread waiting
for a child leads to that child; a reader of a pipe leads to the writer; a thread waiting on a
future leads to the pool's worker thread; a lock waiter leads to the holder. The chain ends at a
terminal object: a path (and its file system), a FIFO or pipe with no one at the other end, a
socket and its peer, a stopped process, a sleep, a busy loop. Everything here is read from the
snapshot (the waits of debug_stuck.probes.collectors.waits, the stacks, the process table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Set, Tuple

from debug_stuck.core.libfacts import (
    innermost_wait,
    match_frame,
    reads_response_body,
)
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.endless import runs_forever, serves_forever
from debug_stuck.live.eventloop import (
    awaited_blocked_child,
    awaits_executor_shutdown,
    blocks_own_server,
    held_across_await,
    stuck_event_loop,
    thread_behind_await,
    through_event_loop,
    waits_on_connections,
)
from debug_stuck.live.fifoorder import fifo_opener
from debug_stuck.live.forkfill import fork_lost_filler
from debug_stuck.live.gil import note_gil_holder, to_gil_holder
from debug_stuck.live.hop import Hop
from debug_stuck.live.jobfacts import frames_prove, frames_table
from debug_stuck.live.jobstop import describe_job_control_stop
from debug_stuck.live.joinlock import join_under_lock, process_lock_holder, thread_lock_holder, wait_under_lock
from debug_stuck.live.loops import (
    innermost_loop,
    library_native_frame,
    own_frame_index,
    own_loop,
    sleeping_frames,
)
from debug_stuck.live.managers import is_manager_server, manager_next, serving_thread
from debug_stuck.live.observe import describe_ranks
from debug_stuck.live.observe import frozen as is_frozen
from debug_stuck.live.oneserver import handler_blocks_server
from debug_stuck.live.orphan import orphaned
from debug_stuck.live.ownend import eventfd_unwritten, own_end
from debug_stuck.live.parties import (
    FUTURE_WAIT,
    MP_SYNC_FILE,
    POLLED_POOL_WAIT,
    POOL_WAIT,
    SYNC_FILES,
    JobView,
    awaited_elsewhere,
    awaits_stop,
    blocked_handler,
    blocked_server_peer,
    busy_worker,
    dead_child_of_poll,
    exhausted_pool,
    forked_holding_a_lock,
    in_preexec_fn,
    in_thread_sync,
    joined_thread,
    lock_cycle,
    pool_worker_thread,
    primitive_of,
    python_frames,
    queue_feeder,
    spawn_children,
    sync_party,
    thread_party,
)
from debug_stuck.live.pipeholders import watched_pipe_writers
from debug_stuck.live.poolcallback import callback_waits_on_pool
from debug_stuck.live.poolwait import pool_wait
from debug_stuck.live.progress import arriving, departing, unmeasured
from debug_stuck.live.prompts import stopped_in_debugger
from debug_stuck.live.reaped import reaped_elsewhere
from debug_stuck.live.selflock import frame_source, own_lock_holder, self_held_wait
from debug_stuck.live.selfwaits import import_lock_join, server_shuts_itself_down
from debug_stuck.live.setafter import parent_sets_after_join, set_after_wait, waits_for_itself
from debug_stuck.live.sigheld import ignores_its_stop
from debug_stuck.live.spinparty import spinning_child
from debug_stuck.live.starved import queued_behind
from debug_stuck.live.storewait import store_wait
from debug_stuck.live.syncwaits import (
    barrier_action_runner,
    barrier_feeders,
    barrier_short,
    barrier_sibling,
    event_cleared,
    joiner_drains,
    none_left_to_release,
    none_left_words,
    notify_one_of_many,
    permits_leaked,
    sentinel_never_put,
    task_done_missing,
    two_queues,
)
from debug_stuck.live.waitwords import OP_WORDS, describe_peer, object_text
from debug_stuck.live.wakes import LONG_SLEEP_S
from debug_stuck.probes.collectors.lockfiles import HOLDER_GAP
from debug_stuck.probes.collectors.sockets import RECEIVE_GAP

MAX_HOPS = 8
HOLDER_AT_WORK_BYTES = 64 << 10  # a lock holder that writes this much in HOLDER_GAP s is at work
PLUMBING = {"<module>", "main", "wrapper", "inner", "__call__", "__init__", "__enter__", "__exit__", "__new__"}

DISTRIBUTED_FILE = re.compile(r"torch/distributed/|deepspeed/|accelerate/|lightning/fabric/strategies|c10d")
# A trainer's wait for a batch (the DataLoader's own functions, or a multiprocessing queue its workers
# fill), not any multiprocessing wait: torch.multiprocessing.spawn's join waits in connection.py.
DATALOADER_WAIT = re.compile(r"_try_get_data|_get_data|_next_data|torch/utils/data/|multiprocessing/queues\.py")
PROCESS_POOL_FILE = re.compile(r"concurrent/futures/process\.py$")
# CPython Lib/asyncio/base_events.py: run_forever -> _run_once -> selector.select, the loop's only wait
# CPython 3.11.7 Lib/threading.py: _shutdown joins every non-daemon thread at interpreter exit;
# Lib/concurrent/futures/thread.py: _python_exit (atexit) and shutdown(wait=True) join the pool's threads.
EXIT_JOIN = re.compile(r"^(_shutdown|_python_exit)$")


@dataclass
class Chain:
    hops: List[Hop]

    @property
    def terminal(self) -> Optional[Hop]:
        return self.hops[-1] if self.hops else None


# -- reading the snapshot ------------------------------------------------------------------------------


def _where(frames) -> Tuple[Optional[str], List[str]]:
    py = python_frames(frames)
    if not py:
        return None, []
    return py[_past_stand_ins(py)].text(), [f.bare_name for f in py]


def _past_stand_ins(py) -> int:
    """The innermost frame that is not a library's stand-in for a builtin (frames.yaml `stand_in`:
    IPython's open() in a notebook): the job's own call is the site, as it is without the stand-in."""
    table = frames_table() or []
    index = 0
    while index + 1 < len(py) and (match_frame(table, py[index].bare_name, py[index].file) or {}).get("stand_in"):
        index += 1
    return index


def _hop(job: JobView, pid: int, tid: Optional[int]) -> Hop:
    info = job.procs.get(pid)
    host = getattr(info, "host", None) if info is not None else None
    thread = job.thread(pid, tid)
    where, inside = _where(thread.frames) if thread is not None else (None, [])
    # a background process taken in for the job's pipe it holds open (live.pipeholders): not the job's child
    adopted = {"adopted": "yes"} if getattr(info, "adopted_by", None) is not None else {}
    return Hop(
        pid=pid,
        role=info.role if info is not None else "other",
        rank=info.rank if info is not None else None,
        tid=thread.tid if thread is not None else tid,
        thread=thread.name if thread is not None else None,
        where=where,
        inside=inside,
        host=host,
        frames=list(thread.frames) if thread is not None else [],
        dataloader_job=job.has_dataloader,
        program=_program(info) if thread is None else None,
        facts=adopted,
    )


def _one_sleep(hop: Hop, wait: dict) -> bool:
    """The hop's own frame sleeps outside any loop of its source, or in a `for` loop (a retry's few
    attempts, an item's pause): one sleep, not a poll's pause."""
    if str(wait.get("loop") or "").startswith("for "):
        return True
    index = own_frame_index(hop.frames)
    frame = hop.frames[index] if index is not None else None
    source = frame_source(frame, hop.pid) if frame is not None and isinstance(frame.line, int) else None
    return source is not None and innermost_loop(source, frame.line) is None


def _program(info) -> Optional[str]:
    """The name of a process that is not Python (its stack was not read): `sh`, `git`, `nvcc`."""
    name = getattr(info, "name", None) if info is not None and info.role == "other" else None
    return name if name and not name.startswith("python") else None


# -- describing one wait -------------------------------------------------------------------------------


SYNC_WORDS = (
    ("Event.wait", "an Event nobody sets"),
    ("Future.result", "a future's result"),
    ("Thread.join", "a thread to finish"),
    ("Barrier.wait", "a threading barrier"),
    ("Queue.get", "an item from a queue"),
    ("Queue.put", "room in a full queue"),
    ("Queue.join", "every item put in a queue to be marked done (task_done)"),
    ("acquire", "a lock"),
    ("Condition.wait", "a condition to be notified"),
)
PLUMBING_FILES = re.compile(r"(^|/)(threading|queue|selectors)\.py$|multiprocess(ing)?/|^<string>$")


def _sync_wait(frames) -> Tuple[str, Optional[str]]:
    """("an Event nobody sets", "prefetch_shard (data.py:40)"): what a thread in a futex wait waits
    for, from its Python frames, and the first frame of the code that called it."""
    py = python_frames(frames)
    names = [f.function for f in py[:4]]
    what = "a lock or condition"
    for key, words in SYNC_WORDS:
        if any(name == key or name.endswith("." + key) or name.split(".")[-1] == key for name in names):
            what = words
            break
    else:
        # a library's own wait on a condition (a c10d send/recv, a collective): the table says what for;
        # so does a native library's own wait under the Python frames (tokenizers' rayon pool)
        found = innermost_wait(frames_table() or [], [(f.bare_name, f.file) for f in py])
        native = innermost_wait(frames_table() or [], [(f.function, f.file) for f in frames if f.native])
        if found is not None and found[1].get("wait") in ("collective", "rendezvous"):
            what = found[1]["object"]
        elif native is not None and native[1].get("library") not in ("cpython", None):
            what = native[1]["object"]
    caller = next((f for f in py if not SYNC_FILES.search(f.file or "")), None)
    return what, caller.text() if caller is not None else (py[0].text() if py else None)


MP_UTIL_FILE = re.compile(r"(^|/)multiprocessing/util\.py$")


def _describe(hop: Hop, wait: dict, job_pids: Set[int]) -> None:
    """Fill hop.kind / object / detail / facts from one resolved wait."""
    op = wait.get("op")
    if op == "running" and sleeping_frames(hop.frames):
        op = "sleep"  # caught awake between two sleeps (its state read R): its stack is in the sleep call
    hop.op = op
    obj = wait.get("object") or {}
    peers = wait.get("peers") or []
    hop.facts["syscall"] = wait.get("syscall") or op or "?"
    if op in ("open", "read", "write", "sync", "lock") and obj:
        kind = obj.get("kind", "file")
        hop.kind = kind
        hop.object = obj.get("path") or (f"{kind}:[{obj.get('inode')}]" if obj.get("inode") else None)
        verb = OP_WORDS.get(op, op)
        text = f"is blocked in {verb} of {object_text(obj)}"
        reading = op == "read" or (op == "open" and wait.get("flags", 0) == 0)
        writers = [p for p in peers if p.get("mode") in ("w", "rw")]
        readers = [p for p in peers if p.get("mode") in ("r", "rw")]
        if kind in ("fifo", "pipe"):
            other = writers if reading else readers
            if not other:
                end = "no-writer" if reading else "no-reader"
                text += ", with no writer" if reading else ", with no reader"
                if obj.get("holders_incomplete"):
                    text += " found"
            else:
                end = "peer-" + (other[0].get("state") or "?")
                text += f"; the {'writer' if reading else 'reader'} is {describe_peer(other)}"
            hop.facts["end"] = end
        if kind in ("file", "dir"):
            hop.facts["fs"] = obj.get("fs") or "?"
            hop.facts["network"] = "yes" if obj.get("network") else "no"
        if op == "lock":
            holders = wait.get("lock_holders") or []
            hop.kind = "lock"
            text = f"waits for a lock on {object_text(obj)}"
            if holders:
                text += f" held by pid {holders[0]}"
                hop.facts.update(end="held", holder=str(holders[0]))
            elif wait.get("lock_self"):
                held = self_held_wait(hop.pid, hop.frames, hop.where, file_lock=True)
                if held is not None:
                    hop.facts["end"], text = held
                else:  # another thread of its own: the `with` around its line says which (own_lock_holder)
                    text += f"; its own process (pid {hop.pid}) holds it (/proc/locks)"
                    hop.facts["end"] = "own-process"
        hop.detail = text
        return
    if op in ("connect", "accept", "recv", "send", "read", "write", "poll") and obj.get("kind") == "socket":
        hop.kind = "socket"
        hop.object = obj.get("remote") or obj.get("path") or obj.get("local")
        text = f"is blocked in {OP_WORDS.get(op, op)} on {object_text(obj)}"
        if obj.get("state") == "SYN_SENT":
            text += ": nobody accepts the connection" + ("" if obj.get("listener") else " (no listener there)")
            hop.facts["end"] = "no-accept"
        elif obj.get("peer_unaccepted"):
            text += ": the listener at the other end never accepted it"
            hop.facts["end"] = "never-accepted"
        elif obj.get("proto") == "udp" and op in ("recv", "read", "poll"):  # datagrams: no peer to wait on
            text, hop.facts["end"] = text + ": no datagram has come to it", "no-datagram"
        elif obj.get("state") == "ESTABLISHED" and op in ("recv", "read", "poll") and arriving(obj):
            text += f": data still arrives ({obj['received_bytes']} bytes in the last {RECEIVE_GAP} s)"
            hop.facts["receiving"] = "yes"
        elif obj.get("proto") == "unix" and op in ("send", "write") and wait.get("wchan") == "unix_wait_for_peer":
            # a datagram socket whose receiver's queue is full (net/unix/af_unix.c unix_wait_for_peer)
            readers = [p for p in obj.get("peer") or [] if p.get("pid") not in job_pids]
            if readers:
                text += f": its reader, {describe_peer(readers)}, not of this job, does not read (its queue is full)"
                hop.facts.update(end="not-reading", reader=str(readers[0]["pid"]))
        elif obj.get("state") == "ESTABLISHED" and op in ("send", "write") and departing(obj):
            text += f": data still leaves ({obj['sent_bytes']} bytes in the last {RECEIVE_GAP} s)"
            hop.facts["sending"] = "yes"
        elif obj.get("state") == "ESTABLISHED" and op in ("recv", "read", "poll") and unmeasured(obj):
            text += ": whether data still arrives on it could not be read (no reading of `ss -ti`)"
            hop.facts["receiving"] = "unread"
        elif obj.get("state") == "ESTABLISHED" and op in ("recv", "read", "poll"):
            peer = obj.get("peer") or []
            peer_text = f" ({describe_peer(peer)})" if peer else ""
            if reads_response_body([(f.function, f.file) for f in python_frames(hop.frames)]):
                text += ": the peer sent part of its answer and stopped" + peer_text
                hop.facts["body"] = "stalled"
            else:
                text += ": the peer never answers" + peer_text
            hop.facts["end"] = "no-answer"
        elif obj.get("state") == "LISTEN":
            text += ": waiting for a connection that never comes"
            hop.facts["end"] = "no-client"
        hop.facts["state"] = obj.get("state") or "?"
        hop.detail = text
        return
    if op == "wait-child":
        hop.kind = "child"
        child = wait.get("child")
        at_exit = any(f.bare_name == "_exit_function" and MP_UTIL_FILE.search(f.file or "") for f in hop.frames)
        if at_exit:
            hop.facts["exit"] = "yes"  # Lib/multiprocessing/util.py: at exit, non-daemon children are joined
        when = ", at exit (multiprocessing joins its non-daemon children then)," if at_exit else ""
        hop.detail = f"waits{when} for its child process" + (f" {child}" if child and child > 0 else "")
        return
    lock_file = wait.get("lock_file")
    if lock_file and op in ("sleep", "running", "futex"):
        hop.kind = "cpu" if op == "running" else "sleep"
        hop.object = lock_file.get("path")
        hop.facts["lockfile"] = "yes"
        holders = lock_file.get("holders") or []
        locked_by = lock_file.get("locked_by") or []
        if locked_by:
            # A lock on the file (flock/fcntl, filelock's UnixFileLock) that a live process holds: polled, not stale.
            hop.kind, hop.facts["end"] = "lock", "held"
            hop.detail = f"waits for a lock on {hop.object}" + (f" at {hop.where}" if hop.where else "")
            hop.detail += f", polling; pid {locked_by[0]} holds it"
            hop.facts["holder"] = str(locked_by[0])
            command = (lock_file.get("holder_cmdlines") or {}).get(locked_by[0])
            if command and locked_by[0] not in job_pids:
                hop.detail += f" ({command[:100]}, not a process of this job)"
            wrote = lock_file.get("holder_wrote")
            if wrote is not None and wrote >= HOLDER_AT_WORK_BYTES:
                hop.facts["holder_wrote"] = str(wrote)
                hop.detail += f"; it wrote {wrote >> 10} KiB in {HOLDER_GAP} s: at work"
            return
        if lock_file.get("self_locked"):
            # /proc/locks names the waiter's own pid: a lock on the file that its own process holds
            hop.kind, hop.facts["end"] = "lock", "own-process"
            hop.detail = f"waits for a lock on {hop.object}" + (f" at {hop.where}" if hop.where else "")
            hop.detail += f", polling; its own process (pid {hop.pid}) holds it (/proc/locks)"
            return
        hop.detail = f"waits for the lock file {hop.object} to go away" + (f" at {hop.where}" if hop.where else "")
        if holders:
            hop.detail += f"; pid {', '.join(map(str, holders))} has it open"
        elif lock_file.get("recorded_pid") and not lock_file.get("recorded_alive"):
            hop.detail += f"; it names pid {lock_file['recorded_pid']}, which no longer runs: a stale lock"
        else:
            hop.detail += "; no process has it open"
        return
    if op == "sleep":
        hop.kind = "sleep"
        left = wait.get("sleep_left_s")  # an absolute clock_nanosleep's deadline (probes.collectors.wakeups)
        if isinstance(left, (int, float)) and left >= LONG_SLEEP_S and _one_sleep(hop, wait):
            hop.facts["sleep_left"] = f"{left:.0f} s (about {left / 3600:.1f} h)" if left >= 3600 else f"{left:.0f} s"
            hop.detail = f"sleeps at {hop.where}, {hop.facts['sleep_left']} more in one sleep"
            return
        hop.detail = ("sleeps in a loop" if hop.where else "sleeps") + (f" at {hop.where}" if hop.where else "")
        hop.detail += f", `{wait['loop']}`" if wait.get("loop") else ""
        return
    if op == "running":
        native = [f for f in hop.frames if f.native]
        device = innermost_wait(frames_table() or [], [(f.function, f.file) for f in native])
        if device is not None and device[1].get("wait") == "cuda-sync":
            # CUDA's wait spins on a core by default (cudaDeviceScheduleAuto/Spin), HIP's too
            # (hipDeviceScheduleAuto): busy, yet waiting for the GPU
            hop.kind = "device"
            runtime = "HIP" if device[1].get("library") == "hip" else "CUDA"
            hop.detail = f"waits for its GPU in {native[device[0]].shown_name} ({runtime}'s wait spins on a CPU core)"
            hop.detail += f", at {hop.where}" if hop.where else ""
            return
        hop.kind = "cpu"
        library = library_native_frame(hop.frames)
        inside = f" inside {library.shown_name} ({library.file})" if library is not None else ""
        hop.detail = f"keeps running{inside}, never waiting" + (f", at {hop.where}" if hop.where else "")
        return
    if op in ("futex",):
        hop.kind = "futex"
        what, where = _sync_wait(hop.frames)
        hop.detail = f"waits for {what}" + (f" at {where}" if where else "")
        held = self_held_wait(hop.pid, hop.frames, where)
        if held is not None:
            hop.facts["end"], hop.detail = held
        return
    if op in ("poll", "select", "epoll"):
        hop.kind = "poll"
        watched = [w.get("object") or {} for w in wait.get("watched") or []]
        if waits_on_connections(hop, op, watched):
            return
        kinds, writers = sorted({w.get("kind", "?") for w in watched}), watched_pipe_writers(wait)
        hop.detail = f"waits in {OP_WORDS.get(op, op)}" + (f" on {', '.join(kinds)}" if kinds else "")
        hop.detail += f"; the writer is {describe_peer(writers)}" if writers else ""
        return
    if op == "io":
        hop.kind = "io"
        hop.detail = f"waits for I/O in the kernel ({wait.get('wchan')})"
        return
    if op in ("accept", "recv", "read", "poll", "send", "write") and str(wait.get("error")).endswith(" is closed"):
        # another thread closed the descriptor this one is blocked on: close() does not wake it on Linux
        on_socket = any((f.file or "").endswith("socket.py") for f in python_frames(hop.frames))
        hop.kind, hop.facts["end"] = ("socket" if on_socket else "file"), "fd-closed"
        hop.detail = (
            f"is blocked in {OP_WORDS.get(op, op)} on fd {wait.get('fd')}, which has been closed since: a close() "
            "from another thread does not wake a thread blocked on the descriptor (shutdown() does, for a socket)"
        )
        return
    if op == "pause":  # pause, sigsuspend, sigwait (signal.sigwait, signal.pause): only a signal ends it
        hop.kind = "signal"
        hop.detail = f"waits for a signal ({wait.get('syscall') or op})"
        return
    hop.detail = f"waits ({wait.get('syscall') or wait.get('wchan') or op or 'unknown'})"


# -- following the chain -------------------------------------------------------------------------------


def follow(job: JobView, pid: int, tid: Optional[int] = None, seen: Optional[Set[Tuple[int, int]]] = None) -> List[Hop]:
    """The hops from this thread to the end of its wait."""
    seen = seen if seen is not None else set()
    hops: List[Hop] = []
    while len(hops) < MAX_HOPS:
        hop = _hop(job, pid, tid if tid is not None else blocked_handler(job, pid))
        key = (hop.pid, hop.tid or 0)
        if key in seen:
            hop.kind, hop.detail, hop.terminal = "cycle", "waits for a thread that (indirectly) waits for it", True
            hops.append(hop)
            return hops
        seen.add(key)
        info = job.procs.get(pid)
        frozen = info is not None and is_frozen(info)
        if info is not None and (info.state in ("T", "t", "Z", "D") or frozen):
            state = {"T": "is stopped (SIGSTOP)", "t": "is stopped by a debugger", "Z": "has exited (zombie)"}
            hop.kind = "process"
            hop.detail = state.get(info.state, f"is in uninterruptible sleep ({info.wchan or 'a kernel wait'})")
            hop.facts["state"] = info.state
            if frozen:  # the cgroup freezer holds its threads: docker pause, SLURM suspend, a pod's pause
                hop.detail = (
                    "is frozen by its cgroup's freezer (docker pause, SLURM suspend): nothing runs until it is thawed"
                )
                hop.facts["state"] = "frozen"
            describe_job_control_stop(hop, info)
            hop.evidence.append(
                f"/proc/{pid}/stat: state {info.state}" + (f", wchan {info.wchan}" if info.wchan else "")
            )
            if hops:
                hop.facts["via"] = hops[-1].kind
            hop.terminal = True
            hops.append(hop)
            return hops
        # a process with no Python stack (a shell, git, a compiler) is read at its main thread
        wait = job.wait(pid, hop.tid or pid)
        if wait is not None:
            _describe(hop, wait, set(job.procs))
            if hop.facts.get("end") == "fork-held" and info is not None:
                hop.facts["forked_by"] = str(info.ppid)  # forked inside the lock's block (selflock)
            stuck_event_loop(job, hop, wait)
            _context(job, hop, wait)
        else:
            hop.detail = "waits (its system call could not be read)"
        if hops:
            hop.facts["via"] = hops[-1].kind
        if hop.kind == "cpu" and job.in_gc(pid, hop.tid):
            hop.facts["gc"] = "yes"
            hop.detail = "keeps running in garbage collection" + (f" (at {hop.where})" if hop.where else "")
        elif hop.kind == "cpu" and "lockfile" not in hop.facts:
            _name_own_loop(job, hop)
        nxt = _next(job, hop, wait or {})
        note_gil_holder(job, hop, after_waiter=bool(hops) and hops[-1].facts.get("gil") == "wait")
        hops.append(hop)
        if nxt is None:
            hop.terminal = True
            return hops
        pid, tid = nxt
    hops[-1].terminal = True
    return hops


def _name_own_loop(job: JobView, hop: Hop) -> None:
    """A thread that turns in one function of the job's own code is named at that function (its
    file:line), not at the standard-library call it polls (os.path.exists, time.time)."""
    loop = own_loop(job.snap.stacks.get(hop.pid), hop.tid)
    if loop is None:
        return
    hop.where = loop.text()
    hop.facts["loop"] = "own"
    hop.detail = f"keeps running, never waiting, at {hop.where}"


def _context(job: JobView, hop: Hop, wait: dict) -> None:
    """What the wait means for this job: which descriptor, a connection to its own rendezvous
    master, a wait inside distributed code; and the evidence it was read from."""
    info = job.procs.get(hop.pid)
    if wait.get("fd") is not None:
        hop.facts["fd"] = str(wait["fd"])
    if wait.get("syscall"):
        text = f"/proc/{hop.pid}/task/{hop.tid}/syscall: {wait['syscall']}"
        if wait.get("fd") is not None:
            text += f" on fd {wait['fd']}"
        hop.evidence.append(text)
    elif wait.get("wchan"):
        hop.evidence.append(f"/proc/{hop.pid}/task/{hop.tid}/wchan: {wait['wchan']}")
    obj = wait.get("object") or {}
    if wait.get("fd") == 0 and wait.get("op") == "read" and obj.get("kind") in ("fifo", "pipe") and info is not None:
        writers = {p["pid"] for p in wait.get("peers") or [] if p.get("mode") in ("w", "rw") and p["pid"] != hop.pid}
        if writers == {info.ppid}:
            hop.facts["stdin"] = "parent"  # its standard input, which only its parent can write: a prompt
    thread = job.thread(hop.pid, hop.tid)
    asks = wait.get("prompt_call") or (thread is not None and frames_prove(thread.frames, "stdin"))
    if wait.get("fd") == 0 and wait.get("op") == "read" and asks:
        # input() or a debugger's prompt (frames.yaml facts: [stdin]): a person answers it, not
        # whatever holds the other end of the pipe (a shell's `sleep | python`, a tmux pane)
        hop.facts["prompt"] = "yes"
        hop.facts.setdefault("stdin", "prompt")
    if hop.facts.get("stdin") and thread is not None:
        stopped_in_debugger(hop, thread.frames)
    if obj.get("kind") in ("fifo", "pipe") and hop.facts.get("end") in ("no-writer", "no-reader"):
        scanned = "some processes could not be read" if obj.get("holders_incomplete") else "every process's fds"
        hop.evidence.append(f"no other holder of {obj.get('path') or hop.object} found ({scanned} scanned)")
    for peer in (wait.get("peers") or [])[:3]:
        hop.evidence.append(f"pid {peer['pid']} holds it on fd {peer.get('fd')} ({peer.get('mode') or '?'})")
    for holder in (wait.get("lock_holders") or [])[:3]:
        hop.evidence.append(f"/proc/locks: pid {holder} holds the lock")
    env = info.env if info is not None else {}
    remote = obj.get("remote") or ""
    master = bool(env.get("MASTER_PORT")) and remote.endswith(":" + env.get("MASTER_PORT", ""))
    if master:
        hop.facts["master"] = "yes"
    server = [p for p in obj.get("peer") or [] if p.get("pid") in job.procs]
    if not store_wait(job, hop, wait, thread, server, master) and master:
        hop.detail += f" (MASTER_ADDR:MASTER_PORT of this job is {env.get('MASTER_ADDR', '?')}:{env['MASTER_PORT']})"
    if thread is not None and any(DISTRIBUTED_FILE.search(f.file or "") for f in python_frames(thread.frames)):
        hop.facts["dist"] = "yes"


def _next(job: JobView, hop: Hop, wait: dict) -> Optional[Tuple[int, Optional[int]]]:
    inside = " ".join(hop.inside)
    thread = job.thread(hop.pid, hop.tid)
    files = " ".join(f.file for f in python_frames(thread.frames)) if thread is not None else ""
    if hop.facts.get("stdin") == "prompt" or ignores_its_stop(job, hop) or runs_forever(job, hop):
        return None
    if reaped_elsewhere(job, hop, wait) or handler_blocks_server(job, hop, thread) or orphaned(job, hop, thread):
        return None
    if serves_forever(job, hop):
        return None
    if thread is not None and blocks_own_server(hop, wait, thread):
        return None
    if thread is not None:
        handled, after = manager_next(job, hop, thread, None)
        if handled:
            return after
    dead = dead_child_of_poll(job, hop)
    if dead is not None:
        made = "sent it" if hop.kind == "signal" else "made it"
        hop.detail += f"; its child pid {dead}, which would most likely have {made}, has exited with an error"
        hop.facts["dead_child"] = str(dead)
        return dead, None
    holder = to_gil_holder(job, hop, thread)
    if holder is not None:
        return hop.pid, holder
    awaited = awaited_blocked_child(job, hop, thread)
    if awaited is not None:
        return awaited, None
    shutdown = awaits_executor_shutdown(job, hop, thread)
    if shutdown is not None:
        return shutdown
    spawned = spawn_children(job, hop, thread)
    if spawned:
        hop.facts.pop("end", None)
        hop.kind, hop.object = "child", str(spawned[0])
        hop.detail = f"waits for the {len(spawned)} processes torch.multiprocessing started to finish"
        return spawned[0], None
    # A trainer waiting for a batch: its worker that is not idle in the queue.
    if DATALOADER_WAIT.search(inside + " " + files) and hop.role != "dataloader-worker":
        worker = busy_worker(job, hop.pid)
        if worker is not None:
            hop.kind, hop.object = "worker", str(worker)
            hop.detail = (
                "waits for a batch from its DataLoader workers"
                if job.has_dataloader
                else "waits for an item from its worker processes (a multiprocessing queue or pipe)"
            )
            return worker, None
    if hop.op == "wait-child":
        child = wait.get("child")
        kids = job.children(hop.pid)
        target = child if child and child > 0 else (kids[0] if kids else None)
        if target is not None and target in job.procs:
            hop.object = str(target)
            return target, None
    opener = fifo_opener(job, hop, wait)
    if opener is not None:
        return opener, None
    found = blocked_server_peer(job, hop, wait, files)
    if found is not None:
        server, handler = found
        # a Manager's server: the handler thread that runs this client's call, not its idle main thread
        return server, serving_thread(job, server, hop.pid) if is_manager_server(job, server) else handler
    behind = thread_behind_await(job, hop, thread)
    if behind is not None:
        return behind
    if held_across_await(job, hop, thread):
        return None
    elsewhere = awaited_elsewhere(job, hop, thread)
    if elsewhere is not None:
        return elsewhere
    sender = None if eventfd_unwritten(job, hop, wait, thread) else own_end(job, hop, wait, thread)
    if sender is not None or hop.facts.get("end") == "no-thread":
        return sender
    peers = wait.get("peers") or watched_pipe_writers(wait)
    if hop.kind in ("fifo", "pipe", "socket", "poll", "tty") and peers:
        # a pipe's other end: its writer for a read, its reader for a write (a holder of the same end is no peer)
        ends = {"read": ("w", "rw", None), "write": ("r", "rw", None)}.get(hop.op or "", ("r", "w", "rw", None))
        other = next(
            (p for p in peers if p["pid"] != hop.pid and p["pid"] in job.procs and p.get("mode") in ends), None
        )
        if other is not None:
            return other["pid"], None
    if hop.kind == "lock" and wait.get("lock_holders"):
        holder = wait["lock_holders"][0]
        if holder in job.procs:
            return holder, None
    if hop.facts.get("end") == "own-process" and thread is not None:
        return own_lock_holder(job, hop, thread)
    if hop.role != "dataloader-worker" and _waits_on_process_pool(job, hop, files):
        if callback_waits_on_pool(job, hop) is not None:
            return None
        worker = pool_wait(job, hop)
        if worker is not None:
            return worker, None
        if hop.facts.get("end"):
            return None
    if (
        hop.op == "futex"
        and thread is not None
        and any(MP_SYNC_FILE.search(f.file or "") for f in python_frames(thread.frames))
    ):
        holder = process_lock_holder(job, hop, thread) or parent_sets_after_join(job, hop, thread)
        if holder is not None:
            return holder
        party = sync_party(job, hop.pid)
        if party is not None:
            hop.kind, hop.object = "process", str(party)
            hop.detail = f"waits at a multiprocessing {primitive_of(thread.frames)} for pid {party}"
            return party, None
        spinning = spinning_child(job, hop.pid)
        if spinning is not None:
            party, header, where = spinning
            hop.kind, hop.object = "process", str(party)
            hop.facts.update(spin_loop=header, spin_at=where)
            hop.detail = (
                f"waits at a multiprocessing {primitive_of(thread.frames)}, while its child pid {party} spins in "
                f"`{header}` at {where}, waiting too"
            )
            return party, None
        if barrier_short(job, hop, thread):
            return None
        sibling = barrier_sibling(job, hop, thread)
        if sibling is not None:
            return sibling, None
    if hop.op == "futex" and thread is not None:
        if "end" not in hop.facts and (server_shuts_itself_down(hop, thread) or import_lock_join(job, hop, thread)):
            return None
        if "end" not in hop.facts:
            served = through_event_loop(job, hop, thread, bool(FUTURE_WAIT.search(files)))
            if served is not None or hop.facts.get("end") == "loop-blocked":
                return served
        if FUTURE_WAIT.search(files):
            pool = exhausted_pool(job, hop.pid, thread)
            if pool is not None:
                name, size = pool
                hop.kind, hop.object = "pool", name
                hop.facts["end"] = "exhausted"
                every = (
                    "it is that pool's only worker" if size == 1 else f"all {size} of that pool's workers do the same"
                )
                hop.detail = (
                    f"waits inside a task of thread pool {name!r} for a future, and {every}: "
                    "a task queued in the pool cannot start until a worker is free"
                )
                return None
            worker = pool_worker_thread(job, hop.pid, hop.tid)
            if worker is not None:
                hop.kind, hop.object = "thread", str(worker)
                hop.detail = "waits for a result from a pool worker thread"
                return hop.pid, worker
        feeder = queue_feeder(job, hop.pid, thread)
        if feeder is not None:
            hop.kind, hop.object = "thread", str(feeder)
            hop.detail = "waits, at exit, for its multiprocessing queue's feeder thread to flush what it put"
            hop.facts["end"] = "queue-flush"
            return hop.pid, feeder
        if join_under_lock(job, hop, thread) or wait_under_lock(job, hop, thread):
            return None
        if waits_for_itself(job, hop, thread):
            return None
        setter = set_after_wait(job, hop, thread) if "end" not in hop.facts else None
        if setter is not None:
            return setter
        others = lock_cycle(job, hop.pid, hop.tid, hop.inside, thread)
        if others and not permits_leaked(job, hop):
            hop.kind = "lock-cycle"
            hop.parties = [thread_party(t) for t in others[:3]]
            names = " and ".join(f"{t.name!r} at {_sync_wait(t.frames)[1]}" for t in others[:3])
            hop.detail = f"waits while threads {names} each wait for a lock the other holds: a lock-order deadlock"
            hop.facts["end"] = "deadlock"
        holder = thread_lock_holder(job, hop, thread) if "end" not in hop.facts else None
        if holder is not None:
            return holder
        if "end" not in hop.facts:
            task_done_missing(job, hop, thread)
        if "end" not in hop.facts and not queued_behind(job, hop, thread):
            two_queues(job, hop, thread)
        if "end" not in hop.facts:
            joiner_drains(job, hop, thread)
        if "end" not in hop.facts:
            notify_one_of_many(job, hop, thread)
        if "end" not in hop.facts:
            sentinel_never_put(job, hop, thread)
        if "end" not in hop.facts:
            event_cleared(job, hop, thread)
        if "end" not in hop.facts:
            fork_lost_filler(job, hop, thread)
        joined = joined_thread(job, hop.pid, thread) if "end" not in hop.facts else None
        if joined is not None:
            at_exit = any(EXIT_JOIN.match(f.bare_name) for f in python_frames(thread.frames))
            hop.kind, hop.object = "thread", str(joined.tid)
            alike = [t for t in job.threads(hop.pid) if t.tid not in (joined.tid, thread.tid) and in_thread_sync(t)]
            idle = awaits_stop(job, hop.pid, joined) if at_exit else None
            if idle is not None:
                hop.parties = [thread_party(joined)]
                hop.detail = (
                    f"has ended its main code, and Python's exit waits for its non-daemon thread {joined.name!r}, "
                    f"which {idle}"
                )
                hop.facts.update(end="exit-idle-thread", exit="yes")
                return None
            hop.detail = f"waits for thread {joined.name!r}" + (
                f" (and {len(alike)} more that {'wait' if len(alike) > 1 else 'waits'} alike)"
                if alike and in_thread_sync(joined)
                else ""
            )
            hop.detail += " to finish" + (
                " before the interpreter can exit (Python joins its non-daemon and pool threads at exit)"
                if at_exit
                else ""
            )
            if at_exit:
                hop.facts["exit"] = "yes"
            return hop.pid, joined.tid
        forked = forked_holding_a_lock(job, hop.pid, thread) if "end" not in hop.facts else None
        if forked is not None:
            parent, count, entry = forked
            where = _sync_wait(hop.frames)[1]
            at = f" at {where}" if where else ""
            if entry.get("wait") == "lock":
                hop.detail = (
                    f"waits to acquire a lock{at} that was held when pid {parent} (it runs {count} threads) "
                    "forked it: fork copies a lock as it is, and copies only the thread that forked, so no "
                    "thread of the child will ever release it"
                )
                hop.facts.update(end="fork-held", forked_by=str(parent))
                hop.facts.update({"preexec": "yes"} if in_preexec_fn(hop.frames) else {})
            else:
                runs = f" (it runs {count} threads)" if count >= 2 else ""
                hop.detail = (
                    f"waits for {entry['object'].split(':')[0]}{at}, whose threads pid {parent}{runs} "
                    "had started when it forked this process: fork copies only the thread that forked, so "
                    "the pool's threads do not exist here and the wait never ends"
                )
                hop.facts.update(end="fork-pool", forked_by=str(parent))
            return None
        others = [t for t in job.threads(hop.pid) if t.tid != thread.tid and python_frames(t.frames)]
        runner = barrier_action_runner(thread, others) if "end" not in hop.facts else None
        if runner is not None:
            hop.detail += f", whose action thread {runner.name!r} runs: the parties are let go once it returns"
            return hop.pid, runner.tid
        feeders = barrier_feeders(thread, others) if "end" not in hop.facts else []
        if feeders:
            names = " and ".join(repr(t.name) for t in feeders)
            hop.detail += f", which threads {names} would put once past the threading barrier they wait at"
            return hop.pid, feeders[0].tid
        if "end" not in hop.facts and not permits_leaked(job, hop) and none_left_to_release(thread, others):
            what, where = _sync_wait(hop.frames)
            hop.detail = f"waits for {what}" + (f" at {where}" if where else "") + none_left_words(thread, others)
            hop.facts["end"] = "no-thread"
    return None


def _waits_on_process_pool(job: JobView, hop: Hop, files: str) -> bool:
    """The thread waits for results that a pool's worker processes compute: a pool that polls
    (joblib, datasets) caught in any call, a multiprocessing Pool's result, or a future of a
    ProcessPoolExecutor (its manager thread runs in concurrent/futures/process.py; a thread pool's
    future has a worker thread of its own instead)."""
    if POLLED_POOL_WAIT.search(files):
        return True
    if hop.op != "futex" or not files:
        return False
    if POOL_WAIT.search(files):
        return True
    return (
        bool(FUTURE_WAIT.search(files))
        and pool_worker_thread(job, hop.pid, hop.tid) is None
        and any(PROCESS_POOL_FILE.search(f.file or "") for t in job.threads(hop.pid) for f in python_frames(t.frames))
    )


def build_chains(snap: Snapshot, groups, culprit) -> List[Chain]:
    """One chain per stack group (its first rank), the culprit's first; for a job with no ranks,
    its first process. The culprit's chain starts at a rank waiting for it."""
    job = JobView(snap)
    chains: List[Chain] = []
    done: Set[int] = set()
    if culprit is not None:
        hops: List[Hop] = []
        if culprit.waiting:
            # a waiter on the culprit's own node when there is one: its stack and waits are in snap
            waiter = next((p for p in culprit.waiting[0].pids if p in job.procs), culprit.waiting[0].pids[0])
            first = _hop(job, waiter, None)
            first.kind, first.object = "rank", str(culprit.pid)
            who = f"rank {culprit.rank}" if culprit.rank is not None else f"pid {culprit.pid}"
            first.detail = f"waits in {first.inside[0] if first.inside else 'a collective'} for {who}"
            if len(culprit.waiting[0].pids) > 1 or len(culprit.waiting) > 1:
                first.group = " and ".join(describe_ranks(g) for g in culprit.waiting)
            hops.append(first)
            done.update(culprit.waiting[0].pids)
        hops += follow(job, culprit.pid)
        chains.append(Chain(hops))
        done.update(culprit.group.pids)
    for group in groups:
        if group.pids[0] in done:
            continue
        chains.append(Chain(follow(job, group.pids[0])))
        done.update(group.pids)
    if not chains:
        starts = [p for p in snap.processes if p.role == "rank"] or list(snap.processes)
        if starts:
            chains.append(Chain(follow(job, starts[0].pid)))
    return chains
