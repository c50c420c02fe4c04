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


RETRY = (
    "2026-11-29 15:27:{s:02d},156 WARNING tracking server unreachable ([Errno 111] Connection refused), retry {n} in 2s"
)


def test_one_failure_line_again_and_again_is_a_retry_not_progress():
    """The fourteenth hunt's j13: a metrics logger that retries a refused connection for ever logs one
    warning every 2 s, numbers apart; the log grew, and the job was called progressing."""
    from debug_stuck.core.logstacks import REPEATED_LINE, only_repeated_line

    lines = [RETRY.format(s=21 + 2 * n, n=n) for n in (6, 7, 8)]
    assert only_repeated_line(lines) == REPEATED_LINE + lines[-1].split(" ", 2)[2]  # its timestamp left out
    assert only_repeated_line(lines[:1]) is None  # one line says nothing of a repeat
    steps = [f"2026-11-29 15:27:{n:02d},156 INFO step {n} loss 0.{n}" for n in (1, 2, 3)]
    assert only_repeated_line(steps) is None  # a progress line names no failure
    assert only_repeated_line(lines[:2] + steps[:1]) is None


def test_a_log_that_gains_one_retry_line_after_the_same_line_is_read_as_repeating(tmp_path):
    """A retry every 2 s adds one line to a 1 s window: the line before the growth says it repeats."""
    from debug_stuck.core.logstacks import REPEATED_LINE
    from debug_stuck.probes.collectors.logtail import repeated_error_growth

    log = tmp_path / "train.log"
    before = "".join(RETRY.format(s=21 + 2 * n, n=n) + "\n" for n in (1, 2))
    after = before + RETRY.format(s=27, n=3) + "\n"
    log.write_text(after)
    expected = REPEATED_LINE + RETRY.format(s=27, n=3).split(" ", 2)[2]
    assert repeated_error_growth(str(log), len(before), len(after)) == expected
    log.write_text(before + "2026-11-29 15:27:27,156 INFO step 8 loss 0.3\n")
    assert repeated_error_growth(str(log), len(before), log.stat().st_size) is None


FEEDER = """\
2026-11-29 15:20:06,526 consumed record 2 loss 1.0120
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/queues.py", line 244, in _feed
    obj = _ForkingPickler.dumps(obj)
          ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/reduction.py", line 51, in dumps
    cls(buf, protocol).dump(obj)
AttributeError: Can't pickle local object 'make_record.<locals>.<lambda>'
2026-11-29 15:20:06,927 consumed record 4 loss 0.8846
"""


def test_a_queue_feeders_traceback_names_the_item_it_dropped():
    """CPython 3.11's own output (the fourteenth hunt's j02 log): Queue._feed could not pickle an item."""
    from debug_stuck.core.logstacks import feeder_errors

    assert feeder_errors(FEEDER.splitlines()) == [
        "AttributeError: Can't pickle local object 'make_record.<locals>.<lambda>'"
    ]
    other = FEEDER.replace("in _feed", "in _send").splitlines()
    assert feeder_errors(other) == []


def test_a_growth_cut_mid_line_or_holding_one_traceback_still_reads_as_repeating(tmp_path):
    """The window ends while a worker writes its traceback (a CI run of pool_init_fails called it
    progressing: the cut last line matched nothing), or it gains one traceback, the same as before it."""
    from debug_stuck.probes.collectors.logtail import repeated_error_growth

    log = tmp_path / "train.log"
    before = "\n".join([ONE.format(n=1), ONE.format(n=2)]) + "\n"
    grown = before + ONE.format(n=3) + "\n" + ONE.format(n=4)[:40]  # the last traceback half written
    log.write_text(grown)
    error = "FileNotFoundError: [Errno 2] No such file or directory: '/job/vocab.txt'"
    assert repeated_error_growth(str(log), len(before), len(grown)) == error
    one = before + ONE.format(n=3) + "\n"
    log.write_text(one)
    assert repeated_error_growth(str(log), len(before), len(one)) == error


def test_tracebacks_of_workers_dying_together_read_as_repeating_in_every_window(tmp_path):
    """Two pool workers that die at once interleave their tracebacks line by line (the suite's load
    made pool_init_fails read as progressing: "the log grew"). Every window the probe could read,
    from any line to any later one, after the first whole traceback, still reads as repeating."""
    from pathlib import Path

    from debug_stuck.probes.collectors.logtail import repeated_error_growth

    recorded = Path(__file__).parents[1] / "fixtures" / "stacks" / "pool-initializer-raises-interleaved.log"
    log = tmp_path / "log.txt"
    log.write_bytes(recorded.read_bytes())
    text = recorded.read_bytes()
    assert b"Process ForkPoolWorker-300:\nTraceback (most recent call last):\nProcess ForkPoolWorker-301:" in text
    ends = [i + 1 for i, byte in enumerate(text) if byte == ord("\n")]
    first_whole = text.index(b"FileNotFoundError")
    starts = [end for end in ends if end > first_whole]
    error = next(line for line in text.decode().splitlines() if line.startswith("FileNotFoundError"))
    misread = [
        (start, end)
        for k, start in enumerate(starts)
        for end in starts[k + 1 : k + 40]
        if repeated_error_growth(str(log), start, end) != error
    ]
    assert not misread, f"{len(misread)} windows misread, the first {misread[0]}"


def test_an_indented_line_of_the_jobs_own_after_the_tracebacks_is_progress(tmp_path):
    """The growth may hold only part of one more traceback, but an indented line of the job's own
    (a progress line under a heading) that no traceback before it holds is progress."""
    from debug_stuck.probes.collectors.logtail import repeated_error_growth

    log = tmp_path / "train.log"
    before = "\n".join([ONE.format(n=1), ONE.format(n=2)]) + "\n"
    for grown, repeats in (
        ('  File "/job/train.py", line 8, in init_worker\n', True),
        ("    step 12 loss 0.43\n", False),
    ):
        log.write_text(before + grown)
        found = repeated_error_growth(str(log), len(before), len(before + grown))
        assert (found is not None) is repeats, (grown, found)
