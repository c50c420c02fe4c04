"""Healthy (slow): the main thread waits for ``state_lock`` while a checkpoint thread holds it and
pickles a large pure-Python state (text protocol 0, several passes: tens of seconds, one C call per
pass, its Python stack frozen on one line). The sixteenth hunt's h06 was called HUNG (cpu-spin 45%):
the chain stopped at the main thread's lock wait::

    def ckpt():
        with state_lock:
            for _ in range(passes):
                blob = pickle.dumps(state, protocol=0)

READY (``{"pid", "ckpt_tid"}``) once the main thread waits for the lock inside the pickling.
"""

from __future__ import annotations

import os
import pickle
import random
import threading
import time

import _common

state_lock = threading.Lock()
state = {"step": 0, "replay": [{"obs": [random.random() for _ in range(64)], "r": float(i)} for i in range(4_000)]}
pickling = threading.Event()
ckpt_tid: list = []


def ckpt() -> None:
    ckpt_tid.append(threading.get_native_id())
    with state_lock:
        pickling.set()
        for _ in range(3_000):  # each pass holds the GIL; minutes of passes: the test stops it long before
            blob = pickle.dumps(state, protocol=0)
        (_common.workdir() / "state.pkl").write_bytes(blob)


if __name__ == "__main__":
    me = os.getpid()
    _common.ready_when(
        lambda: pickling.is_set() and _common.sleeping_steadily(me), lambda: {"pid": me, "ckpt_tid": ckpt_tid[0]}
    )
    for step in range(100_000):
        with state_lock:
            state["step"] = step
        _common.log(f"step {step}")
        if step == 3:
            threading.Thread(target=ckpt, name="ckpt").start()
        time.sleep(0.05)
