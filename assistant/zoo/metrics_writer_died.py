"""Hang: the training loop hands its metrics to a writer thread through a bounded ``queue.Queue``; the
writer dies on its first record (``json.dumps`` of a tensor raises TypeError) and the loop blocks in
``put()`` once the queue is full (``python metrics_writer_died.py``).

``python metrics_writer_died.py swallowed``: the writer catches its error, logs it at debug level
(nothing is printed: the log level is INFO) and returns, as the sixth hunt's lightning_writer_died
did; no "Exception in thread" traceback reaches the log.

READY (``{"pid"}``) once the main thread sleeps in ``Queue.put`` and the writer thread has ended.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading

import _common
import torch


def write_metrics(records: queue.Queue, path: str) -> None:
    with open(path, "a") as out:
        while True:
            out.write(json.dumps(records.get()) + "\n")  # a tensor in the record: TypeError, the thread ends


def write_metrics_quietly(records: queue.Queue, path: str) -> None:
    try:
        write_metrics(records, path)
    except Exception:
        logging.getLogger("metrics").debug("metrics writer stopped", exc_info=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    records: queue.Queue = queue.Queue(maxsize=8)
    writer = threading.Thread(
        target=write_metrics_quietly if sys.argv[1:] == ["swallowed"] else write_metrics,
        args=(records, str(_common.workdir() / "metrics.jsonl")),
        name="metrics-writer",
    )
    writer.daemon = True
    writer.start()
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), 1e-2)
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            not writer.is_alive()
            and "put" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )
    )
    for step in range(1, 10**6):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        records.put({"step": step, "loss": loss.detach()})  # blocks for ever once 8 wait unread


if __name__ == "__main__":
    main()
