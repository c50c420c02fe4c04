"""Hang: a thread asks again for a ``threading.Lock`` it already holds (a Lock is not re-entrant).

``python self_lock.py``. A metrics helper takes a module lock to record a value, and when its buffer
is full calls ``flush()``, which takes the same lock::

    def record(key, value):
        with _lock:
            totals[key] = value
            if len(totals) > 2:
                flush()          # still holding _lock

    def flush():
        with _lock:              # blocks for ever: the same thread holds it
            ...

READY (``{"pid"}``): once the main thread has slept in ``flush`` for 5 consecutive samples.
"""

from __future__ import annotations

import os
import threading

import _common

_lock = threading.Lock()
totals: dict = {}


def record(key: str, value: float) -> None:
    with _lock:
        totals[key] = value
        if len(totals) > 2:
            flush()


def flush() -> None:
    with _lock:
        print(f"metrics: {totals}", flush=True)
        totals.clear()


def main() -> None:
    main_thread = threading.main_thread()

    def stuck() -> bool:
        in_flush = "flush" in _common.stack_functions(main_thread.ident)
        return in_flush and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(stuck)
    for step in range(10):
        print(f"step {step} loss 0.5", flush=True)
        record(f"loss/{step}", 0.5)


if __name__ == "__main__":
    main()
