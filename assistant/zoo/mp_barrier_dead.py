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
"""

from __future__ import annotations

import multiprocessing
import os
import threading

import _common


def prepare_shard(barrier, index: int) -> None:
    print(f"worker {index}: preparing shard", flush=True)
    raise RuntimeError(f"shard {index}: checksum mismatch")


def main() -> None:
    barrier = multiprocessing.Barrier(2)
    child = multiprocessing.Process(target=prepare_shard, args=(barrier, 1), name="shard-1")
    child.start()
    main_thread = threading.main_thread()

    def stuck() -> bool:
        in_barrier = "wait" in _common.stack_functions(main_thread.ident)
        return (
            _common.task_state(child.pid) == "Z"
            and in_barrier
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )

    _common.ready_when(stuck, lambda: {"child_pid": child.pid})
    print("main: preparing shard 0", flush=True)
    barrier.wait()  # no timeout: the bug
    print("all shards ready", flush=True)


if __name__ == "__main__":
    main()
