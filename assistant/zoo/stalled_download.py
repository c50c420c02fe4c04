"""Hang: a streamed download whose server sent the headers and part of the body, then stopped.

``python stalled_download.py``. The job fetches its pretrained weights the usual way::

    response = requests.get(url, stream=True)          # no timeout
    for chunk in response.iter_content(1 << 16):
        f.write(chunk)

A local server (a child process standing in for a stuck mirror or proxy) answers ``200 OK`` with a
``Content-Length`` of 100 GB, sends 5,000 bytes of it and goes silent, keeping the connection open.
The job waits in the socket read under urllib3's ``HTTPResponse.stream`` for ever.

``python stalled_download.py slow``: not hung. The server goes on sending the body, 16 KiB every
200 ms (a slow mirror, 80 KB/s); the job spends its time in the same socket read, receiving,
and keeps the body in no file (only the connection shows the progress).

``python stalled_download.py asyncio_slow``: not hung either. The body comes slower still, 4 KiB every
200 ms (20 KB/s), and the job reads it with asyncio streams, so its thread waits in the event loop's
``epoll_wait`` on the connection, not in a read of its own.

``python stalled_download.py asyncio_trickle``: not hung. Four asyncio downloads at once, each body
trickled 1 KiB every 200 ms (the sixteenth hunt's h03: an object store throttling every stream).

READY (``{"pid", "server_pid", "port"}``): once the main thread has sat in the body read for 5
consecutive samples.
"""

from __future__ import annotations

import os
import sys
import threading

import _common
import requests


async def fetch_weights(port: int) -> None:
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /model.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    while await reader.read(1 << 16):  # no timeout: the same bug, here harmless
        pass


def download_with_asyncio(drip: int = 4 << 10, connections: int = 1) -> None:
    import asyncio

    server, port = _common.start_silent_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n", drip=drip)
    main_thread = threading.main_thread()

    def in_event_loop() -> bool:
        names = _common.stack_functions(main_thread.ident)
        return "run_forever" in names and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(in_event_loop, lambda: {"server_pid": server.pid, "port": port})

    async def fetch_all() -> None:
        await asyncio.gather(*(fetch_weights(port) for _ in range(connections)))

    asyncio.run(fetch_all())


def main() -> None:
    if sys.argv[1:] == ["asyncio_slow"]:
        return download_with_asyncio()
    if sys.argv[1:] == ["asyncio_trickle"]:
        return download_with_asyncio(drip=1 << 10, connections=4)
    slow = sys.argv[1:] == ["slow"]
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n" + b"x" * 5000  # then silence
    server, port = _common.start_silent_server(answer, drip=16 << 10 if slow else 0)
    main_thread = threading.main_thread()

    def reading_body() -> bool:
        names = _common.stack_functions(main_thread.ident)
        return "stream" in names and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(reading_body, lambda: {"server_pid": server.pid, "port": port})
    target = _common.workdir() / "model.bin"
    print("downloading pretrained weights", flush=True)
    response = requests.get(f"http://127.0.0.1:{port}/model.bin", stream=True)  # no timeout: the bug
    with open(os.devnull if slow else target, "wb") as f:  # slow: nothing written, only received
        for chunk in response.iter_content(1 << 16):
            f.write(chunk)
    print("weights downloaded", flush=True)


if __name__ == "__main__":
    main()
