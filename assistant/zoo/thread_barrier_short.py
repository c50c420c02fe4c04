"""Hang: producer threads meet at a threading.Barrier sized for a source that is disabled.

``python thread_barrier_short.py``. One producer thread per enabled data source fills a
``queue.Queue``; at each epoch's end they meet at ``threading.Barrier(len(SOURCES))``, made for every
configured source, one of which is disabled. The two producers wait at the barrier for a third that
was never started, the queue runs dry, and the training loop waits in ``Queue.get()``.

READY (``{"pid"}``): once the main thread has slept in the queue's get for 5 consecutive samples.
"""

from __future__ import annotations

import os
import queue
import threading

import _common

SOURCES = {"web": True, "books": True, "code": False}  # code is disabled in this run's config
BATCHES_PER_EPOCH = 5
epoch_barrier = threading.Barrier(len(SOURCES))  # every configured source, enabled or not
batches: queue.Queue = queue.Queue(maxsize=4)


def produce(source: str) -> None:
    while True:
        for index in range(BATCHES_PER_EPOCH):
            batches.put((source, index))
        epoch_barrier.wait()  # all sources finish the epoch before reshuffling


def main() -> None:
    for source, enabled in SOURCES.items():
        if enabled:
            threading.Thread(target=produce, args=(source,), name=f"prefetch-{source}", daemon=True).start()
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "get" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )
    )
    step = 0
    while True:
        source, index = batches.get()
        step += 1
        print(f"step {step} loss {1.0 / step:.4f} (batch {index} from {source})", flush=True)


if __name__ == "__main__":
    main()
