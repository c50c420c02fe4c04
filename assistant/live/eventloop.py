"""An event loop's wait, read from its poll or epoll: asyncio's tasks wait on the connections the
loop watches, not in reads of their own; and a loop that nothing is left to wake."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from debug_stuck.live.asyncwaits import (
    barrier_parties,
    lock_across_await,
    lock_order,
    never_completed,
    permits_leaked_async,
    set_from_thread,
    task_done_skipped,
)
from debug_stuck.live.parties import SYNC_FILES, in_thread_sync, python_frames, silent_among
from debug_stuck.live.progress import arriving
from debug_stuck.live.waitwords import OP_WORDS, describe_peer
from debug_stuck.probes.collectors.sockets import RECEIVE_GAP

ASYNCIO_FILE = re.compile(r"asyncio/base_events\.py")
# Connections to several addresses: one that has received nothing for SILENT_CONNECTION_MS, beside
# others that received data in the last DELIVERING_MS, is the one the wait ends at.
SILENT_CONNECTION_MS, DELIVERING_MS = 3_000, 2_000


def waits_on_connections(hop, op: str, watched: List[dict]) -> bool:
    """An event loop (asyncio's, a selector's) idle in poll/epoll whose only network descriptors are
    established TCP connections: what it runs waits on them. Data still arriving on one (tcp_info,
    progress.arriving) is a transfer under way; else, to one address (or the one silent among
    several), nothing arrives (no listening socket among them: a server idle between clients is not
    this)."""
    tcp = [w for w in watched if w.get("kind") == "socket" and w.get("proto") == "tcp"]
    conns = [w for w in tcp if w.get("state") == "ESTABLISHED"]
    remotes = sorted({str(w.get("remote")) for w in conns})
    if not conns or len(conns) != len(tcp):
        return False
    flowing = next((w for w in conns if arriving(w)), None)
    if flowing is not None:
        hop.kind, hop.object = "socket", str(flowing.get("remote"))
        hop.detail = f"waits in {OP_WORDS.get(op, op)} on a connection to {hop.object}: data still arrives"
        hop.detail += f" ({flowing['received_bytes']} bytes in the last {RECEIVE_GAP} s)"
        hop.facts.update(receiving="yes", state="ESTABLISHED")
        return True
    others = ""
    if len(remotes) > 1:
        found = silent_among(conns, SILENT_CONNECTION_MS, DELIVERING_MS)
        if found is None:
            return False
        remotes, conns, others = found
    loop = "asyncio" if any(ASYNCIO_FILE.search(f.file or "") for f in python_frames(hop.frames)) else None
    count = f"{len(conns)} connections" if len(conns) > 1 else "a connection"
    peer = next((w.get("peer") for w in conns if w.get("peer")), None)
    hop.kind, hop.object = "socket", remotes[0]
    hop.detail = (
        f"waits in {OP_WORDS.get(op, op)} on {count} to {remotes[0]}{others}"
        + (" (asyncio's event loop: its tasks wait on them)" if loop else "")
        + ": the peer never answers"
        + (f" ({describe_peer(peer)})" if peer else "")
    )
    hop.facts.update(end="no-answer", state="ESTABLISHED")
    if loop:
        hop.facts["event_loop"] = loop
    return True


def stuck_event_loop(job, hop, wait: dict) -> bool:
    """asyncio's event loop idle for good: in epoll_wait or poll with no timeout (asyncio passes the
    time to its nearest scheduled callback, none when no timer is pending: CPython 3.11
    Lib/asyncio/base_events.py BaseEventLoop._run_once), watching nothing but its own wakeup socket
    (the socketpair of selector_events.py _make_self_pipe), in a process with no other Python thread
    that could wake it (call_soon_threadsafe). No I/O, no timer, no thread: every task awaits something
    only another task could finish (an asyncio.Queue, Event, Future, Lock), and none is left to run."""
    if hop.kind != "poll" or wait.get("timeout_ms") != -1:
        return False
    if not any(ASYNCIO_FILE.search(f.file or "") for f in python_frames(hop.frames)):
        return False
    watched = [w.get("object") or {} for w in wait.get("watched") or []]
    if len(watched) != 1 or watched[0].get("kind") != "socket" or watched[0].get("proto") != "unix":
        return False
    if len(job.threads(hop.pid)) != 1:
        return False
    hop.kind = "task"
    hop.detail = (
        f"waits in {OP_WORDS.get(wait.get('op'), wait.get('op'))} with no timeout, watching only its event loop's own "
        "wakeup socket (asyncio): every task awaits something only another task could finish (an asyncio "
        "Queue, Event, Future or Lock), and no task is left to run"
    )
    hop.facts.update(end="no-task", event_loop="asyncio")
    for read, say in SOURCE_READINGS:  # the first the loop-starting file shows, read from the source
        found = read(hop.pid, hop.frames)
        if found is not None:
            hop.facts.update(found)
            hop.detail += "; " + say(found)
            break
    return True


SOURCE_READINGS = (
    (
        permits_leaked_async,
        lambda f: (
            f"the job's code takes {f['semaphore']} at {f['acquired_at']}, and {f['leak_at']} leaves before its "
            f"{f['semaphore']}.release(): each task that leaves there keeps a permit"
        ),
    ),
    (
        task_done_skipped,
        lambda f: (
            f"the job's code awaits {f['queue']}.join() at {f['joined_at']}, and {f['skip_at']} leaves an item's "
            f"iteration before its {f['queue']}.task_done() at {f['task_done_at']}: join never returns"
        ),
    ),
    (
        lock_order,
        lambda f: f"the job's code takes asyncio locks {f['async_locks']} in opposite orders: {f['lock_orders']}",
    ),
    (
        set_from_thread,
        lambda f: (
            f"the job's code awaits {f['awaited']} in {f['awaited_at']}, an asyncio.Event made at {f['created_at']} "
            f"that only {f['set_in_thread']} sets: a set() from another thread never wakes the loop"
        ),
    ),
    (
        never_completed,
        lambda f: (
            f"the job's code awaits {f['awaited']} in {f['awaited_at']}, an {f['primitive']} made at "
            f"{f['created_at']} on which no line of that file calls {f['completes']}"
        ),
    ),
    (
        barrier_parties,
        lambda f: (
            f"the job's tasks wait in {f['barrier_parties']} (made at {f['barrier_at']}, awaited in "
            f"{f['barrier_waits']}), which wakes them only once that many tasks wait"
        ),
    ),
)

LOOP_RUNNERS = ("run_forever", "_run_once", "run_until_complete")


def runs_event_loop(thread) -> bool:
    """The thread runs an asyncio event loop (BaseEventLoop.run_forever and _run_once on its stack)."""
    return any(f.bare_name in LOOP_RUNNERS and ASYNCIO_FILE.search(f.file or "") for f in python_frames(thread.frames))


def through_event_loop(job, hop, thread, future_wait: bool) -> Optional[Tuple[int, int]]:
    """A thread blocked on a threading or concurrent-futures primitive inside a coroutine or callback
    of the asyncio loop it runs itself blocks that loop: nothing else on it runs until the wait returns,
    and a result the loop must produce (asyncio.run_coroutine_threadsafe(coro, loop).result() on the
    loop's own thread) never comes (CPython 3.11 Lib/asyncio/tasks.py run_coroutine_threadsafe, "meant
    to be called from a different OS thread than the one where the event loop is running"). The hop
    ends there (`loop-blocked`). A thread waiting for a concurrent future (`future_wait`) in a process
    with one other thread that runs a loop so blocked goes on to that thread."""
    held = lock_across_await(hop.pid, hop.frames) if runs_event_loop(thread) else None
    if held is not None:  # a `with lock:` has no Python frame of its own: its line says it
        hop.detail = (
            f"waits for threading lock {held['lock']} at {hop.where}, inside a coroutine of the asyncio event loop "
            f"it runs itself, and coroutine {held['held_across_await']} holds that lock across an await: the "
            "holder is suspended on this same loop, which can never resume it while this wait blocks it"
        )
        hop.facts.update(held, end="loop-blocked", event_loop="asyncio")
        return None
    if in_thread_sync(thread) and runs_event_loop(thread):
        caller = next((f for f in python_frames(thread.frames) if not SYNC_FILES.search(f.file or "")), None)
        at = f" at {caller.text()}" if caller is not None else ""
        hop.detail = (
            f"waits for {_sync_words(thread)}{at}, inside a coroutine or callback of the asyncio event loop it runs "
            "itself: while it waits the loop runs nothing else, so what the wait needs from that loop (the "
            "coroutine run_coroutine_threadsafe scheduled on it) never runs"
        )
        hop.facts.update(end="loop-blocked", event_loop="asyncio")
        return None
    if not future_wait:
        return None
    loops = [t for t in job.threads(hop.pid) if t.tid != thread.tid and runs_event_loop(t)]
    if len(loops) != 1 or not in_thread_sync(loops[0]):
        return None
    hop.kind, hop.object = "thread", str(loops[0].tid)
    hop.detail = f"waits for a result from the asyncio event loop that thread {loops[0].name!r} runs"
    hop.facts["event_loop"] = "asyncio"
    return hop.pid, loops[0].tid


def _sync_words(thread) -> str:
    names = [f.bare_name for f in python_frames(thread.frames)[:4]]
    return "a future's result" if "result" in names else "a threading primitive (a lock, an event, a queue)"


BASE_EVENTS = re.compile(r"(^|/)asyncio/base_events\.py$")


def awaits_executor_shutdown(job, hop, thread) -> Optional[Tuple[int, int]]:
    """(pid, tid) of the thread that shuts the loop's default executor down, when the loop thread
    waits in its selector for it: asyncio.run() ends with loop.shutdown_default_executor(), whose
    thread (BaseEventLoop._do_shutdown, CPython 3.11 Lib/asyncio/base_events.py) joins every executor
    worker, so a run_in_executor task that never returns keeps asyncio.run from returning."""
    if hop.kind != "poll" or thread is None or not runs_event_loop(thread):
        return None
    for other in job.threads(hop.pid):
        if other.tid != thread.tid and any(
            f.bare_name == "_do_shutdown" and BASE_EVENTS.search(f.file or "") for f in python_frames(other.frames)
        ):
            hop.kind, hop.object = "thread", str(other.tid)
            hop.detail = (
                f"waits, as asyncio.run ends, for its default executor to shut down: thread {other.name!r} joins "
                "the executor's workers (loop.shutdown_default_executor)"
            )
            hop.facts["event_loop"] = "asyncio"
            return hop.pid, other.tid
    return None


# asyncio's ThreadedChildWatcher (the default on Unix in 3.8-3.11) waits for each child in a thread of
# its own (CPython 3.11 Lib/asyncio/unix_events.py: _do_waitpid, thread name "asyncio-waitpid-N")
CHILD_WATCHER = re.compile(r"(^|/)asyncio/unix_events\.py$")


def awaited_blocked_child(job, hop, thread) -> Optional[int]:
    """The child an event loop thread awaits (asyncio's child watcher thread waits for it to exit)
    when that child is blocked writing a pipe this process reads: `await proc.wait()` with
    stdout=PIPE, whose reader asyncio stops reading once its buffer is full. The hop says so."""
    if hop.kind != "poll" or thread is None or not runs_event_loop(thread):
        return None
    for other in job.threads(hop.pid):
        wait = job.wait(hop.pid, other.tid) or {}
        watcher = any(CHILD_WATCHER.search(f.file or "") for f in python_frames(other.frames))
        child = wait.get("child")
        if wait.get("op") != "wait-child" or not watcher or child not in job.procs:
            continue
        written = job.wait(child, child) or {}
        readers = [p.get("pid") for p in written.get("peers") or [] if p.get("mode") in ("r", "rw")]
        if written.get("op") == "write" and (written.get("object") or {}).get("kind") == "pipe" and hop.pid in readers:
            hop.kind, hop.object = "child", str(child)
            hop.detail = (
                f"runs an asyncio event loop that awaits its child pid {child} (asyncio's child watcher thread "
                f"{other.name!r} waits for it to exit)"
            )
            return child
    return None


def blocks_own_server(hop, wait: dict, thread) -> bool:
    """A thread that runs an asyncio event loop blocks, inside a coroutine or callback of it, in a call
    on a TCP connection that nothing accepted, to a listening socket its own process holds: a server
    on that loop (aiohttp, asyncio.start_server) accepts and answers only when the loop runs again, and
    the loop's one thread is the one waiting (a blocking requests.get to the job's own endpoint).
    `end` loop-blocked, `own_server` the address."""
    obj = wait.get("object") or {}
    listeners = obj.get("listener_by") or []
    if not (obj.get("peer_unaccepted") and listeners and runs_event_loop(thread)):
        return False
    if any(holder.get("pid") != hop.pid for holder in listeners):
        return False
    hop.detail = (
        f"waits, on the asyncio event loop it runs itself, for an answer from {obj.get('remote')}: a server of "
        "its own process that accepts only when that loop runs again, so the connection is never accepted"
    )
    hop.facts.update(end="loop-blocked", event_loop="asyncio", own_server=str(obj.get("remote")))
    return True


def thread_behind_await(job, hop, thread) -> Optional[Tuple[int, int]]:
    """An event loop idle on its own thread while another thread of its process (an executor worker
    that asyncio.to_thread or run_in_executor started) waits at a `with` for a threading lock that a
    coroutine of the same file holds across an await: that coroutine awaits the thread, the thread
    waits for the lock. The next hop is that thread, whose hop ends `held-across-await`."""
    if thread is None or hop.facts.get("end") or not runs_event_loop(thread):
        return None
    for other in job.threads(hop.pid):
        if other.tid == thread.tid or (job.wait(hop.pid, other.tid) or {}).get("op") != "futex":
            continue
        held = lock_across_await(hop.pid, other.frames)
        if held is not None:
            hop.detail += f"; its coroutine awaits thread {other.name!r}, which waits for {held['lock']}"
            return hop.pid, other.tid
    return None


def held_across_await(job, hop, thread) -> bool:
    """Mark hop (end `held-across-await`, `lock`, `held_across_await`) when its thread, not the loop's,
    waits at a `with` for a threading lock a coroutine holds across an await."""
    if thread is None or runs_event_loop(thread) or "end" in hop.facts:
        return False
    held = lock_across_await(hop.pid, thread.frames)
    if held is None:
        return False
    hop.facts.update(held, end="held-across-await", awaited_lock=held["lock"])
    hop.detail += (
        f"; coroutine {held['held_across_await']} holds {held['lock']} across that await, so it is released only "
        "after this thread returns"
    )
    return True
