"""Hang: two threads take two locks in opposite order (cause ``thread-deadlock``).

``worker-A`` holds ``params_lock`` and wants ``stats_lock``; ``worker-B`` holds ``stats_lock`` and wants
``params_lock``. A barrier after the first acquire makes the deadlock certain. The main thread joins
them for ever. ~0% CPU, every thread idle.

The locks are ``threading.BoundedSemaphore(1)`` by default, whose ``acquire`` is Python code, so py-spy
shows it. ``ZOO_LOCK_KIND=lock`` uses plain ``threading.Lock`` (C ``acquire``: no frame of its own;
the worker's top frame is then the ``with`` line).

py-spy (default kind; every thread in a futex wait: wchan ``futex_do_wait`` on Linux 6.x)::

    Thread (idle): "MainThread"
        Thread._wait_for_tstate_lock (threading.py)
        Thread.join (threading.py)
        main (lock_deadlock.py)
        <module> (lock_deadlock.py)
    Thread (idle): "worker-A"
        Condition.wait (threading.py)
        Semaphore.acquire (threading.py)
        update_params (lock_deadlock.py)
        Thread.run (threading.py) ...
    Thread (idle): "worker-B"
        Condition.wait (threading.py)
        Semaphore.acquire (threading.py)
        update_stats (lock_deadlock.py)
        Thread.run (threading.py) ...

``python lock_deadlock.py main_thread``: the main thread is worker-A itself (a training loop taking
the locks), a ``stats-reporter`` thread worker-B; nothing joins.

READY (``{"pid", "kind", "lines"}``): written by the main thread, right before ``join``, once both
workers' stacks stand on their second acquire (and, for semaphores, sleep inside ``acquire``).
"""

from __future__ import annotations

import os
import sys
import threading

import _common

KIND = os.environ.get("ZOO_LOCK_KIND", "semaphore")


def make_lock():
    return threading.Lock() if KIND == "lock" else threading.BoundedSemaphore(1)


params_lock = make_lock()
stats_lock = make_lock()
both_hold_one = threading.Barrier(2)
SECOND_ACQUIRE = {}  # function name -> line of its second acquire


def update_params() -> None:
    with params_lock:
        both_hold_one.wait()
        SECOND_ACQUIRE["update_params"] = sys._getframe().f_lineno + 1
        with stats_lock:  # never acquired: worker-B holds it
            pass


def update_stats() -> None:
    with stats_lock:
        both_hold_one.wait()
        SECOND_ACQUIRE["update_stats"] = sys._getframe().f_lineno + 1
        with params_lock:  # never acquired: worker-A holds it
            pass


def main() -> None:
    if sys.argv[1:] == ["main_thread"]:
        return main_thread_takes_part()
    workers = [
        threading.Thread(target=update_params, name="worker-A"),
        threading.Thread(target=update_stats, name="worker-B"),
    ]
    for w in workers:
        w.start()

    def deadlocked() -> bool:
        frames = sys._current_frames()
        for w in workers:
            frame = frames.get(w.ident)
            names = []
            while frame is not None and frame.f_code.co_name not in SECOND_ACQUIRE:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            if frame is None or frame.f_lineno != SECOND_ACQUIRE[frame.f_code.co_name]:
                return False
            if KIND != "lock" and names != ["wait", "acquire"]:
                return False
        return True

    if _common.wait_until(deadlocked, timeout=60):
        _common.mark_ready(kind=KIND, lines=dict(SECOND_ACQUIRE))
    for w in workers:
        w.join()


def main_thread_takes_part() -> None:
    """The training loop's own thread is one party: it runs update_params itself, a reporter thread
    runs update_stats; nobody joins anything."""
    reporter = threading.Thread(target=update_stats, name="stats-reporter", daemon=True)
    reporter.start()
    main = threading.main_thread()

    def both_wait() -> bool:
        seconds = {name: SECOND_ACQUIRE.get(name) for name in ("update_params", "update_stats")}
        return all(seconds.values()) and all(
            _common.sleeping_steadily(os.getpid(), t.native_id) for t in (main, reporter)
        )

    _common.ready_when(both_wait, lambda: {"kind": KIND, "lines": dict(SECOND_ACQUIRE)})
    update_params()


if __name__ == "__main__":
    main()
