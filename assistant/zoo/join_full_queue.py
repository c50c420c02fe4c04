"""Hang (at shutdown): a SIGTERM handler sets a stop flag; the training loop stops reading the
prefetch queue and joins the prefetch thread, which is blocked in ``put()`` on the full queue (the
fourteenth hunt's j25: "find what should set it")::

    def prefetch():
        while not stop.is_set():
            q.put(make_batch())        # full: waits for the reader

    ...                                # the loop sees the flag and stops calling q.get()
    loader.join()

``python join_full_queue.py``: the loop ends its epoch after 20 steps; the shutdown (the flag, then the
join) comes once the prefetch thread is blocked in ``put()``, as it is whenever the reader stops first.

READY (``{"pid"}``) once the main thread has slept in ``join`` for a few samples.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

import _common

stop = threading.Event()
q: queue.Queue = queue.Queue(maxsize=4)


def prefetch() -> None:
    while not stop.is_set():
        q.put(bytes(1024))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())  # the scheduler's preemption notice
    loader = threading.Thread(target=prefetch, name="prefetch")
    loader.start()
    steps = 20
    for _ in range(steps):
        q.get()
        time.sleep(0.01)
    while not _common.sleeping_steadily(os.getpid(), loader.native_id):
        time.sleep(0.05)  # the prefetch thread is blocked in put(): the queue is full
    os.kill(os.getpid(), signal.SIGTERM)
    print(f"stopping after step {steps}; joining the loader", flush=True)
    _common.ready_when(_common._main_sleeps_in("join"), lambda: {"pid": os.getpid()})
    loader.join()
