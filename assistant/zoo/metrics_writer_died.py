"""Hang: the training loop hands its metrics to a writer thread through a bounded ``queue.Queue``; the
writer dies on its first record (``json.dumps`` of a tensor raises TypeError) and the loop blocks in
``put()`` once the queue is full (``python metrics_writer_died.py``).

``python metrics_writer_died.py swallowed``: the writer catches its error, logs it at debug level
(nothing is printed: the log level is INFO) and returns, as the sixth hunt's lightning_writer_died
did; no "Exception in thread" traceback reaches the log.

``python metrics_writer_died.py listener_stopped``: the loop logs through a ``QueueHandler`` whose
``enqueue`` blocks (``queue.put``) on a bounded queue, drained by a ``logging.handlers.QueueListener``;
at step 10 the job calls ``listener.stop()`` ("flush the logs before evaluation") and never starts it
again (the ninth hunt's h04, whose fix said the thread had most likely died of an exception).

READY (``{"pid"}``) once the main thread sleeps in ``Queue.put`` and the writer thread has ended.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
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


class BlockingQueueHandler(logging.handlers.QueueHandler):
    def enqueue(self, record: logging.LogRecord) -> None:
        self.queue.put(record)  # the stdlib's put_nowait would raise queue.Full instead


def listener_stopped() -> None:
    records: queue.Queue = queue.Queue(maxsize=16)
    listener = logging.handlers.QueueListener(records, logging.FileHandler(_common.workdir() / "train.log"))
    listener.start()
    log = logging.getLogger("train")
    log.setLevel(logging.INFO)
    log.addHandler(BlockingQueueHandler(records))
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            listener._thread is None
            and "put" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )
    )
    for step in range(1, 10**6):
        log.info("step %d loss %.3f", step, 1.0 / step)
        if step == 10:
            listener.stop()  # flush the logs before evaluation; the bug: never started again


if __name__ == "__main__":
    listener_stopped() if sys.argv[1:] == ["listener_stopped"] else main()
