"""Hang: an asyncio loader starts one task per shard file, and every task meets the others at an
``asyncio.Barrier`` whose parties come from the config, not from the shard list (the thirteenth
hunt's j21: "no task is left to wake the loop", the barrier unnamed)::

    barrier = asyncio.Barrier(EXPECTED_SHARDS)        # 3
    await asyncio.gather(*(load_shard(f, barrier) for f in shard_files))   # 2 files

Both tasks wait in ``barrier.wait()`` for a third that is never started.

READY (``{"pid"}``): once the main thread has slept for 5 consecutive samples (the loop idles in epoll
with no timer left).
"""

from __future__ import annotations

import asyncio
import os

import _common

EXPECTED_SHARDS = 3
shard_files = ["shard-000.bin", "shard-001.bin"]  # one shard missing from the manifest


async def load_shard(name: str, barrier: asyncio.Barrier, out: dict) -> None:
    await asyncio.sleep(0.05)  # the read
    out[name] = bytes(1024)
    print("loaded", name, flush=True)
    await barrier.wait()  # every shard before the index is built


async def main() -> None:
    barrier = asyncio.Barrier(EXPECTED_SHARDS)
    out: dict = {}
    _common.ready_when(lambda: _common.sleeping_steadily(os.getpid()))
    await asyncio.gather(*(load_shard(name, barrier, out) for name in shard_files))
    print("index of", len(out), "shards", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
