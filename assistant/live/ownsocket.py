"""A wait on a socket whose other end the same process holds (`socket.socketpair()`, a connection to
itself): no other process can send on it or read from it, only a thread of this one. When no other
thread is left, the thread that would have did so has ended: the wait is a producer (or consumer)
thread's death, not a service that never answers."""

from __future__ import annotations

import re
from typing import Optional, Tuple

from debug_stuck.live.parties import python_frames
from debug_stuck.live.syncwaits import feeding_threads

RECEIVING = ("recv", "read", "poll")
LIBRARY_IO = re.compile(r"(^|/)(socket|selectors|ssl)\.py$|multiprocessing/")


def own_socket_end(job, hop, wait: dict, thread) -> Optional[Tuple[int, Optional[int]]]:
    """When the socket hop `hop` waits on has its other end only in hop's own process: the hop's detail
    and facts say so (`peer=self`; `end=no-thread` with no other thread of the job's to send or read),
    and the one other thread that could is the next hop. Returns that (pid, tid), or None: no such
    socket, none left, or more than one thread that could. A child of the process that has exited comes
    first: multiprocessing.Pipe() is a socketpair, whose end a forked child held until it died."""
    obj = wait.get("object") or {}
    ends = obj.get("peer") or []
    if hop.kind != "socket" or obj.get("proto") != "unix" or thread is None or not ends:
        return None
    if any(end.get("pid") != hop.pid for end in ends):
        return None
    hop.facts["peer"] = "self"
    fds = ", ".join(str(end.get("fd")) for end in ends)
    # multiprocessing.Pipe() is a socketpair: a child forked with the other end held it too, until it exited
    dead = [c for c in job.children(hop.pid) if job.procs[c].state in ("Z", "X")]
    if dead:
        hop.detail += (
            f"; its other end is held by nothing but this process's own fd {fds}: its child pid {dead[0]}, "
            "forked with it, has exited"
        )
        return dead[0], None
    others = feeding_threads([t for t in job.threads(hop.pid) if t.tid != thread.tid and python_frames(t.frames)])
    caller = next((f for f in python_frames(thread.frames) if not LIBRARY_IO.search(f.file or "")), None)
    at = f" at {caller.text()}" if caller is not None else ""
    receiving = hop.op in RECEIVING
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
