"""Issue 23, items 6 and 8 (watch): no false alarms on a job's quiet-but-busy phases, real stalls
still caught fast, and no stop or restart without a report on disk.

The stall clock and the stack judgement are tested as pure logic (simulated time, stacks built from
Frame objects); the watcher on real jobs, run as a user does (a subprocess printing JSON events,
watch_runs.WatchRun): the zoo's busy_phases job (steps every 0.05-0.1 s, a silent CPU-bound pass of
several seconds every 80 steps) and test_watch's watch_hang target. The watcher, every job it
launched (each in a session of its own) and every job the test started are killed by process
group / PID in a finalizer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from watch_runs import TARGETS, WatchRun, start_logged_job

from debug_stuck.actions.watch.clock import StallClock
from debug_stuck.actions.watch.motion import LOOP_SAMPLES, MotionTracker
from debug_stuck.errors import EXIT_USAGE
from debug_stuck.probes.collectors.stacks import Frame, ThreadStack

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watch reads /proc"),
]

BUSY_JOB = Path(__file__).resolve().parents[2] / "assistant" / "zoo" / "busy_phases.py"


# --------------------------------------------------------------------------------------------
# The clock: verdicts and learned busy phases (pure logic, simulated time)
# --------------------------------------------------------------------------------------------


def _steps(clock: StallClock, first: int, count: int, start: float, every: float = 0.1) -> float:
    """`count` steps `every` seconds apart from `start`; returns the time of the last one."""
    at = start
    for step in range(first, first + count):
        at += every
        clock.step(step, at)
    return at


def _learned_clock() -> tuple[StallClock, float]:
    """Steps every 0.1 s (threshold: the 2 s floor), one busy 5 s silence that ended with a step,
    then 30 steps more: the 5 s interval has left the 20 the threshold remembers."""
    clock = StallClock(floor=2.0, multiple=8.0, phase_multiple=30.0, started_at=0.0)
    at = _steps(clock, 1, 30, 0.0)
    clock.motion("moving", at + 1.5)
    clock.motion("busy", at + 4.0)
    at = _steps(clock, 31, 1, at + 4.9)  # the pass ends: a step 5 s after the last one
    at = _steps(clock, 32, 30, at)
    return clock, at


def test_a_silence_the_stacks_call_moving_is_a_busy_phase_with_the_phase_allowance():
    clock = StallClock(floor=2.0, multiple=8.0, phase_multiple=30.0, started_at=0.0)
    at = _steps(clock, 1, 30, 0.0)
    assert clock.threshold() == 2.0
    clock.motion("moving", at + 1.0)
    for t in range(2, 60):  # the stacks keep saying it computes through changing functions
        clock.motion("moving", at + t - 0.5)
        assert clock.check(at + t) is None, t
    assert clock.busy_limit(at + 59) == 60.0
    clock.motion("moving", at + 60.5)
    stall = clock.check(at + 61)  # a busy phase that never ends: stalled at the allowance
    assert stall is not None and (stall.rule, stall.phase, stall.threshold) == ("phase-limit", "busy", 60.0)


def test_a_job_that_computes_while_its_stacks_cannot_be_read_gets_a_busy_phase_s_allowance():
    # No py-spy, or no ptrace rights: a scoring pass and a spinning loop look alike, so neither is
    # called a stall at the threshold; one that never ends is, at the allowance.
    clock = StallClock(floor=2.0, multiple=8.0, phase_multiple=30.0, started_at=0.0)
    at = _steps(clock, 1, 30, 0.0)
    for t in range(3, 60):
        clock.motion("blind", at + t - 0.5)
        assert clock.check(at + t) is None, t
    clock.motion("blind", at + 60.5)
    stall = clock.check(at + 61)
    assert stall is not None and (stall.rule, stall.phase, stall.threshold) == ("phase-limit", "busy", 60.0)
    # a silence it ended with a step is learned like any busy one
    clock.motion("blind", at + 10.0)
    _steps(clock, 31, 1, at + 12.0)
    assert list(clock.busy_phases)[-1] == pytest.approx(12.1)  # from the last step to this one


def test_stuck_or_unknown_silences_stall_at_the_threshold_as_before():
    clock = StallClock(floor=2.0, multiple=8.0, started_at=0.0)
    at = _steps(clock, 1, 30, 0.0)
    assert clock.check(at + 2.5).rule == "steps"  # no verdict: as today
    clock.motion("stuck", at + 1.0)
    stall = clock.check(at + 2.5)
    assert stall is not None and (stall.rule, stall.threshold) == ("steps", 2.0)
    clock.motion("busy", at + 2.4)  # one chain of functions, nothing learned: a stall too
    assert clock.check(at + 2.5).rule == "steps"
    clock.motion("moving", at + 1.0)
    assert clock.check(at + 1.0 + 10.0).rule == "steps"  # a verdict this old says nothing about now


def test_a_busy_silence_that_ended_with_a_step_is_learned_and_not_re_alarmed():
    clock, at = _learned_clock()
    assert clock.threshold() == 2.0  # the 5 s interval is out of the window: the floor again
    assert list(clock.busy_phases) == [pytest.approx(5.0)]
    assert clock.expected_busy() == pytest.approx(10.0)
    # The next busy silence on one chain of functions is expected up to 2 x the learned 5 s ...
    for t in (2.5, 5.0, 9.5):
        clock.motion("busy", at + t - 0.2)
        assert clock.check(at + t) is None, t
    clock.motion("busy", at + 10.3)
    stall = clock.check(at + 10.5)  # ... and no longer
    assert stall is not None and stall.rule == "steps" and stall.threshold == pytest.approx(10.0)
    # A learned phase never slows down a job that stopped computing: stuck is stalled at the floor.
    clock, at = _learned_clock()
    clock.motion("stuck", at + 1.0)
    stall = clock.check(at + 2.5)
    assert stall is not None and (stall.rule, stall.threshold) == ("steps", 2.0)


def test_only_busy_silences_are_learned_and_a_restart_keeps_them():
    clock = StallClock(floor=2.0, started_at=0.0)
    at = _steps(clock, 1, 30, 0.0)
    clock.motion("stuck", at + 2.0)  # a wait that ended (slow data): not a busy phase
    at = _steps(clock, 31, 1, at + 6.0)
    assert not clock.busy_phases and clock.expected_busy() is None
    learned, _ = _learned_clock()
    again = StallClock.carried_over(learned, now=500.0)
    assert list(again.busy_phases) == list(learned.busy_phases)
    with pytest.raises(ValueError):
        learned.motion("sleepy", 1.0)


# --------------------------------------------------------------------------------------------
# The stack judgement (pure logic over stacks)
# --------------------------------------------------------------------------------------------


def _thread(*functions, line: int = 1) -> ThreadStack:
    frames = [Frame(function=fn, file="job.py", line=line) for fn in functions]
    return ThreadStack(tid=100, name="MainThread", state="active", frames=frames)


def test_motion_tells_stuck_busy_and_moving_apart():
    # idle in a wait: stuck, whatever the stack
    idle = MotionTracker()
    idle.begin(0.0)
    idle.add(100, _thread("sleep", "wait_for_batch", "main"), 1.0)
    assert idle.verdict({100: 0.5}, threshold=2.0) == "stuck"
    # computing, its chain of functions changing: moving
    moving = MotionTracker()
    moving.begin(0.0)
    moving.add(100, _thread("embed", "scoring_pass", "main"), 1.0)
    assert moving.verdict({100: 95.0}, threshold=2.0) is None  # one sample cannot tell
    assert moving.verdict({100: 95.0}, threshold=2.0, final=True) == "busy"
    moving.add(100, _thread("score", "score", "scoring_pass", "main"), 1.3)
    assert moving.verdict({100: 95.0}, threshold=2.0) == "moving"
    # a launcher waiting while its rank computes through changing functions: the job is moving
    assert moving.verdict({1: 0.0, 100: 95.0}, threshold=2.0) == "moving"
    # computing on one chain of functions, lines changing, long enough: busy (a loop, or one long function)
    loop = MotionTracker()
    loop.begin(0.0)
    for i in range(LOOP_SAMPLES):
        loop.add(100, _thread("spin_until_ready", "main", line=i % 2 + 1), 1.0 + 0.3 * i)
    assert loop.verdict({100: 99.0}, threshold=10.0) is None  # 0.9 s of one chain: not yet half of 10 s
    assert loop.verdict({100: 99.0}, threshold=1.6) == "busy"
    # frozen, line for line, in a wait while another thread spins (NCCL): stuck
    frozen = MotionTracker()
    frozen.begin(0.0)
    for i in range(LOOP_SAMPLES):
        frozen.add(100, _thread("wait", "all_reduce", "train_step"), 1.0 + 0.5 * i)
    assert frozen.verdict({100: 100.0}, threshold=2.0) == "stuck"
    # its CPU use not known yet, py-spy sees the thread off the CPU: stuck
    unknown = MotionTracker()
    unknown.begin(0.0)
    unknown.add(100, ThreadStack(tid=100, name="MainThread", state="idle", frames=_thread("sleep").frames), 1.0)
    assert unknown.verdict({100: None}, threshold=2.0) == "stuck"
    # a new silence forgets the samples of the last one
    frozen.begin(10.0)
    assert frozen.verdict({100: 100.0}, threshold=2.0, final=True) == "blind"  # computing, no stack seen
    assert frozen.verdict({1: 0.0, 100: 100.0}, threshold=2.0) == "blind"  # a launcher waits, its rank computes


# --------------------------------------------------------------------------------------------
# Real jobs
# --------------------------------------------------------------------------------------------


@pytest.fixture
def watch(request, tmp_path):
    def start(*args) -> WatchRun:
        run = WatchRun(args, tmp_path, tmp_path / "state")
        request.addfinalizer(run.kill)
        return run

    return start


@pytest.fixture
def zoo_dir(tmp_path, monkeypatch):
    """The busy job's markers (PASSES, FINAL) land here: watch passes its environment on."""
    path = tmp_path / "zoo"
    path.mkdir()
    monkeypatch.setenv("ZOO_WORKDIR", str(path))
    return path


