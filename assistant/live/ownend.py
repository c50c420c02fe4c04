"""A wait on a pipe or socket whose other end the same process holds (`socket.socketpair()`, an
`os.pipe()` or `multiprocessing.Pipe()` it kept both ends of): no other process can end the wait,
only a thread of this one, or the child it handed the end to, which holds it no more once it has
exited. A dead child is then the one waited for; with no child and no other thread left, the thread
that would have has ended: a producer (or consumer) thread's death, not a service that never answers.
A pipe (a multiprocessing Queue's) whose other end only its own process holds, with no other thread
and no child left that could use it, ends the same way: the processes it was handed to have ended.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from debug_stuck.live.joinlock import pipe_under_lock
from debug_stuck.live.parties import python_frames
from debug_stuck.live.syncwaits import feeding_threads

RECEIVING = ("recv", "read", "poll")
LIBRARY_IO = re.compile(r"(^|/)(socket|selectors|ssl|subprocess)\.py$|multiprocessing/")


def _other_ends(hop, wait: dict) -> list:
    """The holders of the wait's other end: a unix socket's peer, a pipe's writers for a read (its
    readers for a write)."""
    obj = wait.get("object") or {}
    if hop.kind == "socket" and obj.get("proto") == "unix":
        return obj.get("peer") or []
    if hop.kind == "pipe":
        modes = ("w", "rw") if hop.op in RECEIVING else ("r", "rw")
        return [p for p in wait.get("peers") or [] if p.get("mode") in modes]
    return []


def eventfd_unwritten(job, hop, wait: dict, thread) -> bool:
    """A read of an eventfd (os.eventfd, a library's wake-up counter) in a process with no other thread
    of Python code and no child left that could have been handed it: eventfd(2) counters are written
    by whoever holds the descriptor, here nobody else. The hop says so (`end=no-thread`)."""
    obj = wait.get("object") or {}
    if thread is None or hop.op != "read" or obj.get("kind") != "anon" or obj.get("what") != "eventfd":
        return False
    others = feeding_threads([t for t in job.threads(hop.pid) if t.tid != thread.tid and python_frames(t.frames)])
    if others or not _no_child_given_it(job, hop):
        return False
    hop.detail = (
        "waits for a write to its eventfd, and no other thread is left in the process to write it: the thread "
        f"that would have has ended (or was never started); fd {wait.get('fd')}"
    )
    hop.facts["end"] = "no-thread"
    return True


def own_end(job, hop, wait: dict, thread) -> Optional[Tuple[int, Optional[int]]]:
    """When the pipe or socket hop `hop` waits on has its other end only in hop's own process, the
    hop's detail and facts say so (`peer=self`), and the next hop is returned: the process's child that
    has exited (it was handed the end, and held it until it died), else for a unix socket the one other
    thread that could send or read (`end=no-thread` when none is left). None: no such end, none left,
    or more than one thread that could."""
    ends = _other_ends(hop, wait)
    if thread is None or not ends or any(end.get("pid") != hop.pid for end in ends):
        return None
    hop.facts["peer"] = "self"
    fds = ", ".join(str(end.get("fd")) for end in ends)
    receiving = hop.op in RECEIVING
    dead = [c for c in job.children(hop.pid) if job.procs[c].state in ("Z", "X")]
    if dead:
        hop.detail = re.sub(r"; the (reader|writer) is pid .*$", "", hop.detail)  # itself, said better below
        hop.facts["end"] = "child-exited"
        hop.detail += (
            f"; its other end is held by nothing but this process's own fd {fds}: its child pid {dead[0]}, "
            f"handed that end to {'send' if receiving else 'read'}, has exited"
        )
        return dead[0], None
    others = feeding_threads([t for t in job.threads(hop.pid) if t.tid != thread.tid and python_frames(t.frames)])
    if hop.kind != "socket":
        if not others and _no_child_given_it(job, hop):
            # a pipe (a multiprocessing Queue's) whose write end no other process holds now: the
            # processes it was handed to have ended, or were handed another pipe
            hop.detail = re.sub(r"; the (reader|writer) is pid .*$", "", hop.detail)
            hop.detail += (
                f"; only this process holds its {'write' if receiving else 'read'} end (fd {fds}), and no other "
                "thread is left in it to use that end: the processes given it have ended, or were given another"
            )
            hop.facts["end"] = "no-thread"
        if len(others) != 1:
            return None
        # its one other thread is the only one that can use that end (a forwarder reading an os.pipe())
        hop.detail = re.sub(r"; the (reader|writer) is pid .*$", "", hop.detail)
        hop.detail += f"; its other end is this process's own fd {fds}"
        if pipe_under_lock(job, hop, thread, others[0]):
            return None
        hop.detail += f": only its thread {others[0].name!r} can use it"
        return hop.pid, others[0].tid
    caller = next((f for f in python_frames(thread.frames) if not LIBRARY_IO.search(f.file or "")), None)
    at = f" at {caller.text()}" if caller is not None else ""
    what = "data on a socket" if receiving else "room on a socket"
    verb = "send it" if receiving else "read it"
    if not others:
        hop.detail = (
            f"waits for {what} whose other end this process holds{at}, and no other thread is left in the "
            f"process to {verb}: the thread that would have has ended (or was never started); the other "
            f"end is its own fd {fds} (a socket.socketpair())"
        )
        hop.facts["end"] = "no-thread"
        return None
    hop.detail += (
        f"; its other end is this process's own fd {fds} (a socket.socketpair()): only its own threads can {verb}"
    )
    return (hop.pid, others[0].tid) if len(others) == 1 else None


def _no_child_given_it(job, hop) -> bool:
    """hop's process has no child, or only a library's helpers (multiprocessing's resource tracker),
    which are handed no pipe of the job's."""
    from debug_stuck.probes.collectors.procs import is_library_helper

    return all(is_library_helper(job.procs[c].cmdline) for c in job.children(hop.pid))
