"""Hang: two coroutines share a ``threading.Lock``; the checkpointer awaits an "upload" while it holds
it, and the trainer's ``with state_lock:`` then blocks the event loop's one thread, which is the only
one that could resume the holder (the fourteenth hunt's j15: "take the locks in one fixed order")::

    async def checkpointer():
        with state_lock:
            await asyncio.sleep(0.2)       # suspended, the lock held

    async def trainer():
        with state_lock:                   # blocks the loop

READY (``{"pid"}``): once the main thread has slept for 5 consecutive samples.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common

state_lock = threading.Lock()
state = {"step": 0}


async def checkpointer() -> None:
    while True:
        await asyncio.sleep(0.1)
        with state_lock:
            snapshot = dict(state)
            await asyncio.sleep(0.2)  # the upload of the snapshot, the lock held
        print("checkpoint", snapshot, flush=True)


async def trainer() -> None:
    while True:
        with state_lock:
            state["step"] += 1
        await asyncio.sleep(0.01)


async def main() -> None:
    _common.ready_when(lambda: _common.sleeping_steadily(os.getpid()))
    await asyncio.gather(checkpointer(), trainer())


if __name__ == "__main__":
    asyncio.run(main())
