"""A multiprocessing child whose parent has died: re-parented to a process that is no Python at all
(init, a container's init, a subreaper), it waits for ever for what the parent was to send.

Linux re-parents an orphan to the nearest subreaper or to init (prctl(2), PR_SET_CHILD_SUBREAPER);
multiprocessing's children are started by the parent itself (CPython 3.11 Lib/multiprocessing/
popen_fork.py and popen_spawn_posix.py), so a child of multiprocessing (BaseProcess._bootstrap on
its stack) whose parent runs no Python has lost the parent that made it. A non-daemon worker that
waits in a queue's get has nobody left to put. Read from /proc and the stack, nothing is run.
"""

from __future__ import annotations

import re
from typing import Optional

from debug_stuck.live.parties import python_frames
from debug_stuck.probes.collectors.procfs import bounded_read, read_text

MP_BOOTSTRAP = re.compile(r"(^|/)multiprocessing/process\.py$")


def _parent_command(ppid: int) -> Optional[str]:
    text = bounded_read(lambda: read_text(f"/proc/{ppid}/cmdline", 4096), f"cmdline of {ppid}")
    return text.replace("\0", " ").strip() if text else None


def orphaned(job, hop, thread) -> bool:
    """Mark hop (end `orphaned`, `parent_pid` the process it now belongs to) when its process
    is a multiprocessing child whose parent is no Python process: the one that started it has died."""
    info = job.procs.get(hop.pid)
    if info is None or thread is None or info.ppid in job.procs:
        return False
    if not any(f.bare_name == "_bootstrap" and MP_BOOTSTRAP.search(f.file or "") for f in python_frames(thread.frames)):
        return False
    parent = _parent_command(info.ppid)
    if parent is None or "python" in parent.split(" ", 1)[0].rsplit("/", 1)[-1].lower():
        return False
    hop.facts.update(end="orphaned", parent_pid=str(info.ppid))  # the root of whatever end its wait had
    hop.detail = re.sub(r"; only this process holds its write end.*$", "", hop.detail)
    hop.detail += (
        f"; it is a multiprocessing child whose parent has died: it now belongs to pid {info.ppid} "
        f"({parent[:60]}), and nothing will send what it waits for"
    )
    return True
