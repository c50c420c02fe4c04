"""Hang: the trainer announces each epoch to two consumer threads (an evaluator and a checkpointer)
through one ``threading.Condition`` and waits for both to acknowledge; it wakes them with
``cond.notify()``, which wakes one (the fourteenth hunt's j24: "wait on the state, with a timeout")::

    with cond:
        state["epoch"] = epoch
        cond.notify()                  # one of the two waiters
    with acks:
        while state["acks"] < 2:
            acks.wait()

READY (``{"pid"}``) once the main thread has slept waiting for the acknowledgements for a few samples.
"""

from __future__ import annotations

import os
import threading

import _common

cond = threading.Condition()
acks = threading.Condition()
state = {"epoch": -1, "acks": 0}


def consumer() -> None:
    seen = -1
    while True:
        with cond:
            while state["epoch"] == seen:
                cond.wait()
            seen = state["epoch"]
        with acks:
            state["acks"] += 1
            acks.notify_all()


if __name__ == "__main__":
    consumers = [threading.Thread(target=consumer, name=name, daemon=True) for name in ("evaluator", "checkpointer")]
    for thread in consumers:
        thread.start()
    _common.wait_until(lambda: all(_common.sleeping_steadily(os.getpid(), t.native_id) for t in consumers), 30)
    _common.ready_when(lambda: _common.sleeping_steadily(os.getpid()), lambda: {"pid": os.getpid()})
    with cond:
        state["epoch"] = 0
        cond.notify()  # the slip: one waiter of two
    with acks:
        while state["acks"] < 2:
            acks.wait()
    print("epoch 0 acknowledged", flush=True)
