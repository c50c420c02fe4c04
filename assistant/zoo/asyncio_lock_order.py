"""Hang: two coroutines of an asyncio service take two ``asyncio.Lock`` objects nested in opposite
orders (the thirteenth hunt's j03: "no task is left to wake the loop", the tasks and locks unnamed)::

    async def sync_weights():
        async with params_lock:
            await asyncio.sleep(0.05)
            async with stats_lock: ...

    async def log_stats():
        async with stats_lock:
            await asyncio.sleep(0.05)
            async with params_lock: ...

READY (``{"pid"}``): once the main thread has slept for 5 consecutive samples (the loop idles in epoll
with no timer left).
"""

from __future__ import annotations

import asyncio
import os

import _common

params_lock = asyncio.Lock()
stats_lock = asyncio.Lock()
stats: dict = {}


async def sync_weights() -> None:
    for i in range(100):
        async with params_lock:
            await asyncio.sleep(0.05)
            async with stats_lock:
                stats["synced"] = i


async def log_stats() -> None:
    for i in range(100):
        async with stats_lock:
            await asyncio.sleep(0.05)
            async with params_lock:
                stats["logged"] = i
        print("stats", stats, flush=True)


async def main() -> None:
    _common.ready_when(lambda: _common.sleeping_steadily(os.getpid()))
    await asyncio.gather(sync_weights(), log_stats())


if __name__ == "__main__":
    asyncio.run(main())
