"""Hang: a tokenizer process puts records on a ``multiprocessing.Queue``; one record holds a lambda.
``put()`` returns at once (the queue's feeder thread pickles later), the feeder cannot pickle that
record, prints the traceback and drops it, and the producer exits 0; the trainer waits in ``get()`` for
the record that never comes (the fourteenth hunt's j02: "no cause named", the traceback unused)::

    rec["postprocess"] = lambda t: t * 2      # AttributeError: Can't pickle local object

READY (``{"pid", "child_pid"}``) once the producer has exited and the main thread has slept in
``get`` for a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import _common

RECORDS = 4


def make_record(i: int) -> dict:
    record = {"idx": i, "tokens": list(range(i, i + 8))}
    if i == 2:
        record["postprocess"] = lambda tokens: [t * 2 for t in tokens]  # not picklable
    return record


def producer(queue, n: int) -> None:
    for i in range(n):
        queue.put(make_record(i))
        time.sleep(0.05)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=producer, args=(queue, RECORDS), name="tokenize-shard")
    child.start()
    exited = lambda: _common.task_state(child.pid) in ("Z", "")  # noqa: E731
    _common.ready_when(
        lambda: exited() and _common._main_sleeps_in("<module>")(),
        lambda: {"pid": os.getpid(), "child_pid": child.pid},
    )
    for _ in range(RECORDS):
        record = queue.get()
        print(f"consumed record {record['idx']}", flush=True)
    print("done", flush=True)
