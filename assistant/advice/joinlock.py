"""The values of the join-under-lock and wait-under-lock fixes: the lock, both threads' sites, and the
join or the blocking call as the job writes it, read from the job's source line (never run)."""

from __future__ import annotations

from typing import Callable, Dict, Optional


def held_across_wait_values(values: Dict[str, str], end: dict, prev: Optional[dict], chain=()) -> None:
    """For a chain that closes on itself at the hop before its end (`prev`): `held_lock`, a
    multiprocessing lock its first process holds while it waits for the process that needs it
    (live.joinlock.process_lock_holder); `setter`, `set_at`, `set_event`, the thread that sets what the
    others wait for only after its own wait for them (live.setafter); `putter`, `put_at`, `queue`, from
    any hop of the cycle (`chain`), the thread that puts into a queue only below a wait of its own."""
    held = (prev or {}).get("waits_on") or {}
    if (end.get("waits_on") or {}).get("kind") != "cycle":
        return
    if held.get("kind") == "process" and held.get("lock"):
        values["held_lock"] = str(held["lock"])
    if held.get("setter") and held.get("set_at") and held.get("event"):
        values["setter"], values["set_at"], values["set_event"] = held["setter"], held["set_at"], held["event"]
        if held.get("setter_pid"):  # the parent sets it after joining the child that waits for it
            values["setter_pid"] = str(held["setter_pid"])
    putting = next(((h.get("waits_on") or {}) for h in chain if (h.get("waits_on") or {}).get("putter")), None)
    if putting is not None and putting.get("put_at") and putting.get("queue"):
        values["putter"], values["put_at"], values["queue"] = putting["putter"], putting["put_at"], putting["queue"]


def join_lock_values(values: Dict[str, str], end: dict, source: Callable[[Optional[str], int], Optional[str]]) -> None:
    """`join_lock`, `waiter_name`, `waiter_at`, `joiner_name`, `joiner_at` and `join_call` (the joiner's
    line as written, `timer.join()`) for a chain that ends in a thread waiting for a lock the thread
    joining it holds (live.joinlock)."""
    waits = end.get("waits_on") or {}
    threads = waits.get("threads") or []
    if waits.get("end") in ("wait-under-lock", "pipe-under-lock") and len(threads) >= 2 and waits.get("lock"):
        _wait_lock_values(values, waits, threads)
        return
    if waits.get("end") != "join-under-lock" or len(threads) < 2 or not waits.get("lock"):
        return
    waiter, joiner = threads[0], threads[1]
    values["join_lock"] = str(waits["lock"])
    values["waiter_name"], values["waiter_at"] = repr(waiter.get("name")), str(waiter.get("where"))
    values["joiner_name"], values["joiner_at"] = repr(joiner.get("name")), str(joiner.get("where"))
    text = source(joiner.get("file"), end.get("pid"))
    line = joiner.get("line")
    lines = text.splitlines() if text else []
    if isinstance(line, int) and 0 < line <= len(lines):
        call = lines[line - 1].split("#", 1)[0].strip()
        if call.endswith(")") and ".join(" in call:
            values["join_call"] = call
    values.setdefault("join_call", "thread.join()")


def _wait_lock_values(values: Dict[str, str], waits: dict, threads: list) -> None:
    """`wait_lock`, `blocked_name`, `blocked_at`, `blocked_call`, `releaser_name`, `releaser_at`,
    `releaser_call`, `wait_target`; `wait_lock_name` when the lock is a plain name the snippet can use,
    and `handler_lock` when the lock is a logging handler's (live.joinlock.wait_under_lock)."""
    blocked, releaser = threads[0], threads[1]
    lock = str(waits["lock"])
    values["wait_lock"] = lock
    values["blocked_name"], values["blocked_at"] = repr(blocked.get("name")), str(blocked.get("where"))
    values["releaser_name"], values["releaser_at"] = repr(releaser.get("name")), str(releaser.get("where"))
    values["blocked_call"] = str(blocked.get("call") or "the wait")
    values["releaser_call"] = str(releaser.get("calls") or "the release")
    values["wait_target"] = str(waits.get("object") or "queue")
    if lock.isidentifier() or all(part.isidentifier() for part in lock.split(".")):
        values["wait_lock_name"] = lock
    if waits.get("lock_module") == "logging":
        values["handler_lock"] = lock
