"""`debug-stuck watch`: the stall clock, phase recognition, and the watcher on real jobs.

The real-process tests run the watcher as a user does (a subprocess printing JSON events) on the
targets in tests/targets: a healthy job with irregular steps and a slow checkpoint (no alarm), a
job that hangs once at step N (flagged, reported, restarted from its checkpoint, goes past N), and
one that hangs at the same step every time (restarted once, then given up). Every watcher and every
job it launches (each in a session of its own) is killed by process group in a finalizer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from watch_runs import TARGETS, WatchRun, start_logged_job

from debug_stuck.actions.watch.clock import StallClock
from debug_stuck.actions.watch.follow import LogFollower
from debug_stuck.actions.watch.settings import EXIT_STALLED
from debug_stuck.core.phases import phase_of
from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.probes.collectors.stacks import Frame

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watch reads /proc"),
]

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# The stall clock (pure logic, simulated time)
# --------------------------------------------------------------------------------------------


def _stepped(clock: StallClock, times) -> None:
    for step, at in enumerate(times, start=1):
        clock.step(step, at)


def test_threshold_adapts_to_the_step_interval_with_a_floor():
    fast = StallClock(started_at=0.0)
    _stepped(fast, [1.0 + i for i in range(10)])  # a step every second
    assert fast.threshold() == 10.0  # the floor wins over 8 x 1 s
    slow = StallClock(started_at=0.0)
    _stepped(slow, [5.0 * i for i in range(1, 10)])  # a step every 5 s
    assert slow.threshold() == 40.0  # 8 x the median interval: a slow job is not a hung one
    assert slow.check(45.0 + 39.0) is None
    stall = slow.check(45.0 + 41.0)
    assert stall is not None and stall.rule == "steps" and stall.seconds == pytest.approx(41.0)


def test_irregular_steps_with_a_periodic_slow_one_never_stall():
    clock = StallClock(floor=3.0, multiple=3.0, started_at=0.0)
    gaps = [0.5, 1.6, 0.4, 1.1, 0.7, 1.5, 0.4, 4.5] * 6  # every 8th step takes ~4x the usual
    at = 0.0
    for step, gap in enumerate(gaps, start=1):
        # check every 0.25 s between two steps: no stall anywhere once the rhythm is known
        probe = at + 0.25
        while probe < at + gap:
            if step > 9:
                assert clock.check(probe) is None, (step, probe - at)
            probe += 0.25
        at += gap
        clock.step(step, at)
    assert clock.threshold() == pytest.approx(9.0)  # 2 x the longest recent interval


def test_startup_counts_any_activity_and_stalls_only_when_nothing_moves():
    clock = StallClock(startup=60.0, started_at=0.0)
    assert not clock.stepping
    for t in range(0, 200, 10):
        clock.activity(float(t))  # imports, compile, data: CPU and I/O, no step yet
        assert clock.check(float(t) + 5) is None
    stall = clock.check(190.0 + 61.0)
    assert stall is not None and stall.rule == "startup"


def test_a_checkpoint_phase_gets_its_allowance_while_it_shows_activity():
    clock = StallClock(floor=10.0, multiple=8.0, phase_multiple=30.0, started_at=0.0)
    _stepped(clock, [1.0 + i for i in range(10)])  # last step at t=10, threshold 10 s
    assert clock.in_phase("checkpoint", "save (torch/serialization.py:1)")
    assert not clock.in_phase("checkpoint", "save (torch/serialization.py:1)")  # told once
    for t in range(11, 200):
        clock.activity(float(t))  # the save writes all along
        assert clock.check(float(t) + 0.5) is None
    # silent for longer than the base threshold inside the phase: a stuck save
    stall = clock.check(199.0 + 10.5)
    assert stall is not None and stall.rule == "phase-idle" and stall.phase == "checkpoint"
    # and a phase that never ends is a stall at the allowance even while busy
    busy = StallClock(floor=10.0, phase_multiple=30.0, started_at=0.0)
    _stepped(busy, [1.0 + i for i in range(10)])
    busy.in_phase("validation", "evaluate (train.py:9)")
    busy.activity(10.0 + 301.0)
    stall = busy.check(10.0 + 301.0)
    assert stall is not None and stall.rule == "phase-limit" and stall.threshold == 300.0
    busy.step(11, 312.0)  # a new step ends the phase
    assert busy.phase is None


def test_a_restarted_run_keeps_the_rhythm_but_not_the_steps():
    clock = StallClock(started_at=0.0)
    _stepped(clock, [2.0 * i for i in range(1, 8)])
    again = StallClock.carried_over(clock, now=100.0)
    assert again.max_step is None and not again.stepping
    again.step(5, 103.0)
    assert again.stepping and again.threshold() == clock.threshold()


# --------------------------------------------------------------------------------------------
# Phases from stacks, log following
# --------------------------------------------------------------------------------------------


def _frames(*specs):
    return [Frame(function=fn, file=file, line=1) for fn, file in specs]


@pytest.mark.parametrize(
    "frames, phase",
    [
        (_frames(("write", "torch/serialization.py"), ("save", "torch/serialization.py")), "checkpoint"),
        (_frames(("sleep", "x.py"), ("save_checkpoint", "train.py"), ("main", "train.py")), "checkpoint"),
        (_frames(("save_file", "safetensors/torch.py"), ("main", "train.py")), "checkpoint"),
        (_frames(("forward", "model.py"), ("evaluate", "trainer.py"), ("main", "train.py")), "validation"),
        (_frames(("forward", "model.py"), ("run", "eval_utils.py")), "validation"),
        # activation checkpointing runs in every forward pass: not a save
        (_frames(("checkpoint", "torch/utils/checkpoint.py"), ("forward", "model.py")), None),
        # every layer of a transformers 5 model runs its forward through GradientCheckpointingLayer
        (
            _frames(
                ("forward", "modeling_bert.py"),
                ("forward_with_checkpointing", "transformers/modeling_layers.py"),
                ("prediction_step", "transformers/trainer.py"),
            ),
            "validation",
        ),  # fmt: skip
        (_frames(("gradient_checkpointing_enable", "transformers/modeling_utils.py"), ("main", "train.py")), None),
        (_frames(("all_reduce", "torch/distributed/distributed_c10d.py"), ("train_step", "train.py")), None),
        (_frames(("fetch", "retrieval.py"), ("main", "train.py")), None),
        # compiling: a frame the frame table says compiles; a compiled model's forward pass is not
        (_frames(("node_repr", "torch/fx/graph.py"), ("_compile", "torch/_dynamo/convert_frame.py")), "compile"),
        (_frames(("_fn", "torch/_dynamo/eval_frame.py"), ("train_step", "train.py")), None),
    ],
)
def test_phase_of_recognises_checkpoint_and_validation_frames(knowledge, frames, phase):
    found = phase_of(frames, knowledge)
    assert (found[0] if found else None) == phase


def test_log_follower_reads_new_lines_tqdm_redraws_and_truncation(tmp_path):
    log = tmp_path / "log.txt"
    log.write_bytes(b"old line\n")
    echoed = []
    follower = LogFollower(str(log), echo=echoed.append, from_end=True)
    assert follower.read() == ([], False)
    with open(log, "ab") as fh:
        fh.write(b"step 1 loss 0.5\nstep 2 lo")
    lines, grew = follower.read()
    assert grew and lines == ["step 1 loss 0.5"]  # the half-written line waits for its end
    with open(log, "ab") as fh:
        fh.write(b"ss 0.4\n 10%|#         | 10/100 [00:01<00:09,  9.9it/s]\r 11%|#  | 11/100 [00:01<00:09, 9.9it/s]\r")
    lines, _ = follower.read()
    assert lines[0] == "step 2 loss 0.4" and "11/100" in lines[-1]
    assert b"".join(echoed).startswith(b"step 1 loss 0.5\nstep 2 lo")
    log.write_bytes(b"step 1 again\n")  # truncated: start over
    assert follower.read()[0] == ["step 1 again"]


def test_commands_in_events_and_the_journal_have_their_secrets_blanked():
    from debug_stuck.redact import redact_argv as redact_command

    argv = ["python", "train.py", "--hf_token", "hf_abcdefghijklmnopqrstuvwxyz", "--api-key=s3cr3t", "--lr", "0.1"]
    argv += ["ghp_abcdefghijklmnopqrstuvwxyz0123", "--save_dir", "out"]
    assert redact_command(argv) == [
        "python", "train.py", "--hf_token", "<redacted>", "--api-key=<redacted>", "--lr", "0.1",
        "<redacted>", "--save_dir", "out",
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# The command line: bad input
# --------------------------------------------------------------------------------------------


def _parse(*argv):
    from conftest import parse_cli

    return parse_cli(*argv)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["watch"], "nothing to watch"),
        (["watch", "--pid", "1", "--", "python", "x.py"], "not both"),
        (["watch", "--poll", "0", "--", "true"], "--poll 0 is out of range"),
        (["watch", "--max-restarts", "-1", "--", "true"], "--max-restarts -1 is negative"),
        (["watch", "--floor", "0.1", "--", "true"], "--floor 0.1 is out of range"),
    ],
)
def test_watch_refuses_bad_usage_with_one_line(argv, message):
    from debug_stuck.frontends.commands.watch import run

    with pytest.raises(BadInput) as err:
        run(_parse(*argv))
    assert message in err.value.one_line() and "\n" not in err.value.one_line()


def test_watch_a_pid_that_does_not_exist_is_not_inspectable():
    from debug_stuck.frontends.commands.watch import run

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with pytest.raises(NotInspectable):
        run(_parse("watch", "--pid", str(dead.pid)))


def test_watch_a_command_that_does_not_exist(tmp_path, monkeypatch):
    from debug_stuck.frontends.commands.watch import run

    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(BadInput, match="command not found"):
        run(_parse("watch", "--report-dir", str(tmp_path), "--", "no-such-program-xyz"))


# --------------------------------------------------------------------------------------------
# Real jobs
# --------------------------------------------------------------------------------------------


@pytest.fixture
def watch(request, tmp_path):
    def start(*args, cwd: Path | None = None, state: Path | None = None) -> WatchRun:
        run = WatchRun(args, cwd or tmp_path, state or tmp_path / "state")
        request.addfinalizer(run.kill)
        return run

    return start


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _journal(tmp_path, monkeypatch):
    from debug_stuck.actions.journal import Journal

    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def test_healthy_irregular_job_with_a_slow_checkpoint_raises_no_alarm(watch, tmp_path):
    # Tight settings (threshold ~3 s) on purpose: the 3.5 s checkpoint save would be a stall
    # without the phase allowance, so this shows the allowance at work, not just a generous floor.
    run = watch(
        "watch", "--format", "json", "--floor", "3", "--multiple", "2", "--progress-every", "5",
        "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_irregular.py", "--steps", "13", "--interval", "1",
        "--checkpoint-every", "6", "--save-factor", "3.5",
    )  # fmt: skip
    started = run.wait_for("started", 30)
    assert started["pid"] > 0 and not started["attached"]
    assert run.finish(90) == 0
    exited = run.wait_for("exited", 1)
    assert exited["code"] == 0 and exited["last_step"] == 13
    assert run.of("stall") == [], run.of("stall")
    phases = run.of("phase")
    assert phases and phases[0]["phase"] == "checkpoint" and "save_checkpoint" in phases[0]["frame"]
    assert any(e["step"] is not None for e in run.of("progress"))
    log = Path(started["log"]).read_text()
    assert "step 13 loss" in log and "training done" in log
    assert "step 13 loss" in run.stderr  # teed: JSON on stdout, the job's output on stderr


def test_a_job_that_hangs_once_is_reported_restarted_from_its_checkpoint_and_goes_on(watch, tmp_path, monkeypatch):
    run = watch(
        "watch", "--format", "json", "--on-hang", "restart", "--floor", "4", "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--hang-at", "7", "--steps", "11", "--every", "3",
    )  # fmt: skip
    first = run.wait_for("started", 30)
    stall = run.wait_for("stall", 40)
    assert stall["pid"] == first["pid"] and stall["last_step"] == 6 and stall["seconds"] >= 4.0
    assert "wait_for_peers" in stall["evidence"]["stack"]
    report = run.wait_for("report", 60)
    md, js = Path(report["paths"]["markdown"]), Path(report["paths"]["json"])
    assert md.is_file() and js.is_file()
    doc = json.loads(js.read_text())
    assert doc["schema_version"] and doc["verdict"]["hung"] is not False
    assert any("no new step" in note for note in doc.get("notes", []))
    action = run.wait_for("action", 30)
    assert action["action"] == "restart" and action["pid"] == first["pid"]
    restarted = run.wait_for("restarted", 30)
    assert restarted["pid"] != first["pid"] and restarted["attempt"] == 1
    # the resume plan: the newest valid checkpoint, passed with the script's --resume
    assert restarted["checkpoint"] == str(tmp_path / "ckpt.pt") and restarted["checkpoint_step"] == 6
    assert restarted["command"][-2:] == ["--resume", str(tmp_path / "ckpt.pt")]
    assert action["via"].startswith("stop_job") and first["pid"] in action["stopped"]
    assert run.finish(60) == 0
    exited = run.wait_for("exited", 1)
    assert exited["pid"] == restarted["pid"] and exited["code"] == 0 and exited["last_step"] == 11
    assert _gone(first["pid"])
    second_log = Path(restarted["log"]).read_text()
    assert "resumed from checkpoint step 6" in second_log and "step 8 loss" in second_log
    assert run.of("gave-up") == []
    incidents = _journal(tmp_path, monkeypatch).incidents()
    assert len(incidents) == 1 and incidents[0].last_step == 6 and incidents[0].action == "restart"
    assert incidents[0].report_json == str(js) and incidents[0].pid == first["pid"]


def test_a_job_that_hangs_at_the_same_step_every_time_is_not_restarted_forever(watch, tmp_path, monkeypatch, capsys):
    run = watch(
        "watch", "--format", "json", "--on-hang", "restart", "--max-restarts", "3", "--floor", "4",
        "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--hang-at", "5", "--steps", "20", "--always",
    )  # fmt: skip
    assert run.finish(100) == EXIT_STALLED
    kinds = [e["event"] for e in run.events]
    assert kinds.count("stall") == 2 and kinds.count("restarted") == 1, kinds
    gave_up = run.wait_for("gave-up", 1)
    assert "no progress since the last restart" in gave_up["reason"] and gave_up["restarts"] == 1
    assert kinds.index("gave-up") > kinds.index("restarted")
    assert all(_gone(pid) for pid in run.job_pids)  # both runs ended: nothing left behind
    journal = _journal(tmp_path, monkeypatch)
    incidents = journal.incidents()
    assert [i.action for i in incidents] == ["gave-up", "restart"]  # newest first
    assert {i.last_step for i in incidents} == {4}
    from debug_stuck.frontends.commands.history import run as cli_run

    assert cli_run(_parse("history", "--format", "json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 2
    top = doc["patterns"][0]  # both incidents are of the command the user gave, resume options aside
    assert (top["kind"], top["count"], top["last_step"]) == ("same-step", 2, 4) and top["recurring"]
    assert top["command"].endswith("--always")
    assert cli_run(_parse("history")) == 0
    text = capsys.readouterr().out
    assert "2 incident(s)" in text and "2x  same step 4" in text


def test_a_journal_that_cannot_be_written_costs_a_warning_not_the_watch(watch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "stop", "--floor", "2", "--grace", "2",
        "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--hang-at", "5", "--always",
        state=blocker / "state",
    )  # fmt: skip
    assert run.finish(60) == EXIT_STALLED
    kinds = [e["event"] for e in run.events]
    assert kinds[:2] == ["started", "stall"] and "report" in kinds and kinds[-1] == "action", kinds
    warning = run.wait_for("warning", 1)
    assert "journal" in warning["message"] and "\n" not in warning["message"]
    assert run.of("action")[0]["action"] == "stop"


def test_ctrl_c_to_the_watcher_is_passed_on_to_the_job_it_launched(watch, tmp_path):
    run = watch(
        "watch", "--format", "json", "--quiet", "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--steps", "1000", "--hang-at", "1000", "--interval", "0.2",
    )  # fmt: skip
    started = run.wait_for("started", 30)
    log = Path(started["log"])
    deadline = time.monotonic() + 30
    while "step 3 " not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(run.proc.pid, signal.SIGINT)  # what Ctrl-C sends; the job, in its own session, does not get it
    assert run.finish(30) == 128 + signal.SIGINT
    exited = run.wait_for("exited", 1)
    assert exited["pid"] == started["pid"] and exited["code"] == 128 + signal.SIGINT
    assert _gone(started["pid"]) and "KeyboardInterrupt" in log.read_text()


def _start_logged_job(tmp_path, request, *args) -> subprocess.Popen:
    """watch_hang.py with these arguments, started by the test (see start_logged_job)."""
    return start_logged_job(tmp_path, request, [sys.executable, TARGETS / "watch_hang.py", *args])


def test_attached_watch_flags_a_stall_and_keeps_watching(watch, tmp_path, request):
    go = tmp_path / "go"
    job = _start_logged_job(tmp_path, request, "--hang-at", "6", "--always", "--start-when", go)
    run = watch("watch", "--pid", job.pid, "--format", "json", "--floor", "3", "--report-dir", tmp_path / "reports")
    started = run.wait_for("started", 30)
    go.touch()  # steps start once the watcher is attached: it learns their rhythm from the first ones
    assert started["attached"] and started["logs"] == [str(tmp_path / "job.log")]
    stall = run.wait_for("stall", 40)
    assert stall["last_step"] == 5
    report = run.wait_for("report", 60)
    assert Path(report["paths"]["json"]).is_file()
    time.sleep(1.5)
    assert run.proc.poll() is None and job.poll() is None  # report only: the job is left as it is


def test_attached_watch_stops_the_job_on_hang(watch, tmp_path, request):
    go = tmp_path / "go"
    job = _start_logged_job(tmp_path, request, "--hang-at", "6", "--always", "--start-when", go)
    run = watch(
        "watch", "--pid", job.pid, "--format", "json", "--floor", "3", "--on-hang", "stop", "--grace", "3",
        "--report-dir", tmp_path / "reports",
    )  # fmt: skip
    run.wait_for("started", 30)
    go.touch()
    assert run.finish(60) == EXIT_STALLED
    assert run.of("stall") and run.of("report")
    assert run.of("action")[0]["action"] == "stop"
    job.wait(timeout=10)  # it was stopped, not left hanging


@pytest.mark.timeout(120)
def test_a_hooked_job_that_logs_nothing_makes_progress_through_its_heartbeat(watch, tmp_path, monkeypatch):
    # issue 16: the heartbeat of debug_stuck.hook is progress, like a step in the log. The job logs
    # nothing at all: without the heartbeat watch would see no step, only the start-up rule (300 s).
    monkeypatch.setenv("DEBUG_STUCK_HOOK_DIR", str(tmp_path / "hook"))
    stop = tmp_path / "stop-stepping"
    run = watch(
        "watch", "--format", "json", "--floor", "3", "--multiple", "2", "--progress-every", "1",
        "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "hooked_silent_job.py", "--stop-file", stop,
    )  # fmt: skip
    # watch reports the job stepping, from its heartbeat alone; then the job stops stepping
    run.wait_until(lambda e: e["event"] == "progress" and e["stepping"] and (e["step"] or 0) >= 5, 100)
    stop.touch()
    stall = run.wait_for("stall", 100)
    assert stall["rule"] == "steps", stall
    assert stall["last_step"] >= 5, stall


def test_a_job_that_hangs_in_its_exit_after_training_is_stopped_not_trained_again(watch, tmp_path):
    """Training done, Python's exit joins a non-daemon thread for ever: --on-hang restart stops it and
    says why instead of rerunning the training from its last checkpoint."""
    run = watch(
        "watch", "--format", "json", "--on-hang", "restart", "--floor", "4", "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--exit-hang", "--hang-at", "99", "--steps", "5",
        "--interval", "0.3",
    )  # fmt: skip
    first = run.wait_for("started", 30)
    run.wait_for("stall", 40)
    report = run.wait_for("report", 60)
    resume = json.loads(Path(report["paths"]["json"]).read_text())["resume"]
    assert "a rerun would train again" in resume["finished"], resume
    gave_up = run.wait_for("gave-up", 30)
    assert gave_up["reason"].startswith("not restarted: ") and "has run its main code to the end" in gave_up["reason"]
    assert run.finish(60) == EXIT_STALLED
    assert run.of("restarted") == [] and _gone(first["pid"])
