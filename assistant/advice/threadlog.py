"""Whether a thread that died left its traceback in the job's log: CPython's threading.excepthook
prints an uncaught exception after the line "Exception in thread NAME:". A log read whole without one
says the thread's error was caught (or it never started), and the fix says so instead of a grep."""

from __future__ import annotations

import re
from typing import Dict, Optional

THREAD_DIED = "Exception in thread"  # CPython's threading.excepthook, for a thread's uncaught exception
# CPython 3.11 Lib/threading.py excepthook: "Exception in thread NAME:"; a Thread given a target and no
# name is named "Thread-N (target)"
DIED_LINE = re.compile(r"Exception in thread (?P<name>.+?)(?: \([\w.<>]+\))?:\s*$")


def thread_traceback(values: Dict[str, str], report) -> None:
    """Whether to send the user to the log for a thread's traceback: not when every log was read
    whole and none holds one (the thread's error was caught, or it never started)."""
    seen = any(
        item.source == "log" and THREAD_DIED in (item.text or "")
        for diagnosis in getattr(report, "diagnoses", None) or []
        for item in diagnosis.evidence or []
    )
    logs = getattr(report, "logs", None) or []
    whole = bool(logs) and all((log.get("bytes_read") or 0) >= (log.get("size") or 0) for log in logs)
    if seen or not whole:
        values["thread_traceback"] = "yes"
        values["thread_end"] = "has died"
        return
    values["thread_end"] = "has ended"  # no traceback: stopped, or its error swallowed; no death seen
    values["no_thread_traceback"] = (
        f"The job's log ({logs[0].get('path')}) holds no \"{THREAD_DIED}\" traceback: that thread's error was "
        "caught and not passed on (an except in its function that only logs it, perhaps at debug level), "
        "the job's own code stopped it (logging's QueueListener.stop(), a stop sentinel put in its queue, a "
        "flag it checks) and nothing started it again, or the thread never started."
    )


# the waiting line takes a lock: `with ckpt_lock:` or `ckpt_lock.acquire()`
TAKES_LOCK = re.compile(r"^\s*(?:with\s+(?P<with>[\w.]+)\s*(?:as\s+\w+\s*)?:|(?P<call>[\w.]+)\.acquire\()")


def dead_thread(values: Dict[str, str], report, end: dict, line: Optional[str] = None) -> None:
    """`dead_thread`: the name of a thread the log says died of an uncaught exception, when the end of
    the wait is a thread waiting on a threading or queue primitive and no thread of the job has that
    name any more: the thread that was to feed it, most likely (with other threads still alive, a
    library's, "no thread is left" cannot be said)."""
    names = [
        found["name"]
        for diagnosis in getattr(report, "diagnoses", None) or []
        for item in diagnosis.evidence or []
        if item.source == "log" and (found := DIED_LINE.search(item.text or ""))
    ]
    live = {t.get("name") for p in getattr(report, "processes", None) or [] for t in p.get("threads") or []}
    gone = list(dict.fromkeys(name for name in names if name not in live))
    if len(gone) == 1 and (end.get("waits_on") or {}).get("kind") == "futex":
        values["dead_thread"] = gone[0]
        taken = TAKES_LOCK.match(line or "")
        if taken:  # `line`, the waiting line of the job's code, takes a lock: the dead thread most likely held it
            values["leaked_lock"] = taken["with"] or taken["call"]
