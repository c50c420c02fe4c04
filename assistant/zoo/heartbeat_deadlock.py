"""Hang: a lock-order deadlock behind a heartbeat thread that keeps logging (``python heartbeat_deadlock.py``).

The main thread takes ``ckpt_lock`` then ``state_lock`` to save; an EMA thread takes ``state_lock``
then ``ckpt_lock`` to snapshot. Once each holds its first lock they wait for each other for ever,
while a heartbeat thread logs ``alive step=40 loss=...`` every half second, the step frozen (the
fifteenth hunt's j07: called progressing, "the log grew").

READY (``{"pid"}``) once the main thread has slept in its acquire for a few samples.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import _common

ckpt_lock = threading.Lock()
state_lock = threading.Lock()
both_hold = threading.Barrier(2)
progress = {"step": 0, "loss": 1.0}


def heartbeat() -> None:
    while True:
        logging.info("heartbeat: alive step=%d loss=%.4f", progress["step"], progress["loss"])
        time.sleep(0.5)


def ema_snapshotter() -> None:
    with state_lock:
        both_hold.wait()
        with ckpt_lock:
            progress["ema"] = progress["loss"]


def save_checkpoint() -> None:
    with ckpt_lock:
        both_hold.wait()
        with state_lock:
            progress["saved"] = progress["step"]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    for step in range(40):
        progress["step"], progress["loss"] = step, progress["loss"] * 0.95
    threading.Thread(target=ema_snapshotter, name="ema-snapshot", daemon=True).start()
    _common.ready_when(_common._main_sleeps_in("save_checkpoint"), lambda: {"pid": os.getpid()})
    save_checkpoint()
    logging.info("saved")
