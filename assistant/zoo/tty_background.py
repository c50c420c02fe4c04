"""Hang: a training run started in the background of an interactive shell (``python train.py &``)
turns on keyboard hotkeys at a step, with ``tty.setcbreak(sys.stdin.fileno())``. A background process
group that changes its terminal's settings is sent SIGTTOU (termios(3)), and the kernel stops it:
state T, with no SIGSTOP sent by anyone (the seventeenth hunt's j07, read as "stopped (SIGSTOP)")::

    if step == 3 and sys.stdin.isatty():
        tty.setcbreak(sys.stdin.fileno())   # s = save, q = quit

``python tty_background.py``: the job's root holds a pty's master (the terminal) and drains it; its
child is the shell, the session leader of that pty, in the foreground; the shell's child, the trainer,
runs in a process group of its own (a background job). READY (``{"pid": trainer, "shell_pid"}``) once
the trainer is stopped.
"""

from __future__ import annotations

import os
import pty
import sys
import tty

import _common


def trainer() -> None:
    for step in range(5):
        _common.log(f"step {step} loss {1.0 / (step + 1):.4f}")
        if step == 3 and sys.stdin.isatty():
            _common.log("enabling interactive hotkeys")
            tty.setcbreak(sys.stdin.fileno())
    _common.sleep_forever()


def shell() -> None:
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)  # what `&` does: a job of its own, not the terminal's foreground group
        os.execv(sys.executable, [sys.executable, __file__, "trainer"])
    os.setpgid(job, job)
    _common.ready_when(lambda: _common.task_state(job) == "T", lambda: {"pid": job, "shell_pid": os.getpid()})
    _common.sleep_forever()


if __name__ == "__main__":
    if sys.argv[1:] == ["trainer"]:
        trainer()
    else:
        child, terminal = pty.fork()
        if child == 0:
            shell()
        while True:  # the terminal's screen: whatever the shell and its jobs print
            try:
                if not os.read(terminal, 4096):
                    break
            except OSError:
                break
        _common.sleep_forever()
