"""Healthy (slow): two uploader threads of a ThreadPoolExecutor sendall() checkpoint shards to an
artifact store that reads each connection slowly (16 KiB every 100 ms); the main thread waits in
as_completed. The uploaders sit in send() on full socket buffers, and bytes keep leaving (the
sixteenth hunt's h05, called HUNG, thread-deadlock 82%)::

    with ThreadPoolExecutor(2, thread_name_prefix="uploader") as pool:
        for done in as_completed(pool.submit(upload, shard) for shard in shards):
            ...

READY (``{"pid", "server_pid", "port"}``) once both uploads are under way and the main thread waits.
"""

from __future__ import annotations

import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

import _common

SLOW_STORE = """
import socket, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)

def drain(c):
    while c.recv(16384):
        time.sleep(0.1)

while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""
SHARD = b"w" * (64 << 20)  # minutes at 160 KB/s: the test stops the job long before
started = threading.Semaphore(0)


def upload(port: int, name: str) -> str:
    with socket.create_connection(("127.0.0.1", port)) as conn:  # no timeout, as a plain client has
        started.release()
        conn.sendall(SHARD)
    return name


if __name__ == "__main__":
    store, port = _common.start_server_child(SLOW_STORE)
    me = os.getpid()
    uploading = []
    _common.ready_when(
        lambda: len(uploading) == 2 and _common.sleeping_steadily(me),
        lambda: {"pid": me, "server_pid": store.pid, "port": port},
    )
    with ThreadPoolExecutor(2, thread_name_prefix="uploader") as pool:
        futures = [pool.submit(upload, port, f"shard-{i}") for i in range(4)]
        for _ in range(2):
            started.acquire()
            uploading.append(1)
        for done in as_completed(futures):
            _common.log(f"uploaded {done.result()}")