def _busy_job(*args) -> list:
    return ["--", sys.executable, BUSY_JOB, *args]


def _marker(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def test_busy_scoring_passes_are_never_a_stall_and_never_restarted(watch, tmp_path, zoo_dir):
    # The floor (2 s) is far below the 4 s passes, and 80 steps between two passes push each pass's
    # interval out of the 20 the threshold remembers: without the stacks' word every pass is a stall.
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "restart", "--floor", "2", "--progress-every", "0",
        "--report-dir", tmp_path / "reports",
        *_busy_job("--passes", "2", "--pass-seconds", "4", "--then", "finish"),
    )  # fmt: skip
    assert run.finish(150) == 0, run.stderr
    assert _marker(zoo_dir / "PASSES")["passes"] == 2
    assert run.of("stall") == [], run.of("stall")
    assert run.of("restarted") == [] and run.of("action") == [] and run.of("report") == []
    exited = run.wait_for("exited", 1)
    assert exited["code"] == 0 and exited["last_step"] == _marker(zoo_dir / "FINAL")["step"]
    busy = [e for e in run.of("phase") if e["phase"] == "busy"]
    assert busy and busy[0]["motion"] == "moving" and busy[0]["allowance"] >= 60.0, busy
    assert "busy_phases.py" in (busy[0]["frame"] or ""), busy


