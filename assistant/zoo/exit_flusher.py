"""Hang at exit: training ends, but a non-daemon metrics-flusher thread waits for a stop nobody sends.

``python exit_flusher.py``. A ``MetricsFlusher`` thread (not a daemon) writes buffered metrics to
``<workdir>/metrics.jsonl`` every second: ``while not self.stop.wait(1.0)``. Its ``close()`` (which
sets the Event and joins) is never called. Training ends, the script returns, and Python's exit
(``threading._shutdown``) joins the flusher for ever.

``python exit_flusher.py atexit``: the flush runs in an ``atexit`` handler that waits in
``queue.Queue.join()`` for a writer thread (a daemon) that died on its first record: the handler
waits for a ``task_done()`` nobody will call. The training code has returned; only its exit hangs.

READY (``{"pid"}``): once the main thread has slept in ``_shutdown`` (``join`` for ``atexit``) for 5
consecutive samples.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import _common


class MetricsFlusher(threading.Thread):
    def __init__(self, path: str):
        super().__init__(name="metrics-flusher")  # daemon=False, the default
        self.path, self.rows, self.stop = path, [], threading.Event()

    def log(self, **row) -> None:
        self.rows.append(row)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            rows, self.rows = self.rows, []
            with open(self.path, "a") as out:
                out.writelines(json.dumps(row) + "\n" for row in rows)

    def close(self) -> None:
        self.stop.set()
        self.join()


def main() -> None:
    flusher = MetricsFlusher(str(_common.workdir() / "metrics.jsonl"))
    flusher.start()
    main_thread = threading.main_thread()
    at_exit = lambda: "_shutdown" in _common.stack_functions(main_thread.ident)  # noqa: E731
    _common.ready_when(lambda: at_exit() and _common.sleeping_steadily(os.getpid(), main_thread.native_id))
    for step in range(5):
        loss = 1.0 / (step + 1)
        flusher.log(step=step, loss=loss)
        print(f"step {step} loss {loss:.3f}", flush=True)
    print("training complete", flush=True)
    # flusher.close() is never called: the bug


def main_with_atexit_flush() -> None:
    import atexit
    import queue

    records: queue.Queue = queue.Queue()

    def write() -> None:
        with open(_common.workdir() / "metrics.jsonl", "a") as out:
            while True:
                out.write(json.dumps(records.get()) + "\n")  # a set in the record: TypeError, the thread ends
                records.task_done()

    threading.Thread(target=write, name="metrics-writer", daemon=True).start()

    def flush_metrics() -> None:
        print("flushing metrics...", flush=True)
        records.join()  # waits for a task_done() the dead writer never calls

    atexit.register(flush_metrics)
    main_thread = threading.main_thread()
    in_flush = lambda: "flush_metrics" in _common.stack_functions(main_thread.ident)  # noqa: E731
    _common.ready_when(lambda: in_flush() and _common.sleeping_steadily(os.getpid(), main_thread.native_id))
    for step in range(5):
        records.put({"step": step, "tags": {"train"} if step == 3 else None})
        print(f"step {step}", flush=True)
    print("training complete", flush=True)


if __name__ == "__main__":
    main_with_atexit_flush() if sys.argv[1:] == ["atexit"] else main()
