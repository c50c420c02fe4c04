"""Hang: the trainer holds a multiprocessing lock while it waits for a reply from a child that needs
that lock before it replies (cause ``thread-deadlock``).

``python process_lock_reply.py``. A reward server child reads a request from a ``multiprocessing.Pipe``,
counts it in shared stats under ``stats_lock`` and replies; every few steps the trainer sends its loss
and waits for the reward inside ``with stats_lock:`` (the eleventh hunt's j26: the chain stopped at
the child, and the fix was a two-lock ordering).

READY (``{"pid", "server_pid", "wait_line", "take_line"}``): once both have slept for 5 consecutive
samples, the trainer in its recv.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import threading
import time

import _common


def reward_server(conn, stats_lock, served) -> None:
    while True:
        request = conn.recv()
        with stats_lock:  # the shared stats, before replying
            served.value += 1
        conn.send(float(request) * 0.5)


def line_of(function, text: str) -> int:
    source, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(source) if line.strip().startswith(text))


def main() -> None:
    context = multiprocessing.get_context("fork")
    stats_lock = context.Lock()
    served = context.Value("i", 0, lock=False)
    mine, theirs = context.Pipe()
    server = context.Process(target=reward_server, args=(theirs, stats_lock, served), name="reward-server")
    server.start()
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "_recv" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(server.pid)
        ),
        lambda: {
            "server_pid": server.pid,
            "wait_line": line_of(main, "reward = mine.recv()"),
            "take_line": line_of(reward_server, "with stats_lock:"),
        },
    )
    for step in range(1, 100000):
        loss = 1.0 / step
        if step % 5 == 0:
            with stats_lock:  # the bug: held while waiting for the server, which needs it to reply
                mine.send(loss)
                reward = mine.recv()
            print(f"step {step} reward {reward:.3f}", flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    main()
