"""A child the job waits for that runs a command which never ends on its own.

`subprocess.check_output(["top", "-b", "-d", "1"])` waits for end-of-file and for the child to exit;
top without `-n` refreshes until it is killed (top(1)). Such commands are known by name with the
flags that bound them, or that make them follow (skills/data/programs.yaml `endless`, each from its
manual): a chain that reaches one ends there, whatever the command does meanwhile (a timed select,
a write each second). Read from the process's command line, nothing is run.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

NUMBER = re.compile(r"^\d+(\.\d+)?$")


def _table() -> List[dict]:
    from debug_stuck.errors import KnowledgeError
    from debug_stuck.kb import load_table

    try:
        return load_table("programs.yaml").get("endless") or []
    except KnowledgeError:
        return []


CLUSTER = re.compile(r"^-([A-Za-z]+)")  # short options run together: top -bn1, tail -fn 100


def _has(argv: List[str], flags) -> bool:
    for arg in argv:
        for flag in flags:
            if arg == flag or arg.startswith(flag + "="):
                return True
            cluster = CLUSTER.match(arg) if len(flag) == 2 and flag[0] == "-" and flag[1] != "-" else None
            if cluster is not None and flag[1] in cluster.group(1):
                return True
    return False


def endless_entry(argv: List[str]) -> Optional[dict]:
    """The table's entry when this command line runs until it is stopped, else None."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    args = argv[1:]
    for entry in _table():
        if name not in (entry.get("names") or ()):
            continue
        if entry.get("always"):
            return entry
        if entry.get("unless") and not _has(args, entry["unless"]):
            return entry
        if entry.get("when") and _has(args, entry["when"]):
            return entry
        numbers = [a for a in args if NUMBER.match(a)]
        if entry.get("interval_without_count") and len(numbers) == 1 and args and NUMBER.match(args[-1]):
            return entry
    return None


# what waits for a child to end (CPython Lib/subprocess.py): run and check_output call communicate,
# which reads to end-of-file and then waits; Popen.wait polls with _try_wait. A loop reading the
# child's lines as they come (a log follower) is not waiting for it to end.
WAITS_FOR_END = re.compile(r"^(Popen\.)?(communicate|_communicate|wait|_wait|_try_wait|run|check_output|call)$")


def _joins_a_thread(job, pid: int) -> bool:
    """A thread of pid joins another (threading's join): a follower thread reading the child's lines
    (reached through the pipe) that it joins has to see the child's end-of-file first."""
    return any(
        not f.native and f.bare_name in ("join", "_wait_for_tstate_lock") and (f.file or "").endswith("threading.py")
        for thread in job.threads(pid)
        for f in thread.frames
    )


def parent_waits_for_end(job, ppid: int, child: int) -> bool:
    """A thread of ppid waits for a child to end: in subprocess, or in os.wait / os.waitpid (wait4) for
    any child or this one."""
    return any(
        _waits_for(job.wait(ppid, thread.tid) or {}, child)
        or any(
            not f.native and (f.file or "").endswith("subprocess.py") and WAITS_FOR_END.match(f.function or "")
            for f in thread.frames
        )
        for thread in job.threads(ppid)
    )


def runs_forever(job, hop) -> bool:
    """Mark hop (end `runs-forever`) when its process is a child of a process of the job that waits in
    subprocess for it to end, and runs a command that never ends on its own; False otherwise."""
    info = job.procs.get(hop.pid)
    if info is None or info.ppid not in job.procs or "end" in hop.facts:
        return False
    entry = endless_entry(list(info.cmdline or []))
    followed = hop.facts.get("via") == "pipe" and _joins_a_thread(job, info.ppid)
    if entry is None or not (parent_waits_for_end(job, info.ppid, hop.pid) or followed):
        return False
    if followed:
        hop.facts["followed"] = "yes"
    command = " ".join(info.cmdline)[:120]
    hop.facts["end"] = "runs-forever"
    hop.detail += f"; it runs `{command}`, which never ends until it is stopped (bounded by {entry.get('bound')})"
    return True


def _waits_for(wait: dict, child: int) -> bool:
    return wait.get("op") == "wait-child" and wait.get("child") in (None, -1, 0, child)


# a server's loop that returns only when shutdown() is called from another thread (CPython 3.11
# Lib/socketserver.py BaseServer.serve_forever: "Handle one request at a time until shutdown"):
# http.server, xmlrpc.server and the servers built on socketserver
SERVE_FOREVER_FILE = re.compile(r"(^|/)socketserver\.py$")


def serves_forever(job, hop) -> bool:
    """Mark hop (end `serves-forever`) when its process is a child the parent waits for to end
    (subprocess, or os.wait / os.waitpid) and its main thread is in a socketserver's serve_forever: it
    ends only when something stops it."""
    info = job.procs.get(hop.pid)
    if info is None or info.ppid not in job.procs:
        return False
    main = next((t for t in job.threads(hop.pid) if t.tid == hop.pid), None)
    frames = [f for f in (main.frames if main is not None else []) if not f.native]
    if not any(f.bare_name == "serve_forever" and SERVE_FOREVER_FILE.search(f.file or "") for f in frames):
        return False
    if not parent_waits_for_end(job, info.ppid, hop.pid):
        return False
    hop.facts["end"] = "serves-forever"
    command = " ".join(info.cmdline or [])[:120]
    hop.detail = f"serves requests until it is stopped (socketserver's serve_forever; it runs `{command}`)"
    return True
