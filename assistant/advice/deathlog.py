"""Why a child of the job died, from its log: a multiprocessing child that ends with an uncaught
exception prints "Process NAME:" and the traceback to stderr, and exits with code 1 (CPython
Lib/multiprocessing/process.py, BaseProcess._bootstrap). A zombie with exit code 1 and such a
traceback in the job's log has its error named in the fix, not only a grep for it."""

from __future__ import annotations

from typing import Dict, List

PYTHON_ERROR_EXIT = 1  # Python's exit status for an uncaught exception (and _bootstrap's)


def logged_death(values: Dict[str, str], report, end: dict) -> None:
    """Name the exception a dead child's traceback in the log shows, when its exit code says it
    raised one."""
    proc = next((p for p in report.processes or [] if p.get("pid") == end.get("pid")), None) or {}
    status = proc.get("exit_status")
    if proc.get("state") != "Z" or not isinstance(status, int) or status & 0x7F or status >> 8 != PYTHON_ERROR_EXIT:
        return
    found: List[tuple] = [
        (log.get("path"), error) for log in report.logs or [] for error in log.get("process_errors") or []
    ]
    if not found:
        return
    path, error = found[-1]
    which = f"the last of {len(found)} such tracebacks, " if len(found) > 1 else ""
    values["death"] = (
        f" with exit code 1, after an uncaught exception: {path} holds multiprocessing's traceback for its "
        f"child {error['process']!r} ({which}raised at {error['at']}): {error['exception']}"
    )
    # the log already says why it died: the advice's pointer to a traceback or dmesg goes
    rest = [s for s in values.get("dead_advice", "").split(". ") if "says why it died" not in s]
    values["dead_advice"] = f"Fix that error first ({error['exception']}). " + ". ".join(rest)
