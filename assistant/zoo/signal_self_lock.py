"""Hang: a preemption signal handler saves a checkpoint under the lock its own interrupted frame holds.

``python signal_self_lock.py``. As a Slurm job asks for ``--signal=USR1@90`` to save before its
time limit, the script installs a SIGUSR1 handler that calls ``save_checkpoint``, which takes
``state_lock``. The training loop takes the same lock around each step. The signal arrives while a
step holds it: Python runs the handler in the main thread, between two bytecodes of the step, and
the handler's ``with state_lock:`` waits for the lock that frame below it holds (a Lock is not
re-entrant): for ever. A helper thread sends the signal once a step holds the lock.

READY (``{"pid"}``): once the main thread has slept in ``save_checkpoint`` for 5 consecutive samples.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import _common

state_lock = threading.Lock()  # guards the model state against a concurrent save
state = {"step": 0}
in_step = threading.Event()


def save_checkpoint(tag: str) -> None:
    with state_lock:
        (_common.workdir() / f"{tag}.ckpt").write_text(str(state["step"]))


def on_preempt(signum, frame) -> None:
    print(f"got signal {signum}: saving a checkpoint before preemption", flush=True)
    save_checkpoint("preempt")


def preempt_during_a_step() -> None:
    in_step.wait()
    os.kill(os.getpid(), signal.SIGUSR1)


def main() -> None:
    signal.signal(signal.SIGUSR1, on_preempt)
    threading.Thread(target=preempt_during_a_step, name="scheduler", daemon=True).start()
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "save_checkpoint" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )
    )
    for step in range(1_000_000):
        with state_lock:
            state["step"] = step
            if step == 3:
                in_step.set()
            time.sleep(0.2)  # the step's work; the signal's handler runs when it returns
        print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)


if __name__ == "__main__":
    main()
