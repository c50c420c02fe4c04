"""Hang: stdout is a pipe nobody reads, so ``print`` blocks once it is full (cause ``output-blocked``).

The spawner starts this one with ``stdout="pipe"``: fd 1 is a pipe whose read end it keeps open but
never reads (stderr goes to the log file). The loop prints progress lines with ``flush=True``; after
64 KiB (the pipe buffer) the ``write()`` blocks: state S, wchan ``pipe_write`` (``anon_pipe_write``
on Linux >= 6.x kernels that renamed it), ~0% CPU.
``ZOO_OUTPUT=logging`` prints the same lines through a ``logging.StreamHandler`` on stdout instead.

py-spy, MainThread idle (print is a builtin: no frame of its own)::

    log_progress (stdout_pipe.py)
    main (stdout_pipe.py)
    <module> (stdout_pipe.py)

With ``ZOO_OUTPUT=logging`` (the buffered ``stream.write`` in ``emit`` is where it blocks; with a
different buffer fill it can be the ``StreamHandler.flush`` just after)::

    StreamHandler.emit (logging/__init__.py)
    Handler.handle (logging/__init__.py)
    Logger.callHandlers (logging/__init__.py)
    Logger._log (logging/__init__.py)
    Logger.info (logging/__init__.py)
    log_progress (stdout_pipe.py)
    main (stdout_pipe.py)
    <module> (stdout_pipe.py)

READY (``{"pid", "mode"}``): a helper thread (it exits right after) writes it once the main thread
sleeps in ``pipe_write``/``anon_pipe_write``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import _common

MODE = os.environ.get("ZOO_OUTPUT", "print")
logger = logging.getLogger("train")
# the kernel function a writer to a full pipe sleeps in; renamed anon_pipe_write in Linux 6.x
PIPE_WRITE_WCHANS = ("pipe_write", "anon_pipe_write")


def log_progress(step: int) -> None:
    line = f"step {step} loss {1.0 / (step + 1):.6f} " + "." * 60
    if MODE == "logging":
        logger.info(line)
    else:
        print(line, flush=True)


def main() -> None:
    if MODE == "logging":
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: _common.blocked_in(os.getpid(), main_thread.native_id, PIPE_WRITE_WCHANS, ("write",)),
        lambda: {"mode": MODE},
    )
    step = 0
    while True:
        log_progress(step)
        step += 1


if __name__ == "__main__":
    main()