def test_a_job_that_freezes_after_learned_busy_passes_is_still_caught_at_the_floor(watch, tmp_path, zoo_dir):
    run = watch(
        "watch", "--format", "json", "--quiet", "--floor", "2", "--progress-every", "0",
        "--report-dir", tmp_path / "reports",
        *_busy_job("--passes", "1", "--pass-seconds", "4", "--then", "freeze"),
    )  # fmt: skip
    stall = run.wait_for("stall", 120)
    final = _marker(zoo_dir / "FINAL")
    assert final and stall["last_step"] == final["step"], (stall, final)  # no stall before the freeze
    assert stall["rule"] == "steps" and stall["evidence"]["motion"] == "stuck", stall
    assert stall["threshold"] < 4.0, stall  # the floor, not 2 x the learned 4 s passes
    assert stall["seconds"] <= stall["threshold"] + 4.0, stall
    assert "wait_for_batch" in stall["evidence"]["stack"], stall
    assert run.proc.poll() is None  # report mode: watching on


def test_a_job_spinning_on_one_chain_of_functions_is_a_stall(watch, tmp_path, zoo_dir):
    run = watch(
        "watch", "--format", "json", "--quiet", "--floor", "2", "--progress-every", "0",
        "--report-dir", tmp_path / "reports",
        *_busy_job("--passes", "0", "--every", "30", "--then", "spin"),
    )  # fmt: skip
    stall = run.wait_for("stall", 90)
    assert stall["last_step"] == _marker(zoo_dir / "FINAL")["step"]
    assert stall["rule"] == "steps" and stall["evidence"]["motion"] == "busy", stall
    assert stall["threshold"] < 4.0 and stall["seconds"] <= stall["threshold"] + 5.0, stall
    assert "spin_until_ready" in stall["evidence"]["stack"], stall


