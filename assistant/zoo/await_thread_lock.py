"""Hang: an asyncio trainer saves checkpoints off the loop with ``asyncio.to_thread``, awaited inside
``with state_lock:``; the writer thread takes ``state_lock`` to update the run's metadata. The
coroutine holds the lock across the await of the thread that needs it (the sixteenth hunt's j25: the
chain stopped at the idle loop, a generic timeout fix)::

    async def save_checkpoint(step):
        with state_lock:
            await asyncio.to_thread(write_shard, step)     # write_shard: `with state_lock:`

READY (``{"pid"}``) once the loop idles and the writer thread waits.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common

state_lock = threading.Lock()
saving = threading.Event()


def write_shard(step: int) -> None:
    (_common.workdir() / f"ckpt_{step}.bin").write_bytes(bytes(64))
    with state_lock:  # update the run's metadata consistently
        (_common.workdir() / "meta.txt").write_text(str(step))


async def save_checkpoint(step: int) -> None:
    with state_lock:  # freeze the state while saving
        saving.set()
        await asyncio.to_thread(write_shard, step)


async def main() -> None:
    for step in range(100):
        await asyncio.sleep(0.01)
        if step == 3:
            await save_checkpoint(step)
        _common.log(f"step {step}")


if __name__ == "__main__":
    _common.ready_when(lambda: saving.is_set() and _common.sleeping_steadily(os.getpid()), lambda: {"pid": os.getpid()})
    asyncio.run(main())
