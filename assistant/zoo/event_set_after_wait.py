"""Hang: the main thread waits for its evaluation tasks before it sets the Event they wait for
(cause ``thread-deadlock``).

``python event_set_after_wait.py``. Each evaluation task of a ``ThreadPoolExecutor(2)`` first waits for
``weights_synced`` (the trainer's new weights); the main thread submits them, waits for them
(``wait(futures)``) and only then calls ``weights_synced.set()`` (the eleventh hunt's j21: "an Event
nobody sets", although the set() is on the next line).

READY (``{"pid", "set_line", "wait_line"}``): once the main thread has slept in ``wait`` for 5
consecutive samples.
"""

from __future__ import annotations

import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import _common

weights_synced = threading.Event()


def evaluate(shard: int) -> float:
    weights_synced.wait()  # the trainer's new weights
    return shard * 0.1


def line_of(function, text: str) -> int:
    source, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(source) if line.strip().startswith(text))


def main() -> None:
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "wait" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        ),
        lambda: {"set_line": line_of(main, "weights_synced.set()"), "wait_line": line_of(main, "wait(futures)")},
    )
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="eval") as pool:
        futures = [pool.submit(evaluate, shard) for shard in range(4)]
        wait(futures)  # the bug: waits for the tasks before signalling what they wait for
        weights_synced.set()
        print([f.result() for f in futures], flush=True)


if __name__ == "__main__":
    main()
