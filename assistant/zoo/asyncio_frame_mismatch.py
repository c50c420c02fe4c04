"""Hang: the trainer's event loop asks a feature-server child for features over a length-prefixed
protocol, and the two sides count the length differently: the server's length includes the 4-byte
header, so the client's ``readexactly(n)`` waits for 4 bytes that never come, while the server waits
in ``readexactly(4)`` for the next request (the sixteenth hunt's j17: external-service, "never
answers")::

    n = int.from_bytes(await reader.readexactly(4), "big")
    body = await reader.readexactly(n)        # the server sent n - 4 bytes of body

READY (``{"pid", "server_pid", "port"}``) once the main thread idles in its event loop, waiting.
"""

from __future__ import annotations

import asyncio
import os
import threading

import _common

FEATURE_SERVER = """
import asyncio

async def serve(reader, writer):
    while True:
        n = int.from_bytes(await reader.readexactly(4), "big")
        request = await reader.readexactly(n)
        body = b"f" * 64
        writer.write((len(body) + 4).to_bytes(4, "big") + body)  # the new framing counts the header
        await writer.drain()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


async def train(port: int, asking: threading.Event) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for step in range(100):
        request = f"features for step {step}".encode()
        writer.write(len(request).to_bytes(4, "big") + request)
        await writer.drain()
        asking.set()
        n = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(n)  # no timeout
        _common.log(f"step {step}")


if __name__ == "__main__":
    server, port = _common.start_server_child(FEATURE_SERVER)
    asking = threading.Event()
    _common.ready_when(
        lambda: asking.is_set() and _common.sleeping_steadily(os.getpid()),
        lambda: {"pid": os.getpid(), "server_pid": server.pid, "port": port},
    )
    asyncio.run(train(port, asking))
