"""Hang: an async shard loader bounds the shards in flight with an asyncio.Semaphore(2), taken with
``await sem.acquire()`` and given back by ``sem.release()`` after the read; a corrupt shard's
``except`` returns in between. Two corrupt shards keep both permits, and every other load waits in
acquire (the sixteenth hunt's j06: "no asyncio task is left ... one died", a TaskGroup fix)::

    await sem.acquire()
    try:
        data = await read_shard(i)
    except ValueError:
        return                    # the slip: the permit is kept
    sem.release()

READY (``{"pid"}``) once the event loop sleeps with nothing to run.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common

CORRUPT = {1, 3}
gathering = threading.Event()


async def read_shard(i: int) -> bytes:
    await asyncio.sleep(0.01)
    if i in CORRUPT:
        raise ValueError(f"shard {i}: corrupt")
    return bytes(100)


async def load(i: int, sem: asyncio.Semaphore, out: list) -> None:
    await sem.acquire()
    try:
        data = await read_shard(i)
    except ValueError as e:
        _common.log(f"{e}, skipping")
        return
    sem.release()
    out.append(len(data))


async def main() -> None:
    sem = asyncio.Semaphore(2)
    out: list = []
    gathering.set()
    await asyncio.gather(*(load(i, sem, out) for i in range(16)))
    _common.log(f"{len(out)} shards loaded")


if __name__ == "__main__":
    _common.ready_when(
        lambda: gathering.is_set() and _common.sleeping_steadily(os.getpid()), lambda: {"pid": os.getpid()}
    )
    asyncio.run(main())
