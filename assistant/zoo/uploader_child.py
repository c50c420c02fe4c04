"""Hang: a trainer waits for its checkpoint-uploader child, whose HTTP upload never gets an answer.

``python uploader_child.py``. A local artifact server (a child process: it accepts connections and
never replies, as a stuck object store or registry does) stands in for the remote service. The
trainer fits a tiny torch model for 3 steps, saves ``<workdir>/ckpt.pt``, then uploads it the way
many jobs do, in a separate process so that a crash cannot take the trainer down::

    uploader = multiprocessing.Process(target=upload_checkpoint, args=(path, url), name="uploader")
    uploader.start()
    uploader.join()          # no timeout

``upload_checkpoint`` POSTs the file with ``urllib.request.urlopen`` and no timeout: it waits in
the socket read of ``http.client``'s ``getresponse`` for ever, and the trainer in ``join``.

READY (``{"pid": trainer, "uploader_pid", "server_pid", "port"}``): written by the uploader once it
has sat in the socket read for 5 consecutive samples.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import urllib.request

import _common
import torch
from torch import nn


def announce_when_reading(**info) -> None:
    main = threading.main_thread()

    def reading() -> bool:
        names = _common.stack_functions(main.ident)
        return "getresponse" in names and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(reading, lambda: dict(info, pid=os.getppid(), uploader_pid=os.getpid()))


def upload_checkpoint(path: str, url: str, server_pid: int, port: int) -> None:
    announce_when_reading(server_pid=server_pid, port=port)
    with open(path, "rb") as f:
        body = f.read()
    request = urllib.request.Request(url, data=body, method="PUT")
    urllib.request.urlopen(request)  # the bug: no timeout


def train(model: nn.Module, steps: int) -> None:
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for step in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain SGD
            for p in model.parameters():
                p -= 0.1 * p.grad
        print(f"step {step} loss {loss.item():.4f}", flush=True)


def main() -> None:
    torch.set_num_threads(1)
    server, port = _common.start_silent_server()
    model = nn.Linear(8, 1)
    train(model, 3)
    path = str(_common.workdir() / "ckpt.pt")
    torch.save(model.state_dict(), path)
    url = f"http://127.0.0.1:{port}/artifacts/ckpt.pt"
    uploader = multiprocessing.Process(target=upload_checkpoint, args=(path, url, server.pid, port), name="uploader")
    uploader.start()
    uploader.join()  # no timeout: waits as long as the upload does
    print("uploaded", flush=True)


if __name__ == "__main__":
    main()
