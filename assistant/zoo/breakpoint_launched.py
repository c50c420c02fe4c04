"""Hang: a launcher gives its trainer a stdin pipe it never writes, and the trainer stops at a
``breakpoint()`` left in its loop: pdb waits for a command on that pipe (cause ``input-wait``).

``python breakpoint_launched.py``: the launcher (kept stdin for "control commands") starts
``breakpoint_launched.py trainer`` with ``stdin=subprocess.PIPE`` and waits for it (the eleventh hunt's
j01, whose first fix closed the pipe: pdb reads EOF and quits, and the training with it).

``python breakpoint_launched.py input``: the same launcher; the trainer asks ``Overwrite? [y/N]`` with
``input()`` because its output directory is not empty (the thirteenth hunt's j01: "close it first",
which makes input() raise EOFError and stops the run).

READY (``{"pid", "trainer_pid"}``): once the launcher sleeps in ``wait4`` and the trainer in its read.
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common

PIPE_READS = ("pipe_read", "anon_pipe_read", "pipe_wait_readable")
WAITS = ("do_wait", "kernel_wait4")


def launch(role: str) -> None:
    trainer = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__), role], stdin=subprocess.PIPE)

    def both_wait() -> bool:
        return (
            _common.blocked_in(os.getpid(), None, WAITS, ("wait4",))
            and _common.blocked_in(trainer.pid, None, PIPE_READS, ("read",))
            and _common.sleeping_steadily(trainer.pid)
        )

    _common.ready_when(both_wait, lambda: {"trainer_pid": trainer.pid})
    sys.exit(trainer.wait())


def trainer() -> None:
    for step in range(10):
        print(f"step {step} loss 0.5", flush=True)
        if step == 2:
            breakpoint()  # left in while chasing a NaN
    _common.sleep_forever()


def asks() -> None:
    out = _common.workdir() / "outputs"
    out.mkdir(exist_ok=True)
    (out / "config.json").write_text("{}")
    print("model built", flush=True)
    if any(out.iterdir()):
        answer = input(f"Output directory {out} exists and is not empty. Overwrite? [y/N] ")
        print("answer", answer, flush=True)
    _common.sleep_forever()


if __name__ == "__main__":
    role = sys.argv[1] if sys.argv[1:] else ""
    {"trainer": trainer, "asker": asks}.get(role, lambda: launch("asker" if role == "input" else "trainer"))()
