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


def death_values(values: Dict[str, str], processes: dict, end: dict, table: dict, logs=()) -> None:
    """How the process the chain ends at died (a zombie's wait status), and what to do about it: a
    signal, an exit code, or a clean exit (code 0: its code returned early), for a worker of a
    DataLoader, another worker process, or any other child."""
    proc = processes.get(end.get("pid")) or {}
    if proc.get("state") != "Z":
        return
    status = proc.get("exit_status")
    signals = table.get("signals") or {}
    worker = proc.get("role") in ("dataloader-worker", "worker-process")
    in_dataloader = any(
        "torch/utils/data/" in str(f.get("file") or "")
        for p in processes.values()
        for t in p.get("threads") or []
        for f in t.get("frames") or []
    )
    if isinstance(status, int) and status & 0x7F:
        number = status & 0x7F
        meaning = signals.get(number) or f"signal {number}"
        values["death"] = f", killed by signal {number} ({meaning})"
        values["death_short"] = f" (signal {number})"
    elif isinstance(status, int):
        values["death"] = f" with exit code {status >> 8}"
        values["death_short"] = f" (exit code {status >> 8})"
    else:
        values["death"] = ""
        values["death_short"] = ""
    clean = status == 0  # its code returned: no crash, no out-of-memory kill to look for
    values["death_verb"] = "has exited" if clean else "has died"
    if not clean and not (isinstance(status, int) and status >> 8):
        values["death_unclean"] = "yes"  # a signal (or no status read): the kernel log may say who sent it
    dropped = [e for log in logs for e in log.get("feeder_errors") or []]
    if clean and worker and dropped:
        values["death_short"] = " (exit code 0; its queue dropped an item it could not pickle)"
        values["death"] += (
            f"; its queue's feeder thread could not pickle an item it put ({dropped[-1]}, in multiprocessing's "
            "Queue._feed, as the log shows) and dropped it, so the item its parent waits for was never sent"
        )
        values["dead_advice"] = (
            "put() only hands the item to a feeder thread, which pickles it later: an item it cannot pickle (a "
            "lambda, a local function, an open file, a lock) is dropped with a printed traceback, and put() has "
            "already returned. Put only plain data (convert it first, e.g. tensors and numbers, no callables); "
            "pickle.dumps(item) before put() raises in the producer instead. Wait with a timeout and check the "
            "producer's exitcode."
        )
    elif clean and worker:
        values["dead_advice"] = (
            "Exit code 0 means its code returned normally: a path that returns early (or an exception it "
            "caught and did not re-raise) skipped what its parent waits for (a send, a put, an Event's set()). "
            "Make its parent notice: wait with a timeout and check is_alive() and exitcode (Event.wait(timeout), "
            "Connection.poll(timeout), Process.join(timeout)), or run the work in "
            "concurrent.futures.ProcessPoolExecutor, whose result() returns or raises what the work did."
        )
    elif worker and in_dataloader:
        values["dead_advice"] = (
            "A DataLoader worker that dies this way leaves the trainer waiting for its batch. If dmesg shows "
            "the out-of-memory killer, use fewer workers or a smaller prefetch_factor; give the DataLoader "
            "timeout= so that the next death raises an error instead of hanging."
        )
    elif worker:
        values["dead_advice"] = (
            "Its traceback or dmesg says why it died. Make its parent notice a death: wait with a timeout "
            "and check exitcode (Process.join(timeout), Barrier.wait(timeout), Event.wait(timeout)), or run "
            "the work in concurrent.futures.ProcessPoolExecutor, which raises BrokenProcessPool when a "
            "worker dies."
        )
    else:
        values["dead_advice"] = (
            "Its log or dmesg says why it died; restart the job from its last good checkpoint once that is fixed."
        )
