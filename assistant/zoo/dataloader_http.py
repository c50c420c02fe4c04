"""Hang: DataLoader workers fetch samples over HTTP from the job's own shard server, which accepts
connections and never answers (cause ``external-service``; the culprit a worker, not the server).

``python dataloader_http.py``. The job forks its shard server (a ``multiprocessing.Process``) before
the ``DataLoader(num_workers=2)``, so the server is a child of the trainer listed beside the workers.
Each worker's ``__getitem__`` calls ``urllib.request.urlopen`` with no timeout; the server accepts
and reads nothing, answers nothing::

    def __getitem__(self, index):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/shard/{index}") as reply:   # no timeout
            return reply.read()

READY (``{"pid", "server_pid", "port"}``): once the main thread has slept in ``_try_get_data`` for a
few consecutive samples.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import urllib.request

import _common
import torch


def silent_server(listener: socket.socket) -> None:
    held = []
    while True:
        conn, _ = listener.accept()
        held.append(conn)  # accepted, never read, never answered


class RemoteShards(torch.utils.data.Dataset):
    def __init__(self, port: int):
        self.port = port

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/shard/{index}") as reply:
            return reply.read()


def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(target=silent_server, args=(listener,), daemon=True)
    server.start()
    listener.close()
    loader = torch.utils.data.DataLoader(RemoteShards(port), batch_size=2, num_workers=2, collate_fn=list)
    _common.ready_when(
        _common._main_sleeps_in("_try_get_data"),
        lambda: {"pid": os.getpid(), "server_pid": server.pid, "port": port},
    )
    for batch in loader:
        print(len(batch), flush=True)


if __name__ == "__main__":
    main()