def test_an_endless_busy_pass_is_caught_at_its_allowance(watch, tmp_path, zoo_dir):
    # One 3 s pass is learned; the next never ends. It moves all along, so it is a busy phase, and
    # its allowance (--phase-multiple 3 x the 2 s floor, at least 2 x the learned 3 s) runs out.
    run = watch(
        "watch", "--format", "json", "--quiet", "--floor", "2", "--phase-multiple", "3", "--progress-every", "0",
        "--report-dir", tmp_path / "reports",
        *_busy_job("--passes", "1", "--pass-seconds", "3", "--then", "endless"),
    )  # fmt: skip
    stall = run.wait_for("stall", 120)
    assert stall["last_step"] == _marker(zoo_dir / "FINAL")["step"]
    assert (stall["rule"], stall["phase"]) == ("phase-limit", "busy"), stall
    assert 6.0 <= stall["threshold"] <= 12.0 and stall["seconds"] >= stall["threshold"], stall


# --------------------------------------------------------------------------------------------
# Item 8: no report on disk, no stop or restart
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("on_hang", ["stop", "restart"])
def test_no_stop_or_restart_when_the_report_cannot_be_written(watch, tmp_path, request, on_hang):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    go = tmp_path / "go"
    job = start_logged_job(
        tmp_path, request,
        [sys.executable, TARGETS / "watch_hang.py", "--hang-at", "6", "--always", "--start-when", go],
    )  # fmt: skip
    run = watch(
        "watch", "--pid", job.pid, "--format", "json", "--floor", "3", "--on-hang", on_hang, "--grace", "2",
        "--report-dir", in_the_way / "reports",
    )  # fmt: skip
    run.wait_for("started", 30)
    go.touch()
    refused = run.wait_until(lambda e: e["event"] == "warning" and e.get("refused"), 120)
    assert refused["refused"] == on_hang and refused["pid"] == job.pid
    assert "could not be written" in refused["message"] and "--report-dir" in refused["message"]
    report = run.wait_for("report", 1)
    assert not report.get("paths") and "could not write the report" in report["error"]
    assert run.of("stall")[0]["last_step"] == 5
    assert run.of("action") == [] and run.of("restarted") == []
    assert job.poll() is None and run.proc.poll() is None  # the job runs on, and so does the watch
    deadline = time.monotonic() + 10
    while f"did not {on_hang} pid" not in run.stderr and time.monotonic() < deadline:
        time.sleep(0.1)
    said = [line for line in run.stderr.splitlines() if f"did not {on_hang} pid {job.pid}" in line]
    assert len(said) == 1 and "could not be written" in said[0], run.stderr
    os.killpg(job.pid, signal.SIGKILL)  # the job ends: the watch ends, its status says it did not act
    job.wait(timeout=10)
    assert run.finish(60) == EXIT_USAGE
    assert run.wait_for("exited", 1)["pid"] == job.pid
