"""Hang: ``pool.imap`` is handed a generator that calls ``pool.apply()`` for each item's size (for a
progress bar). The pool's task-handler thread iterates that generator and waits in apply for a task
that only it would hand to a worker: the workers idle, imap never yields (the sixteenth hunt's j23:
"a worker died mid-task and its task is lost", which was false)::

    def with_sizes():
        for path in paths:
            yield path, pool.apply(count_lines, (path,))
    for result in pool.imap(tokenize, with_sizes()):

READY (``{"pid"}``) once the main thread and the task handler wait.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import _common


def count_lines(path: str) -> int:
    return len(path)


def tokenize(item) -> int:
    path, size = item
    return size


if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2)
    paths = [f"shard-{i:03d}.txt" for i in range(16)]
    first = list(pool.imap(tokenize, ((p, 0) for p in paths)))  # epoch 0: no sizes yet

    def with_sizes():
        for path in paths:
            yield path, pool.apply(count_lines, (path,))  # from the pool's own task-handler thread

    results = pool.imap(tokenize, with_sizes())
    me = os.getpid()
    _common.ready_when(lambda: _common.sleeping_steadily(me), lambda: {"pid": me})
    for size in results:
        _common.log(f"tokenized {size}")
