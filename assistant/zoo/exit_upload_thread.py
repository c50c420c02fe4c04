"""Hang: training finished, and the process never exits: a pool thread's upload gets no answer.

``python exit_upload_thread.py``. The loop hands each epoch's metrics to a
``concurrent.futures.ThreadPoolExecutor`` that POSTs them to a tracking server (a local child here
that accepts connections and never replies, as a stuck tracker does), with no timeout. The loop
ends and the script returns; at interpreter exit CPython joins the pool's threads
(``concurrent/futures/thread.py: _python_exit``), and the one in the upload's socket read never
ends, so the process stays, silent, after its last line "training finished".

READY (``{"pid", "server_pid", "port"}``): once the main thread sits in the exit's join and the
upload thread in its socket read for 5 consecutive samples (the watcher is a daemon thread, so it
is not joined itself).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import _common


def post_metrics(url: str, metrics: dict) -> None:
    body = json.dumps(metrics).encode()
    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"))  # no timeout: the bug


def main() -> None:
    server, port = _common.start_silent_server()
    url = f"http://127.0.0.1:{port}/api/metrics"
    uploads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-upload")
    main_thread = threading.main_thread()

    def stuck_at_exit() -> bool:
        workers = [t for t in threading.enumerate() if t.name.startswith("metrics-upload")]
        if not workers or "_python_exit" not in _common.stack_functions(main_thread.ident):
            return False
        worker = workers[0]
        reading = "getresponse" in _common.stack_functions(worker.ident)
        return (
            reading
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(os.getpid(), worker.native_id)
        )

    _common.ready_when(stuck_at_exit, lambda: {"server_pid": server.pid, "port": port})
    for epoch in range(3):
        loss = 1.0 / (epoch + 1)
        print(f"epoch {epoch} loss {loss:.3f}", flush=True)
        if epoch == 2:
            uploads.submit(post_metrics, url, {"epoch": epoch, "loss": loss})
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
