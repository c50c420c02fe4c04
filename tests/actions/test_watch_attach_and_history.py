"""`watch --pid` and `history` on real jobs, watched as a user does.

Every watcher runs as a subprocess printing JSON events (watch_runs.WatchRun); it, every job it
launched (each in a session of its own) and every job the test started itself are killed by
process group / PID in a finalizer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from watch_runs import TARGETS, WatchRun, start_logged_job

from debug_stuck.actions.journal import Incident, Journal

pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watch reads /proc"),
]

# A training script with no resume option: it saves ckpt.pt (torch.save's zip layout) every 3 steps
# but never loads it, so a relaunch starts over at step 1. It hangs at --hang-at on its first run only.
NO_RESUME_OPTION = """
import argparse, os, pickle, time, zipfile

def wait_for_peers():
    while True:
        time.sleep(3600)

def save_checkpoint(step):
    with zipfile.ZipFile("ckpt.pt.tmp", "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"step": step}, protocol=2))
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\\n")
    os.replace("ckpt.pt.tmp", "ckpt.pt")
    print(f"saved checkpoint step {step}", flush=True)

parser = argparse.ArgumentParser()
parser.add_argument("--hang-at", type=int, default=8)
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()
for step in range(1, args.steps + 1):
    if step == args.hang_at and not os.path.exists("hung-once"):
        open("hung-once", "w").close()
        wait_for_peers()
    time.sleep(0.2)
    print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    if step % 3 == 0:
        save_checkpoint(step)
print("training done", flush=True)
"""

# Under torchrun: two ranks step together (rank 0 prints the steps) and both hang in stuck_in_rank at
# step 10; the launcher itself only waits in its monitor loop.
TORCHRUN_RANKS = """
import os, time

def stuck_in_rank():
    while True:
        time.sleep(3600)

rank = int(os.environ["RANK"])
for step in range(1, 100):
    if step == 10:
        stuck_in_rank()
    time.sleep(0.3)
    if rank == 0:
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
"""


@pytest.fixture
def watch(request, tmp_path):
    def start(*args, cwd: Path | None = None) -> WatchRun:
        run = WatchRun(args, cwd or tmp_path, tmp_path / "state")
        request.addfinalizer(run.kill)
        return run

    return start


@pytest.fixture
def journal(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(tmp_path / "state"))
    return Journal()


def _wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# --------------------------------------------------------------------------------------------
# 7. one log, read once
# --------------------------------------------------------------------------------------------


def test_unique_logs_names_one_file_once_by_real_path_and_inode(tmp_path, monkeypatch):
    from debug_stuck.actions.watch.follow import unique_logs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    log = tmp_path / "d" / "job.log"
    log.write_text("step 1\n")
    (tmp_path / "link.log").symlink_to(log)
    os.link(log, tmp_path / "hard.log")
    found = unique_logs(["d/job.log", str(log), "./d/../d/job.log", "link.log", "hard.log", "later.log"])
    assert found == [os.path.realpath(log), str(tmp_path / "later.log")]


def test_under_the_default_report_dir_the_jobs_log_is_read_once(watch, tmp_path):
    # The default --report-dir is relative: the job's log used to be read under that name and again
    # as the job's stdout (absolute), "two logs stopped at steps 5, 5" made step=same-step.
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "stop", "--floor", "3", "--grace", "2",
        "--", sys.executable, TARGETS / "watch_hang.py", "--hang-at", "6", "--always", "--interval", "0.3",
    )  # fmt: skip
    started = run.wait_for("started", 30)
    assert Path(started["log"]).is_absolute()
    assert Path(started["log"]).parent == tmp_path / "debug-stuck-reports"
    report = run.wait_for("report", 90)
    doc = json.loads(Path(report["paths"]["json"]).read_text())
    paths = [entry["path"] for entry in doc["logs"]]
    assert paths == [os.path.realpath(started["log"])], paths
    step = doc["answers"].get("step") or {}
    assert step.get("value") != "same-step", step  # one stall, one log: nothing says "same step"
    assert "logs stopped at steps" not in json.dumps(doc)
    assert run.finish(60) != 0


# --------------------------------------------------------------------------------------------
# 9. what is lost is true
# --------------------------------------------------------------------------------------------


def test_restarting_a_script_without_a_resume_option_says_it_starts_over(watch, tmp_path, journal):
    script = tmp_path / "train_no_resume.py"
    script.write_text(NO_RESUME_OPTION)
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "restart", "--floor", "3",
        "--report-dir", tmp_path / "reports", "--", sys.executable, script, "--hang-at", "8", "--steps", "10",
    )  # fmt: skip
    restarted = run.wait_for("restarted", 90)
    assert restarted["lost"].startswith("everything: it restarts from step 0"), restarted["lost"]
    assert restarted["checkpoint"] is None and restarted["checkpoint_step"] is None
    assert restarted["command"] == [sys.executable, str(script), "--hang-at", "8", "--steps", "10"]
    warnings = [w["message"] for w in run.of("warning")]
    assert any("does not resume from" in m and "step 6" in m and "step 0" in m for m in warnings), warnings
    assert run.finish(60) == 0
    second = Path(restarted["log"]).read_text()
    assert second.startswith("step 1 loss")  # true to what the relaunch did
    [incident] = journal.incidents()
    assert incident.outcome.endswith("from step 0 (no resume option)"), incident.outcome


# --------------------------------------------------------------------------------------------
# 10. attaching to a job that already hung
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_attaching_to_a_job_silent_for_a_while_judges_at_once(watch, tmp_path, request):
    job = start_logged_job(
        tmp_path,
        request,
        [sys.executable, TARGETS / "watch_hang.py", "--hang-at", "6", "--always", "--interval", "0.2"],
    )
    log = tmp_path / "job.log"
    _wait_until(lambda: "step 5 loss" in log.read_text(), 30, "step 5 in the log")
    _wait_until(lambda: time.time() - log.stat().st_mtime > 6.0, 30, "the log to be silent for 6 s")
    assert job.poll() is None
    # The start-up allowance stays at its default (300 s): only the log's history can judge this soon.
    run = watch("watch", "--pid", job.pid, "--format", "json", "--floor", "3", "--report-dir", tmp_path / "reports")
    started = run.wait_for("started", 30)
    assert started["attached"] and started["threshold"] < 300
    stall = run.wait_for("stall", 45)
    assert stall["rule"] == "steps" and stall["last_step"] == 5 and stall["seconds"] > 6.0
    assert stall["time"] - started["time"] < 30


@pytest.mark.timeout(90)
def test_attaching_to_a_job_that_steps_raises_no_alarm(watch, tmp_path, request):
    job = start_logged_job(
        tmp_path, request, [sys.executable, TARGETS / "watch_hang.py", "--steps", "1000", "--hang-at", "1000",
                            "--interval", "0.3"],
    )  # fmt: skip
    log = tmp_path / "job.log"
    _wait_until(lambda: "step 4 loss" in log.read_text(), 30, "step 4 in the log")
    run = watch(
        "watch", "--pid", job.pid, "--format", "json", "--floor", "3", "--progress-every", "1",
        "--report-dir", tmp_path / "reports",
    )  # fmt: skip
    run.wait_for("started", 30)
    _wait_until(
        lambda: any((e.get("step") or 0) >= 20 for e in run.of("progress")), 60, "progress past step 20 while attached"
    )
    assert run.of("stall") == [] and job.poll() is None


# --------------------------------------------------------------------------------------------
# 11. history: absolute paths, and the end of a restarted job
# --------------------------------------------------------------------------------------------


def test_the_journal_stores_absolute_report_paths(journal, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    incident_id = journal.record(
        Incident(time=time.time(), command="python train.py", report_markdown="reports/i.md", report_json="r/i.json")
    )
    journal.update(incident_id, report_markdown="other/i.md")
    [back] = journal.incidents()
    assert back.report_json == str(tmp_path / "r" / "i.json")
    assert back.report_markdown == str(tmp_path / "other" / "i.md")


def test_a_journal_from_before_keeps_working_and_gets_the_end_columns(journal):
    import sqlite3

    journal.path.parent.mkdir(parents=True)
    with sqlite3.connect(str(journal.path)) as conn:  # schema version 1, as an earlier release wrote it
        conn.execute("CREATE TABLE incidents (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, command TEXT)")
        conn.execute("INSERT INTO incidents (time, command) VALUES (1.0, 'python old.py')")
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert [i.command for i in journal.incidents()] == ["python old.py"]
    journal.update(1, ended="pid 1 finished (exit code 0)", end_code=0)
    [back] = journal.incidents()
    assert (back.ended, back.end_code) == ("pid 1 finished (exit code 0)", 0)


def test_history_records_that_a_restarted_job_finished(watch, tmp_path, journal, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "restart", "--floor", "3",
        "--", sys.executable, TARGETS / "watch_hang.py", "--hang-at", "7", "--steps", "11", "--every", "3",
    )  # fmt: skip
    assert run.finish(120) == 0
    restarted = run.wait_for("restarted", 1)
    [incident] = journal.incidents()
    assert incident.action == "restart"
    assert incident.end_code == 0 and "finished (exit code 0)" in incident.ended, incident.ended
    assert f"pid {restarted['pid']}" in incident.ended and "step 11" in incident.ended
    # the report opens from anywhere: history's paths do not depend on where watch ran
    os.chdir(elsewhere)
    try:
        from conftest import parse_cli
        from debug_stuck.frontends.commands.history import run as history

        assert history(parse_cli("history", "--format", "json")) == 0
        doc = json.loads(capsys.readouterr().out)
        [entry] = doc["incidents"]
        assert Path(entry["report_json"]).is_absolute() and Path(entry["report_json"]).is_file()
        assert entry["end_code"] == 0 and entry["ended"] == incident.ended
        assert history(parse_cli("history")) == 0
        text = capsys.readouterr().out
        assert f"later: {incident.ended}" in text and "outcome: restarted as pid" in text
    finally:
        os.chdir(tmp_path)


# --------------------------------------------------------------------------------------------
# 12. a rank's stack under torchrun; a forwarded signal is not "ended by itself"
# --------------------------------------------------------------------------------------------


def test_under_torchrun_the_stall_line_shows_a_ranks_stack(watch, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "ranks.py"
    script.write_text(TORCHRUN_RANKS)
    run = watch(
        "watch", "--format", "json", "--quiet", "--on-hang", "stop", "--floor", "3", "--grace", "3",
        "--report-dir", tmp_path / "reports",
        "--", sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=0", script,
    )  # fmt: skip
    started = run.wait_for("started", 30)
    log = Path(started["log"])
    _wait_until(lambda: "step 9 loss" in log.read_text(), 90, "step 9 under torchrun")
    stall = run.wait_for("stall", 60)
    evidence = stall["evidence"]
    assert "stuck_in_rank" in evidence["stack"], evidence  # not the launcher's monitor loop
    assert evidence["stack_pid"] != started["pid"]
    from debug_stuck.frontends.commands.watch import describe_event

    assert f"main thread of pid {evidence['stack_pid']} in" in describe_event(stall)
    assert run.finish(60) != 0


def test_a_signal_watch_passed_on_is_not_an_end_by_itself(watch, tmp_path):
    run = watch(
        "watch", "--format", "json", "--quiet", "--report-dir", tmp_path / "reports",
        "--", sys.executable, TARGETS / "watch_hang.py", "--steps", "1000", "--hang-at", "1000", "--interval", "0.2",
    )  # fmt: skip
    started = run.wait_for("started", 30)
    log = Path(started["log"])
    _wait_until(lambda: log.exists() and "step 2 loss" in log.read_text(), 30, "step 2 in the job's log")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.finish(30) == 128 + signal.SIGTERM
    exited = run.wait_for("exited", 1)
    assert exited["code"] == 128 + signal.SIGTERM and exited["forwarded"] == "SIGTERM"
    from debug_stuck.frontends.commands.watch import describe_event

    line = describe_event(exited)
    assert "ended by itself" not in line and "stopped by the SIGTERM watch passed on" in line
    assert not psutil.pid_exists(started["pid"]) or psutil.Process(started["pid"]).status() == "zombie"
