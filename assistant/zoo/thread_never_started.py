"""Hang: checkpoints are uploaded by coroutines on a background asyncio loop, whose thread is made and
never started; the trainer waits for each upload's future (the thirteenth hunt's j20: the fix said
the thread had died)::

    loop = asyncio.new_event_loop()
    uploader = threading.Thread(target=loop.run_forever, name="uploader-loop", daemon=True)
    # uploader.start() is missing
    fut = asyncio.run_coroutine_threadsafe(upload(path), loop)
    fut.result()                       # nothing runs the loop

READY (``{"pid"}``): once the main thread has slept in ``result`` for 5 consecutive samples.
"""

from __future__ import annotations

import asyncio
import threading

import _common

loop = asyncio.new_event_loop()
uploader = threading.Thread(target=loop.run_forever, name="uploader-loop", daemon=True)


async def upload(path: str) -> int:
    await asyncio.sleep(0.1)
    return len(path)


def main() -> None:
    _common.ready_when(_common._main_sleeps_in("result"))
    for step in range(1, 4):
        print(f"step {step} uploading", flush=True)
        fut = asyncio.run_coroutine_threadsafe(upload(f"ckpt_{step}.pt"), loop)
        print("uploaded", fut.result(), flush=True)


if __name__ == "__main__":
    main()
