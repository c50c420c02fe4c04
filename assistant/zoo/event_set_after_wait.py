"""Hang: the main thread waits for its evaluation tasks before it sets the Event they wait for
(cause ``thread-deadlock``).

``python event_set_after_wait.py``. Each evaluation task of a ``ThreadPoolExecutor(2)`` first waits for
``weights_synced`` (the trainer's new weights); the main thread submits them, waits for them
(``wait(futures)``) and only then calls ``weights_synced.set()`` (the eleventh hunt's j21: "an Event
nobody sets", although the set() is on the next line).

``python event_set_after_wait.py process``: the same with a process. The trainer starts an evaluator
``multiprocessing.Process`` that waits for ``ckpt_ready`` (a ``multiprocessing.Event``), joins it,
and sets ``ckpt_ready`` on the next line (the twelfth hunt's j05: no cause named, "local SSD" first).

READY (``{"pid", "set_line", "wait_line"}``, and ``child_pid`` for ``process``): once the main thread
has slept in ``wait`` (``process``: in the join's ``poll``) for 5 consecutive samples.
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


def evaluator(ready) -> None:
    ready.wait()  # "checkpoint written"
    print("evaluating the checkpoint", flush=True)


def main_process() -> None:
    import multiprocessing

    ckpt_ready = multiprocessing.Event()
    child = multiprocessing.Process(target=evaluator, args=(ckpt_ready,), name="evaluator")
    child.start()
    _common.ready_when(
        _common._main_sleeps_in("poll"),
        lambda: {"set_line": line_of(main_process, "ckpt_ready.set()"), "child_pid": child.pid},
    )
    print("epoch done; waiting for the evaluator", flush=True)
    child.join()  # the bug: waits for the evaluator before signalling what it waits for
    ckpt_ready.set()


if __name__ == "__main__":
    import sys

    main_process() if sys.argv[1:] == ["process"] else main()
