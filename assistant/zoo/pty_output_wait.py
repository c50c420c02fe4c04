"""Hang: the trainer runs its evaluator on a pseudo-terminal (so that its progress bars keep their
colours) and waits for it before reading the terminal's master end (the seventeenth hunt's j01)::

    master, slave = os.openpty()
    evaluator = subprocess.Popen(cmd, stdout=slave, stderr=slave)
    os.close(slave)
    rc = evaluator.wait()                 # the output is read after this
    output = os.read(master, 65536)

The evaluator writes more than the pty holds and blocks in its write; the trainer waits for it to
exit. The chain stopped at "a write of the terminal /dev/pts/N", with a fix that read the slave
(`cat /proc/PID/fd/1`), which drains nothing.

READY (``{"pid", "child_pid"}``) once the evaluator is blocked writing and the trainer sleeps in wait.
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common

EVALUATOR = """
for batch in range(100000):
    print(f"eval batch {batch}: accuracy 0.{batch % 97:02d} " + "=" * 60, flush=True)
"""

if __name__ == "__main__":
    master, slave = os.openpty()
    evaluator = subprocess.Popen([sys.executable, "-I", "-c", EVALUATOR], stdout=slave, stderr=slave)
    os.close(slave)
    _common.ready_when(
        lambda: (
            _common.blocked_in(evaluator.pid, None, ("n_tty_write", "wait_woken", "tty_write"), ("write",))
            and _common.sleeping_steadily(os.getpid())
        ),
        lambda: {"pid": os.getpid(), "child_pid": evaluator.pid},
    )
    code = evaluator.wait()
    _common.log(f"evaluator exited {code}: {os.read(master, 65536)[-200:]!r}")
