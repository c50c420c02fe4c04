"""Hang: the trainer waits in ``poll()`` with no timeout on an eventfd that its batch-server child was
to signal, and the child raised (exit code 1, a zombie). A messaging library waits the same way: a
ZeroMQ REQ socket's ``recv()`` polls its own eventfd for a reply, and a REP peer that died goes
unnoticed (the fourteenth hunt's j14: "waits in poll() on anon", no cause, no culprit)::

    ready = os.eventfd(0)
    ...                                   # the child: raise RuntimeError("corrupt shard for batch 4")
    select.poll().register(ready); poller.poll()

READY (``{"pid", "child_pid"}``) once the child has exited and the main thread has slept in poll for
a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import select

import _common


def batch_server(ready: int) -> None:
    raise RuntimeError("corrupt shard for batch 4")  # before it signals the batch ready


if __name__ == "__main__":
    ready = os.eventfd(0)
    child = mp.get_context("fork").Process(target=batch_server, args=(ready,), name="batch-server")
    child.start()
    exited = lambda: _common.task_state(child.pid) == "Z"  # noqa: E731
    _common.ready_when(
        lambda: exited() and _common.sleeping_steadily(os.getpid()),
        lambda: {"pid": os.getpid(), "child_pid": child.pid},
    )
    poller = select.poll()
    poller.register(ready, select.POLLIN)
    poller.poll()  # the next batch
    print("batch", os.eventfd_read(ready), flush=True)
