"""Hang: an asyncio trainer awaits a prefetcher's Event that the prefetcher never sets.

``python asyncio_flag_unset.py``. Epoch 0 trains on batches in hand. From epoch 1 the trainer starts
``Prefetcher.fill`` as a task, logs "waiting for prefetched batches" and awaits ``pf.ready.wait()``.
``fill`` appends its batches and returns without ``self.ready.set()``: nothing died, every task has
ended but the trainer, and the event loop idles in ``epoll_wait`` with no timeout, watching only its
own wakeup socket (the eleventh hunt's j05: read as "a task died", the awaiting line not named).

READY (``{"pid"}``) once the fill task is done and the main thread has slept in ``select`` for 5
consecutive samples; the watcher thread that writes it exits right after.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common


class Prefetcher:
    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.batches: list = []

    async def fill(self, count: int) -> None:
        for index in range(count):
            await asyncio.sleep(0.005)  # stands in for reading a shard
            self.batches.append([float(index)] * 8)
        # the bug: returns without self.ready.set()


def ready_once_idle(task: asyncio.Task) -> None:
    main = threading.main_thread()

    def idle() -> bool:
        in_select = "select" in _common.stack_functions(main.ident)
        return task.done() and in_select and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(idle)


async def train() -> None:
    pf = Prefetcher()
    for epoch in range(100):
        if epoch == 0:
            for step in range(1, 21):
                print(f"epoch 0 step {step} loss {1.0 / step:.4f}", flush=True)
                await asyncio.sleep(0.005)
            continue
        task = asyncio.get_running_loop().create_task(pf.fill(20))
        ready_once_idle(task)
        print(f"epoch {epoch}: waiting for prefetched batches", flush=True)
        await pf.ready.wait()
        pf.ready.clear()


if __name__ == "__main__":
    asyncio.run(train())
