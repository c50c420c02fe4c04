"""Hang: checkpoint uploads take a slot of a ``BoundedSemaphore(2)`` and give it back only when they
succeed; two failed uploads leak both slots, and the training loop waits for a free one for ever
(cause ``thread-deadlock``, permits leaked).

``python upload_slots.py``. Every 5 steps the loop acquires a slot and starts an upload thread; the
upload releases the slot at the end of its ``try``, and its ``except`` logs the error and returns
(the eleventh hunt's j22: "a lock whose thread has ended", a queue snippet as the fix).

``python upload_slots.py pool``: the uploads run on a ``ThreadPoolExecutor(2)``, whose workers idle
in their work queue once the slots are gone (the fourteenth hunt's j17: the idle workers hid the leak,
"put a timeout on every wait" was the fix).

READY (``{"pid", "acquire_line"}``): once the main thread has slept in ``acquire`` for 5 consecutive
samples and no upload thread is left.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import _common

slots = threading.BoundedSemaphore(2)  # at most two uploads in flight


def upload(step: int) -> None:
    try:
        if step % 10 == 0:
            raise OSError("transient upload error")
        time.sleep(0.05)
        slots.release()
    except OSError as error:
        print(f"upload of step {step} failed: {error} (will retry later)", flush=True)  # the bug: no release


def main() -> None:
    main_thread = threading.main_thread()
    source, first = inspect.getsourcelines(main)
    acquire_line = first + next(i for i, line in enumerate(source) if line.strip().startswith("slots.acquire()"))
    pool = ThreadPoolExecutor(2, thread_name_prefix="upload") if sys.argv[1:] == ["pool"] else None
    threads = 2 + (2 if pool is not None else 0)  # the main thread and this watcher (and the pool's)
    _common.ready_when(
        lambda: (
            threading.active_count() <= threads  # every upload thread has ended
            and "acquire" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        ),
        lambda: {"acquire_line": acquire_line},
    )
    for step in range(1, 100000):
        if step % 5 == 0:
            print(f"step {step}", flush=True)
            slots.acquire()  # back-pressure: wait for a free upload slot
            if pool is not None:
                pool.submit(upload, step)
            else:
                threading.Thread(target=upload, args=(step,), name=f"upload-{step}").start()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
