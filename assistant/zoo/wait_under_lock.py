"""Hang: a thread waits on a bounded queue while it holds a lock that the queue's reader waits for
(cause ``thread-deadlock``).

``python wait_under_lock.py {logging|state_lock}``. ``logging`` (the default): a logging handler that
puts records on a bounded queue, drained by a thread that logs through the same handler::

    class ShippingHandler(logging.Handler):
        def emit(self, record):
            self.outbox.put(record)          # blocks while the outbox is full

    def ship():                              # the drainer thread
        record = outbox.get()
        log.info("shipped %s", ...)          # through the same handler: waits for its lock

``logging.Handler.handle`` holds the handler's lock (an RLock) around ``emit``. The main thread logs
a step, takes the lock and blocks in ``put`` on the full outbox; the drainer, the outbox's only
reader, logs its own progress and waits for that lock (the tenth hunt's j12, read as output-blocked).

``state_lock``: the step puts its metrics on a bounded queue inside ``with state_lock:``; the thread that
gets them takes ``state_lock`` to add them up.

READY (``{"pid", "drainer", "put_line", "log_line"}``, ``log_line`` the reader's wait): once both
threads have slept in their waits for 5 consecutive samples.
"""

from __future__ import annotations

import inspect
import logging
import os
import queue
import sys
import threading
import time

import _common

state_lock = threading.Lock()
totals = {"loss": 0.0}

log = logging.getLogger("trainer")
outbox: queue.Queue = queue.Queue(maxsize=4)


class ShippingHandler(logging.Handler):
    """Ships formatted records to a metrics service (here: a slow sink) from a background thread."""

    def emit(self, record: logging.LogRecord) -> None:
        outbox.put(self.format(record))  # blocks while the outbox is full, holding the handler's lock


def ship() -> None:
    shipped = 0
    while True:
        line = outbox.get()
        time.sleep(0.05)  # the sink is slow
        shipped += 1
        if shipped % 5 == 0:
            log.info("shipped %d records, last: %s", shipped, line[:20])  # through the same handler


def add_up() -> None:
    while True:
        loss = outbox.get()
        with state_lock:  # waits for the lock the step holds while it puts
            totals["loss"] += loss


def line_of(function, start: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if line.strip().startswith(start))


def main(variant: str) -> None:
    log.setLevel(logging.INFO)
    log.addHandler(ShippingHandler())
    plain = variant == "state_lock"
    drainer = threading.Thread(target=add_up if plain else ship, name="metrics-shipper", daemon=True)
    drainer.start()
    main_thread = threading.main_thread()

    def both_wait() -> bool:
        return (
            "put" in _common.stack_functions(main_thread.ident)
            and ("add_up" if plain else "handle") in _common.stack_functions(drainer.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(os.getpid(), drainer.native_id)
        )

    _common.ready_when(
        both_wait,
        lambda: {
            "drainer": drainer.native_id,
            "put_line": line_of(main, "outbox.put") if plain else line_of(ShippingHandler.emit, "outbox.put"),
            "log_line": line_of(add_up, "with state_lock") if plain else line_of(ship, 'log.info("shipped'),
        },
    )
    for step in range(100000):
        loss = 1.0 / (step + 1)
        if plain:
            with state_lock:
                outbox.put(loss)  # the bug: waits for room while holding the lock the reader needs
        else:
            log.info("step %d loss %.3f", step, loss)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "logging")
