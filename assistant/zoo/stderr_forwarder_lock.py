"""Hang: the job redirects its stderr into an os.pipe() that its own 'stderr-forwarder' thread reads,
stamping each line with the step under ``state_lock``. The training step, holding ``state_lock``,
prints a gradient dump larger than the pipe (64 KiB) to stderr: the forwarder reads one line and waits
for the lock, the pipe fills, and the step blocks in write() with the lock held (the fifteenth hunt's
j18, read as output-blocked 93% with "Drain the pipe to a file")::

    with state_lock:
        state["step"] = step
        print(dump, file=sys.stderr)          # ~200 KB

READY (``{"pid", "forwarder_tid"}``) once the main thread sleeps in the write and the forwarder waits.
"""

from __future__ import annotations

import os
import sys
import threading

import _common

state_lock = threading.Lock()
state = {"step": 0}
forwarder_tid: list = []


def forward_stderr(read_end: int, run_log) -> None:
    forwarder_tid.append(threading.get_native_id())
    with os.fdopen(read_end, "r") as pipe:
        for line in pipe:
            with state_lock:
                step = state["step"]
            run_log.write(f"[stderr step={step}] {line.rstrip()[:80]}\n")
            run_log.flush()


if __name__ == "__main__":
    run_log = os.fdopen(os.dup(2), "w")  # the job's log, where the forwarder writes
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    forwarder = threading.Thread(target=forward_stderr, args=(read_end, run_log), name="stderr-forwarder", daemon=True)
    forwarder.start()
    me = os.getpid()
    _common.ready_when(
        lambda: forwarder_tid and _common.sleeping_steadily(me) and _common.sleeping_steadily(me, forwarder_tid[0]),
        lambda: {"pid": me, "forwarder_tid": forwarder_tid[0]},
    )
    for step in range(1, 1000):
        with state_lock:
            state["step"] = step
            if step % 20 == 0:  # the gradient dump for the debugging run
                for name in ("encoder.weight", "encoder.bias", "head.weight"):
                    print(f"grad {name}: {[0.125] * 20000}", file=sys.stderr)
        threading.Event().wait(0.01)
