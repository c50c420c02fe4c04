"""Hang: a coroutine on the training loop's asyncio event loop makes a blocking HTTP call (urllib, as
requests would) to the control endpoint that the same loop serves (asyncio.start_server here, an
aiohttp app in the fifteenth hunt's j26, "the listener at the other end never accepted it",
external-service 93%). The kernel queues the connection; the server accepts only when the loop
runs, and the loop's one thread waits for the answer::

    server = await asyncio.start_server(control, "127.0.0.1", port)
    ...
    urllib.request.urlopen(f"http://127.0.0.1:{port}/hparams")   # inside async def train()

READY (``{"pid", "port"}``) once the main thread has slept in the receive for a few samples.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import urllib.request

import _common


async def control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readline()
    body = json.dumps({"lr": 0.01}).encode()
    writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    writer.close()


calling = threading.Event()  # set just before the blocking call: READY waits for it


def fetch_hparams(port: int) -> dict:
    calling.set()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/hparams") as reply:  # blocks the loop's thread
        return json.load(reply)


async def train(port: int) -> None:
    for step in range(1, 100):
        await asyncio.sleep(0.01)
        if step == 30:
            hparams = fetch_hparams(port)
            _common.log(f"reloaded hparams {hparams}")


async def main() -> None:
    port = _common.free_port()
    server = await asyncio.start_server(control, "127.0.0.1", port)
    me = os.getpid()
    _common.ready_when(lambda: calling.is_set() and _common.sleeping_steadily(me), lambda: {"pid": me, "port": port})
    async with server:
        await train(port)


if __name__ == "__main__":
    asyncio.run(main())
