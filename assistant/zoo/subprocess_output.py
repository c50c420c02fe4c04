"""Hang: a preprocessing step waits for a child before reading the output it sent into a pipe.

``python subprocess_output.py``. The job exports its tokenizer statistics with a helper program the
way many scripts do::

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    proc.wait()                      # before reading: the bug
    stats = proc.stdout.read()

The child writes 1 MiB; a pipe holds 64 KiB, so the child blocks in its write until someone reads,
and the parent waits in ``wait()`` for the child to exit. The Python docs warn of exactly this
(subprocess, Popen.wait). A diagnosis must not end the deadlock by pausing the child: a pause cuts
its half-done write short and CPython then drops the rest of the output.

READY (``{"pid", "child_pid"}``): once the child has sat in the pipe write, and the parent in its
wait, for 5 consecutive samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import _common

HELPER = "import sys; sys.stdout.write('token,count\\n' * 100000)"  # 1.1 MB of statistics


def main() -> None:
    print("preprocessing: exporting tokenizer statistics", flush=True)
    proc = subprocess.Popen([sys.executable, "-I", "-c", HELPER], stdout=subprocess.PIPE)
    main_thread = threading.main_thread()

    def both_stuck() -> bool:
        writing = _common.blocked_in(proc.pid, None, ("pipe_write", "anon_pipe_write"), ("write",))
        waiting = "wait" in _common.stack_functions(main_thread.ident)
        return (
            writing
            and waiting
            and _common.sleeping_steadily(proc.pid)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )

    _common.ready_when(both_stuck, lambda: {"child_pid": proc.pid})
    proc.wait()  # the child cannot exit before its output is read
    stats = proc.stdout.read()
    print(f"read {len(stats)} bytes of statistics", flush=True)


if __name__ == "__main__":
    main()
