"""Hang (at exit): a telemetry pump runs on the event loop's default executor
(``loop.run_in_executor(None, pump)``) and returns only on a ``None`` sentinel that the job never
puts; ``asyncio.run()`` ends with ``loop.shutdown_default_executor()``, which joins that worker for
ever (the fourteenth hunt's j21: the chain stopped at the loop's epoll)::

    def pump():
        while True:
            item = telemetry_q.get()
            if item is None:
                return

READY (``{"pid"}``) once the main thread has slept in asyncio.run's close for a few samples.
"""

from __future__ import annotations

import asyncio
import os
import queue

import _common

telemetry_q: queue.Queue = queue.Queue()


def pump() -> None:
    while True:
        item = telemetry_q.get()
        if item is None:
            return
        print("telemetry", item, flush=True)


async def main() -> None:
    asyncio.get_running_loop().run_in_executor(None, pump)
    for step in range(3):
        telemetry_q.put({"step": step})
        await asyncio.sleep(0.01)
    print("training done", flush=True)


if __name__ == "__main__":
    _common.ready_when(_common._main_sleeps_in("close"), lambda: {"pid": os.getpid()})
    asyncio.run(main())
