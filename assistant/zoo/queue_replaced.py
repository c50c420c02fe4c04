"""Hang: a prefetcher thread fills a bounded ``queue.Queue`` it bound once (``q = self.q``), and the
trainer drops stale batches at each epoch by replacing ``self.q`` (the thirteenth hunt's j24: only the
trainer's get was named, with a generic timeout as the fix)::

    def _run(self):
        q = self.q                       # bound once
        while True:
            q.put(make_batch())          # fills the old queue, which nobody reads
    def reset(self):
        self.q = queue.Queue(maxsize=4)  # the trainer reads the new one, which nobody fills

READY (``{"pid"}``): once the main thread has slept in ``get`` and the prefetcher in ``put`` for 5
consecutive samples.
"""

from __future__ import annotations

import os
import queue
import threading

import _common


class Prefetcher:
    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue(maxsize=4)
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        q = self.q
        step = 0
        while True:
            q.put([step] * 64)
            step += 1

    def reset(self) -> None:
        self.q = queue.Queue(maxsize=4)

    def get(self) -> list:
        return self.q.get()


def main() -> None:
    pf = Prefetcher()
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(os.getpid(), pf.thread.native_id)
            and "put" in _common.stack_functions(pf.thread.ident)
        )
    )
    for epoch in range(3):
        pf.reset()
        for _ in range(20):
            batch = pf.get()
        print(f"epoch {epoch} done, last batch {batch[0]}", flush=True)


if __name__ == "__main__":
    main()
