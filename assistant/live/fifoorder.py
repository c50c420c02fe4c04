"""Two processes of the job that each open a different FIFO first, and wait there for the other to open
its other end: fifo(7), "the FIFO must be opened on both ends (reading and writing) before data can be
passed. Normally, opening the FIFO blocks until the other end is opened also." The trainer opens
to_eval for writing, the evaluator from_eval for writing: neither reaches the open the other waits for.
"""

from __future__ import annotations

from typing import Optional


def fifo_opener(job, hop, wait: dict) -> Optional[int]:
    """A process blocked opening a FIFO nobody holds the other end of, while another process of the job
    is blocked opening another FIFO: the one that would open this end waits for its own first (fifo(7):
    an open for reading blocks until the FIFO is opened for writing, and the reverse), when that process
    is its parent or its child. The next hop."""
    if hop.kind != "fifo" or hop.op != "open" or hop.facts.get("end") not in ("no-reader", "no-writer"):
        return None
    path = (wait.get("object") or {}).get("path")
    me = job.procs.get(hop.pid)
    # its parent or a child: the two ends of one conversation (sibling readers of FIFO shards are not)
    kin = set(job.children(hop.pid)) | ({me.ppid} if me is not None else set())
    for pid in kin & set(job.procs):
        other = job.wait(pid, pid) or {}
        obj = other.get("object") or {}
        if pid != hop.pid and other.get("op") == "open" and obj.get("kind") == "fifo" and obj.get("path") != path:
            hop.facts.pop("end")
            hop.detail += (
                f"; pid {pid} of this job, which would open its other end, is itself blocked opening {obj.get('path')}"
            )
            return pid
    return None
