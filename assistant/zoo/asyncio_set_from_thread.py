"""Hang: a coroutine awaits an ``asyncio.Event`` that a loader thread sets with ``ready.set()`` once
the shards are loaded. asyncio's primitives are not thread-safe: the set() marks the Event but does
not wake the loop, idle in its selector, so the await never returns (the fourteenth hunt's j08: "no
task is left ... one died", the TaskGroup fix)::

    def loader():
        ...
        ready.set()                   # from the loader thread

READY (``{"pid"}``): once the loader thread has ended and the main thread has slept for 5 consecutive
samples (the loop idles in epoll with no timer left).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

import _common


async def main() -> None:
    ready = asyncio.Event()
    shards: dict = {}

    def loader() -> None:
        time.sleep(0.2)
        shards["x"] = bytes(4096)
        print("shards loaded", flush=True)
        ready.set()  # not thread-safe: the loop is never woken

    thread = threading.Thread(target=loader, name="shard-loader")
    thread.start()
    _common.ready_when(lambda: not thread.is_alive() and _common.sleeping_steadily(os.getpid()))
    await ready.wait()
    print("training on", len(shards), "shards", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
