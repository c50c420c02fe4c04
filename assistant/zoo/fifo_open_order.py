"""Hang: the trainer talks to an evaluator child through two named pipes and opens ``to_eval`` for
writing first; the evaluator opens ``from_eval`` for writing first. Opening a FIFO blocks until its
other end is opened (fifo(7)), so each waits in open() for the other (the sixteenth hunt's j10: "no
reader", "start its reader, or write a regular file", the child unseen)::

    to_eval = open("to_eval", "w")        # the trainer
    from_eval = open("from_eval", "w")    # the evaluator, first

READY (``{"pid", "child_pid"}``) once both sleep in their open().
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common

EVALUATOR = """
replies = open("from_eval", "w")   # the slip: the trainer opens to_eval first
requests = open("to_eval")
for line in requests:
    replies.write("ok " + line)
    replies.flush()
"""

if __name__ == "__main__":
    os.chdir(_common.workdir())
    for name in ("to_eval", "from_eval"):
        os.mkfifo(name)
    evaluator = subprocess.Popen([sys.executable, "-I", "-c", EVALUATOR])
    opening = ("wait_for_partner", "fifo_open")
    _common.ready_when(
        lambda: (
            _common.blocked_in(os.getpid(), None, opening, ("open", "openat"))
            and _common.blocked_in(evaluator.pid, None, opening, ("open", "openat"))
        ),
        lambda: {"pid": os.getpid(), "child_pid": evaluator.pid},
    )
    to_eval = open("to_eval", "w")
    from_eval = open("from_eval")
    to_eval.write("ck10.pt\n")
    print("eval:", from_eval.readline().strip(), flush=True)
