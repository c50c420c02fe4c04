"""Hang: the training loop hands its metrics to a writer thread through a bounded ``queue.Queue``; the
writer dies on its first record (``json.dumps`` of a tensor raises TypeError) and the loop blocks in
``put()`` once the queue is full (``python metrics_writer_died.py``).

READY (``{"pid"}``) once the main thread sleeps in ``Queue.put`` and the writer thread has ended.
"""

from __future__ import annotations

import json
import os
import queue
import threading

import _common
import torch


def write_metrics(records: queue.Queue, path: str) -> None:
    with open(path, "a") as out:
        while True:
            out.write(json.dumps(records.get()) + "\n")  # a tensor in the record: TypeError, the thread ends


def main() -> None:
    torch.set_num_threads(1)
    records: queue.Queue = queue.Queue(maxsize=8)
    writer = threading.Thread(
        target=write_metrics, args=(records, str(_common.workdir() / "metrics.jsonl")), name="metrics-writer"
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
