"""Who else could end a wait on a Condition or an Event: the other threads of the waiting process
that run Python (a library's watcher threads left out), each at the job's own line it is at. A
notify reaches only the threads waiting at that moment, so the fix names them, and waits on the
state rather than on the signal."""

from __future__ import annotations

from typing import Dict, List

from debug_stuck.live.syncwaits import SERVICE_THREAD_FILE

SHOWN = 3


def other_threads(values: Dict[str, str], reader, end: dict) -> None:
    """Set `other_threads` (a sentence naming them) for a chain that ends in a Condition or Event
    wait in a process where other threads run."""
    if values.get("signal_wait") != "yes":
        return
    proc = reader.processes.get(end.get("pid")) or {}
    tid = (end.get("thread") or {}).get("tid") or end.get("pid")
    described: List[str] = []
    for thread in proc.get("threads") or []:
        frames = [f for f in thread.get("frames") or [] if not f.get("native")]
        if thread.get("tid") == tid or not frames:
            continue
        if any(SERVICE_THREAD_FILE.search(str(f.get("path") or f.get("file") or "")) for f in frames):
            continue
        own = next((f for f in frames if reader.is_own(f)), None)
        where = f"{own.get('function')} ({own.get('file')}:{own.get('line')})" if own else None
        text = f"{thread.get('name')!r}" + (f", at {where}" if where else "")
        if own is not None and frames[0] is not own:
            text += f", in {frames[0].get('function')}"
        described.append(text)
    if not described:
        return
    more = f" (and {len(described) - SHOWN} more)" if len(described) > SHOWN else ""
    values["other_threads"] = (
        f"The other thread{'s' if len(described) > 1 else ''} of the process that could {values.get('feed_what')}: "
        f"{'; '.join(described[:SHOWN])}{more}."
    )
