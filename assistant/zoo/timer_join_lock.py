"""Hang: the training step joins its watchdog Timer while it holds the lock the Timer's callback
takes (cause ``thread-deadlock``).

``python timer_join_lock.py``::

    with state_lock:            # a step runs under the state lock
        ...                     # one slow step: the watchdog fires meanwhile
        timer.cancel()          # too late: the callback already runs
        timer.join()            # waits for the callback, which waits for state_lock

The Timer's callback (``on_slow_step``) blocks on ``state_lock``; the main thread holds it and waits
in ``join`` for the Timer's thread to end (the ninth hunt's h11, where only the callback's side was
named, the Timer called "the pool thread").

READY (``{"pid", "callback_line", "join_line"}``): once both threads have slept in their waits for 5
consecutive samples.
"""

from __future__ import annotations

import inspect
import os
import threading
import time

import _common

state_lock = threading.Lock()
fired = threading.Event()


def on_slow_step() -> None:
    fired.set()
    with state_lock:  # waits for the lock the step holds
        print("watchdog: step too slow", flush=True)


def line_of(function, start: str) -> int:
    """The line of `function` that begins with `start` (its first such line)."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if line.strip().startswith(start))


def main() -> None:
    main_thread = threading.main_thread()
    timer = threading.Timer(0.2, on_slow_step)
    timer.start()

    def both_wait() -> bool:
        return (
            "join" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(os.getpid(), timer.native_id)
        )

    _common.ready_when(
        both_wait,
        lambda: {
            "callback_line": line_of(on_slow_step, "with state_lock"),
            "join_line": line_of(main, "timer.join()"),
        },
    )
    for step in range(1000):
        with state_lock:
            if step == 3:
                fired.wait(5)  # one slow step: the watchdog fires meanwhile
            timer.cancel()
            timer.join()  # the bug: joins the Timer's thread while holding the lock its callback takes
            timer = threading.Timer(0.2, on_slow_step)
            timer.start()
        print(f"step {step}", flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
