"""A log that grows only with one child traceback after another is no progress
(core.logstacks.only_repeated_errors). The text is CPython 3.11's own output for a Pool whose
initializer raises (multiprocessing/process.py _bootstrap prints "Process NAME:" and the traceback)."""

from __future__ import annotations

from debug_stuck.core.logstacks import only_repeated_errors

ONE = """Process ForkPoolWorker-{n}:
Traceback (most recent call last):
  File "/usr/lib/python3.11/multiprocessing/process.py", line 314, in _bootstrap
    self.run()
  File "/usr/lib/python3.11/multiprocessing/process.py", line 108, in run
    self._target(*self._args, **self._kwargs)
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 109, in worker
    initializer(*initargs)
  File "/job/train.py", line 8, in init_worker
    with open(path) as f:
         ^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/job/vocab.txt'"""


def _log(*parts: str) -> list:
    return "\n".join(parts).splitlines()


def test_the_same_worker_traceback_again_and_again_is_named():
    lines = _log(ONE.format(n=3822), ONE.format(n=3823), ONE.format(n=3824))
    assert only_repeated_errors(lines) == "FileNotFoundError: [Errno 2] No such file or directory: '/job/vocab.txt'"


def test_a_line_of_the_jobs_own_among_them_is_progress_again():
    lines = _log(ONE.format(n=1), "epoch 0 step 12 loss 0.4311", ONE.format(n=2))
    assert only_repeated_errors(lines) is None


def test_one_traceback_or_two_different_errors_are_not_a_respawn_loop():
    assert only_repeated_errors(_log(ONE.format(n=1))) is None
    other = ONE.format(n=2).replace("FileNotFoundError: [Errno 2]", "PermissionError: [Errno 13]")
    assert only_repeated_errors(_log(ONE.format(n=1), other)) is None
