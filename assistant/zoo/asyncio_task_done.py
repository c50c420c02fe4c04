"""Hang: an asyncio preprocessing pipeline: the main coroutine puts documents on an asyncio.Queue and
awaits ``q.join()``; three workers take them, and one skips an empty document with ``continue`` before
its ``q.task_done()``. join waits for a task_done that never comes while every worker waits in get
(the sixteenth hunt's j07: "no asyncio task is left ... one died", a TaskGroup fix)::

    text = await q.get()
    if not text.strip():
        continue              # the slip: no task_done() for this item
    ...
    q.task_done()

READY (``{"pid"}``) once the event loop sleeps with nothing to run.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common

joining = threading.Event()


async def worker(q: asyncio.Queue, out: list) -> None:
    while True:
        text = await q.get()
        if not text.strip():
            continue
        out.append(len(text.split()))
        q.task_done()


async def main() -> None:
    q: asyncio.Queue = asyncio.Queue(maxsize=8)
    out: list = []
    workers = [asyncio.create_task(worker(q, out)) for _ in range(3)]
    for i in range(20):
        await q.put("" if i == 7 else "the cat sat on the mat")
    joining.set()
    await q.join()
    for task in workers:
        task.cancel()
    _common.log(f"{len(out)} documents")


if __name__ == "__main__":
    _common.ready_when(
        lambda: joining.is_set() and _common.sleeping_steadily(os.getpid()), lambda: {"pid": os.getpid()}
    )
    asyncio.run(main())
