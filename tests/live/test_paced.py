"""Healthy jobs that sleep most of the time are never called hung: what the stack samples cannot see
(a step between two sleeps, a wait that ends every two seconds), the scheduler's counters of each
main thread, watched a few seconds past the window, show (live.wakes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from debug_stuck.live.wakes import WATCH_MAX_SECONDS
from debug_stuck.pipeline import DiagnoseRequest
from debug_stuck.probes.collectors.wakeups import watch_wakeups
from debug_stuck.zoo import spawn

pytestmark = pytest.mark.timeout(240)


def diagnose(knowledge, *pids):
    return run_diagnosis(DiagnoseRequest(pids=list(pids), window=1.0), knowledge)


def top_causes(report) -> list:
    return [(d.cause, d.confidence) for d in report.diagnoses[:3]]


def wakes_of(report, pid: int) -> dict:
    return next(p for p in report.to_dict()["processes"] if p["pid"] == pid).get("main_wakes") or {}


def test_a_training_loop_that_sleeps_between_steps_is_not_called_hung(knowledge, zoo):  # noqa: F811
    job = zoo("paced", args=["throttled"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is not True, report.verdict.summary
    if report.verdict.hung is None:  # found asleep in both samples, as nearly always
        assert "it works between its sleeps, a paced loop" in report.verdict.summary, report.verdict.summary
        assert min(wakes_of(report, job.proc.pid)["wake_ms"]) >= 3.0, wakes_of(report, job.proc.pid)


def test_a_trainer_reading_a_child_that_sleeps_between_records_progresses(knowledge, zoo):  # noqa: F811
    job = zoo("paced", args=["child_stream"])
    report = diagnose(knowledge, job.proc.pid, job.info["child_pid"])
    assert report.verdict.hung is False and report.verdict.state == "progressing", report.verdict.summary
    assert f"pid {job.proc.pid} (rank) main thread is found in a read" in report.verdict.summary or (
        "moved between samples" in report.verdict.summary
    ), report.verdict.summary
    assert report.culprit is None


def test_ranks_waiting_for_a_slow_shard_of_one_rank_progress(knowledge, zoo):  # noqa: F811
    job = zoo("paced", args=["slow_shard"], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", report.verdict.summary
    assert report.culprit is None and report.verdict.cause is None, report.culprit
    # the ranks wait in a collective, and still no candidate is a confident cause of a job that moves
    assert report.diagnoses and max(d.confidence for d in report.diagnoses) <= 0.2, top_causes(report)


@pytest.mark.parametrize("scenario", ["queue_producer", "process_pool", "slow_worker", "upload_thread"])
def test_a_trainer_waiting_on_a_slow_producer_pool_worker_or_upload_is_not_called_hung(knowledge, zoo, scenario):  # noqa: F811
    job = zoo("paced", args=[scenario], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", report.verdict.summary
    assert report.culprit is None, report.culprit


def test_a_trainer_fed_by_an_event_loop_that_paces_its_requests_progresses(knowledge, zoo):  # noqa: F811
    """The trainer waits in queue.get (no timeout); the loop's thread waits in epoll_wait for its next
    timer (asyncio.sleep(2.0)): the watch sees the trainer's wait end."""
    job = zoo("paced", args=["event_loop_feed"], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", report.verdict.summary
    assert report.culprit is None, report.culprit


def test_a_trainer_waiting_for_an_event_loop_that_never_gets_its_item_is_still_hung(knowledge, zoo):  # noqa: F811
    """The same shape, hung: the loop looks for an upstream file every second and never finds it. The
    watch ends once the loop's timer had time to fire (its 1 s timeout and one more), not at its cap."""
    job = zoo("blocked_on", args=["event_loop_idle"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, report.verdict.summary
    found = wakes_of(report, job.proc.pid)
    assert found["runs"] == 0 and found["seconds"] < WATCH_MAX_SECONDS, found


def test_a_request_retried_with_backoff_on_a_rate_limited_service_is_not_called_hung(knowledge, zoo):  # noqa: F811
    pytest.importorskip("urllib3")
    job = zoo("paced", args=["retry_backoff"], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    summary = report.verdict.summary
    assert report.verdict.hung is not True, summary
    if report.verdict.hung is None:  # found in Retry's sleep in both samples, as nearly always
        assert f"pid {job.proc.pid} (rank) sleeps at " in summary and "in urllib3's retry with backoff" in summary
        assert f"py-spy dump --locals --pid {job.proc.pid}" in summary, summary
    assert report.culprit is None, report.culprit


def test_a_trainer_reading_a_producer_that_sleeps_longer_than_the_watch_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The decoder writes a shard every 20 s in a `while True` loop: found asleep with more than the
    watch's 6 s left, what it does when it wakes decides; undecided, nobody blamed."""
    job = zoo("paced", args=["fifo_producer"], ready_timeout=120)
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid, child)
    summary = report.verdict.summary
    assert report.verdict.hung is not True, summary
    if report.verdict.hung is None:
        assert f"process pid {child} sleeps at <module> (<string>:" in summary, summary
        assert "`while True`" in summary and f"`py-spy dump --pid {child}` once it has woken" in summary, summary
    assert report.culprit is None, report.culprit


def test_a_trainer_fed_by_a_rate_limited_prefetch_thread_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The sixth hunt's healthy_ratelimited_prefetch: the trainer waits in Queue.get() (no timeout) for a
    thread that sleeps 40 s between API requests, in the job's own rate limiter, then puts the page.
    Found asleep with more left than the watch, it was called hung (thread-deadlock 82%) on 2 of 3
    looks; a thread whose own code hands items over (put) and will wake by itself decides: undecided,
    nobody blamed, the thread named."""
    job = zoo("rate_limited", args=["paced"])
    pid = job.proc.pid
    report = diagnose(knowledge, pid)
    summary = report.verdict.summary
    assert report.verdict.hung is None and report.culprit is None, (summary, report.culprit)
    assert "thread 'api-prefetch' of pid " in summary and "s more (its sleep's deadline)" in summary, summary
    assert "in prefetcher (" in summary and "code that hands items over" in summary, summary
    assert f"`py-spy dump --pid {pid}` once it has woken" in summary, summary


def test_a_trainer_whose_producer_thread_died_is_hung_whatever_else_sleeps(knowledge, zoo):  # noqa: F811
    """Its twin: the prefetch thread raised and ended; a heartbeat thread that only logs sleeps 40 s.
    A sleeper that hands nothing over does not make the wait undecided."""
    job = zoo("rate_limited", args=["producer_died"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, report.verdict.summary
    assert report.verdict.cause == "thread-deadlock", [(d.cause, d.confidence) for d in report.diagnoses[:3]]


def test_a_writer_that_polls_for_a_file_that_never_comes_with_long_sleeps_is_still_hung(knowledge, zoo):  # noqa: F811
    """The same shape, hung: the writer's loop names what it waits for (`while not os.path.exists(...)`)."""
    job = zoo("blocked_on", args=["fifo_producer_polls"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid, child)
    assert report.verdict.hung is True, report.verdict.summary
    assert report.culprit is not None and report.culprit["pid"] == child, report.culprit


def test_a_work_loop_polling_its_drop_folder_after_recent_work_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The seventh hunt's h_poll: the trainer's `while True` loop trains on each new shard of a drop
    folder and sleeps between looks; its log was written seconds ago. It was HUNG on 2 looks of 5
    ("checks something and sleeps again", checkpoint-save 90%): a work loop waiting for its next input
    is undecided, never hung, until its log's silence says otherwise."""
    pytest.importorskip("torch")
    job = zoo("paced", args=["drop_folder"])
    for _ in range(2):
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.hung is None, report.verdict.summary  # no new shard, no new line: not progress
        said = " ".join(report.verdict.state_reasons)
        assert "sleeps in its own loop (`while True`) that names nothing it waits for" in said, said
        assert report.culprit is None, report.culprit


def test_a_cooldown_between_epochs_is_not_called_hung_and_says_when_it_wakes(knowledge, zoo):  # noqa: F811
    """The ninth hunt's s03_cooldown_sleep: `time.sleep(600)` after each epoch, logged. Undecided on
    every call (right); it now says how long the sleep has left, from the deadline CPython's
    time.sleep hands clock_nanosleep."""
    pytest.importorskip("torch")
    job = zoo("paced", args=["cooldown"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is None and report.culprit is None, report.verdict.summary
    said = " ".join(report.verdict.state_reasons)
    assert "sleeps in its own loop (`for epoch in range(3)`) that names nothing it waits for" in said, said
    left = re.search(r"its time\.sleep has (\d+) s left", said)
    assert left and 560 <= int(left.group(1)) <= 600, said


def test_a_poll_for_a_file_nobody_writes_is_still_hung_and_says_how_often_it_looks(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["results_poll"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, report.verdict.summary
    found = wakes_of(report, job.proc.pid)
    assert len(found["wake_ms"]) >= 2 and min(found["wake_ms"]) < 3.0, found
    assert any("it checks something and sleeps again" in r for r in report.verdict.state_reasons), report.verdict


def test_a_wait_with_backoff_for_a_flag_is_undecided_and_a_fixed_poll_stays_hung(knowledge, zoo):  # noqa: F811
    """The eighth hunt's healthy_backoff (HUNG on 8 of 9 calls): its loop grows its own sleep (`delay`),
    read from the source: a wait with backoff for something outside the job, undecided; the fixed
    0.5 s poll of results_poll above stays hung."""
    job = zoo("blocked_more", args=["slot_backoff"])
    for _ in range(2):
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.hung is None, report.verdict.summary
        said = " ".join(report.verdict.state_reasons)
        assert "the loop grows its sleep (`delay`) each time: a wait with backoff" in said, said
        assert report.culprit is None, report.culprit
    waits = next(p["waits"] for p in report.processes if p["pid"] == job.proc.pid)
    assert any(w.get("backoff") == "delay" for w in waits.values()), waits


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE)


def test_a_wait_that_never_returns_is_never_run_and_a_sleeper_runs_each_time_it_wakes():
    blocked = _child("import sys; print('go', flush=True); sys.stdin.read()")
    sleeper = _child("import time\nprint('go', flush=True)\nwhile True: time.sleep(0.1)")
    try:
        for proc in (blocked, sleeper):
            assert proc.stdout.readline() == b"go\n"
        deadline = time.monotonic() + 30
        while spawn.wchan(blocked.pid) != "anon_pipe_read" and "pipe" not in spawn.wchan(blocked.pid):
            assert time.monotonic() < deadline, spawn.wchan(blocked.pid)
            time.sleep(0.02)  # until it sits in the read: nothing ever comes, the pipe stays open
        started = time.monotonic()
        wakes, error = watch_wakeups([(blocked.pid, blocked.pid), (sleeper.pid, sleeper.pid)], 1.0)
        assert error is None and time.monotonic() - started < 1.0 + WATCH_MAX_SECONDS
        assert wakes[(blocked.pid, blocked.pid)].runs == 0 and wakes[(blocked.pid, blocked.pid)].blocked == 0
        slept = wakes[(sleeper.pid, sleeper.pid)]
        assert slept.runs >= 3 and slept.blocked >= 3 and len(slept.wake_ms) >= 2, slept
        assert sum(slept.wake_ms) <= slept.ran_ms + 1e-6, slept
    finally:
        for proc in (blocked, sleeper):
            proc.kill()
            proc.wait()


def test_a_watch_of_threads_that_are_gone_ends_with_nothing():
    proc = _child("pass")
    proc.wait()
    assert watch_wakeups([(proc.pid, proc.pid)], 1.0) == ({}, None)
    assert not os.path.exists(f"/proc/{proc.pid}/task/{proc.pid}/schedstat")


def test_a_wake_up_read_across_two_readings_counts_whole_and_several_ends_share_their_time():
    from debug_stuck.probes.collectors.wakeups import _wake_costs

    ms = 1_000_000
    # (ns run, times run, times blocked): asleep, then 4 ms in one reading and 6 in the next before it
    # blocks, then two wake-ups of 1 ms each ending within one reading
    readings = [(0, 10, 10), (0, 10, 10), (4 * ms, 11, 10), (10 * ms, 11, 11), (12 * ms, 13, 13)]
    assert _wake_costs(readings) == [10.0, 1.0, 1.0]
    assert _wake_costs(readings[:3]) == []  # still running: no whole wake-up yet


def test_a_sleep_with_an_hour_left_is_read_from_its_deadline_and_not_waited_for(knowledge):
    sleeper = _child("import time\nprint('go', flush=True)\nwhile True: time.sleep(3600)")
    try:
        assert sleeper.stdout.readline() == b"go\n"
        deadline = time.monotonic() + 30
        while spawn.wchan(sleeper.pid) not in ("hrtimer_nanosleep", "do_nanosleep"):
            assert time.monotonic() < deadline, spawn.wchan(sleeper.pid)
            time.sleep(0.02)
        report = diagnose(knowledge, sleeper.pid)
        entry = next(p for p in report.to_dict()["processes"] if p["pid"] == sleeper.pid)
        wait = entry["waits"][str(sleeper.pid)]
        assert 3000 < wait["sleep_left_s"] <= 3600 and "args" not in wait, wait
        assert entry.get("main_wakes") is None, entry  # nothing to see in a few seconds: not watched
    finally:
        sleeper.kill()
        sleeper.wait()
