"""Hang: two processes meet at a ``multiprocessing.Barrier``; the child dies before it gets there.

``python mp_barrier_dead.py``. The job prepares its shards in a child process and meets it at a
barrier, with no timeout::

    barrier = multiprocessing.Barrier(2)
    child = multiprocessing.Process(target=prepare_shard, args=(barrier, 1))
    child.start()
    barrier.wait()          # the child raised first: nobody else will ever arrive

The child raises (a corrupt shard) and exits with code 1; its traceback is in the log. The parent
waits in ``Barrier.wait`` for ever, and the child stays a zombie (its parent never joins it).

READY (``{"pid", "child_pid"}``): once the child is a zombie and the parent has slept in the barrier
for 5 consecutive samples.

``python mp_barrier_dead.py event``: the parent waits on a ``multiprocessing.Event`` that the child
sets when its shards are ready; finding them prepared already, the child returns early without
``set()`` and exits with code 0 (the ninth hunt's h10, whose fix spoke of a crash and dmesg).

``python mp_barrier_dead.py pipe``: the parent waits in ``recv()`` on a ``multiprocessing.Pipe()`` (a
socketpair) whose other end the child took with it; the child returns early without sending and exits
with code 0. The parent still holds both ends, so the socket's only holder is the parent itself.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import _common


def prepare_shard(barrier, index: int) -> None:
    print(f"worker {index}: preparing shard", flush=True)
    raise RuntimeError(f"shard {index}: checksum mismatch")


def prepare_once(ready, done: str) -> None:
    if os.path.exists(done):
        print("shards already prepared, nothing to do", flush=True)
        return  # the bug: this path never tells the parent
    ready.set()


def send_once(conn, done: str) -> None:
    if os.path.exists(done):
        print("shards already prepared, nothing to do", flush=True)
        return  # the bug: this path never sends
    conn.send(["shard-0.pt"])


def main(mode: str) -> None:
    done = str(_common.workdir() / "shards.done")
    open(done, "w").close()
    if mode == "event":
        ready = multiprocessing.Event()
        child = multiprocessing.Process(target=prepare_once, args=(ready, done), name="prep")
        wait, blocked_in = ready.wait, "wait"
    elif mode == "pipe":
        receiver, sender = multiprocessing.Pipe()
        child = multiprocessing.Process(target=send_once, args=(sender, done), name="prep")
        wait, blocked_in = receiver.recv, "_recv"
    else:
        barrier = multiprocessing.Barrier(2)
        child = multiprocessing.Process(target=prepare_shard, args=(barrier, 1), name="shard-1")
        wait, blocked_in = barrier.wait, "wait"
    child.start()
    main_thread = threading.main_thread()

    def stuck() -> bool:
        waiting = blocked_in in _common.stack_functions(main_thread.ident)
        return (
            _common.task_state(child.pid) == "Z"
            and waiting
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )

    _common.ready_when(stuck, lambda: {"child_pid": child.pid})
    print("main: preparing shard 0", flush=True)
    wait()  # no timeout: the bug
    print("all shards ready", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if sys.argv[1:] else "barrier")
