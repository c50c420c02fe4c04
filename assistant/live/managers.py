"""A multiprocessing Manager's server process, as the chain meets it: a client's proxy call
(`q.get()`, `with lock:`) is a request over a unix socket to the server, where one handler thread
per client connection runs the method (CPython 3.11 Lib/multiprocessing/managers.py: Server.serve_forever
waits for its stop event, Server.accepter starts a thread per connection, Server.serve_client runs
each request: `res = function(*args, **kwds)`). The server's main thread idles by design; the thread
that serves the waiting client is the next hop, and what it waits for is another client of the
manager: one that put, released or set it."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from debug_stuck.live.parties import python_frames

MANAGERS_FILE = re.compile(r"multiprocessing/managers\.py$")
CONNECTION_FILE = re.compile(r"multiprocessing/connection\.py$")


def _in_managers(thread, function: str) -> bool:
    return any(f.bare_name == function and MANAGERS_FILE.search(f.file or "") for f in python_frames(thread.frames))


def is_manager_server(job, pid: int) -> bool:
    """The process runs a Manager's server: a thread in Server.serve_forever."""
    return serves_manager(job.threads(pid))


def serves_manager(threads) -> bool:
    return any(_in_managers(t, "serve_forever") for t in threads)


def calls_manager(thread) -> bool:
    """The thread waits for a reply to a proxy's call (BaseProxy._callmethod): `q.get()` on a
    Manager's queue, `with lock:` on its lock."""
    return _in_managers(thread, "_callmethod")


def serving_threads(job, pid: int) -> list:
    """The server's handler threads that run a request now (in a method, not reading the next one)."""
    busy = []
    for thread in job.threads(pid):
        frames = python_frames(thread.frames)
        if _in_managers(thread, "serve_client") and frames and not CONNECTION_FILE.search(frames[0].file or ""):
            busy.append(thread)
    return busy


def serving_thread(job, server: int, client: int) -> Optional[int]:
    """The tid of the handler that serves `client`'s request: handler threads take the client's
    process name (accept_connection), "MainProcess" for a process multiprocessing did not start."""
    busy = serving_threads(job, server)
    if not busy:
        return None
    info = job.procs.get(client)
    started = info is not None and job.procs.get(info.ppid) is not None  # a child of the job: a Process
    named = [t for t in busy if (t.name == "MainProcess") != started]
    return (named or busy)[0].tid


def _clients(job, server: int, waiting: int) -> List[int]:
    """The other processes that could use the manager: the server's siblings (its parent's other
    children), the waiting client left out."""
    info = job.procs.get(server)
    if info is None:
        return []
    return [p.pid for p in job.snap.processes if p.ppid == info.ppid and p.pid not in (server, waiting)]


def manager_next(job, hop, thread, client: Optional[int]) -> Tuple[bool, Optional[Tuple[int, Optional[int]]]]:
    """(handled, next hop) for a handler thread of a Manager's server: a client of the manager that
    has died is the next hop; with every live client's request waiting in the server and none left
    to complete them, the chain ends (`end: clients-waiting`). (False, None) for any other thread."""
    if not _in_managers(thread, "serve_client"):
        return False, None
    frames = python_frames(thread.frames)
    serving = next(i for i, f in enumerate(frames) if f.bare_name == "serve_client")
    # the method it runs is the frame it called; none for a builtin (a Lock's acquire is C code)
    what = f"{frames[serving - 1].bare_name}()" if serving > 0 else "a lock's acquire (a builtin, no frame)"
    hop.facts.pop("end", None)  # a thread of the server waits for a client, not for its own process
    hop.facts["manager"] = "yes"
    who = f"pid {client}" if client else "a client"
    hop.detail = f"serves {who}'s call to {what} in the multiprocessing Manager's server, and waits in it"
    others = _clients(job, hop.pid, client or 0)
    dead = [pid for pid in others if job.procs[pid].state in ("Z", "X")]
    if dead:
        hop.detail += f"; pid {dead[0]}, a client of the manager that would most likely complete it, has exited"
        return True, (dead[0], None)
    live = [pid for pid in others if job.procs[pid].state not in ("Z", "X")]
    calling = [pid for pid in live if (t := job.thread(pid)) is not None and calls_manager(t)]
    if len(calling) == len(live):
        # every other client waits in the manager too: none is left to put, release or set it
        hop.facts["end"] = "clients-waiting"
        waiting = f" (pid {', '.join(map(str, calling))} too)" if calling else ""
        hop.detail += (
            f"; every live client of the manager waits in it{waiting}, so none is left to complete the call: "
            "the one that held it, or would have put or set it, has ended"
        )
    return True, None
