"""The questionary fallback (`debug-stuck --plain`), driven through prompt_toolkit pipe input to
the same report as the TUI; and the entry point's refusal without a terminal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from zoo.fixtures import zoo  # noqa: F401

pytest.importorskip("questionary")


from prompt_driving import ENTER, UP, drive  # noqa: E402

from conftest import example_request as load_example  # noqa: E402
from debug_stuck.frontends.session.core import Session  # noqa: E402


@pytest.mark.timeout(180)
def test_plain_session_on_a_hung_process_ends_at_the_report(knowledge, zoo, tmp_path):  # noqa: F811
    job = zoo("future_result")
    session = Session(knowledge, pids=[job.proc.pid], save_dir=str(tmp_path))
    keys = "".join(
        [
            ENTER,  # step 1: the job (listed first)
            "2" + ENTER,  # phase: mid-run
            "2" + ENTER,  # step: random
            ENTER,  # errors: the usual answer (none)
            ENTER,  # gpu: suggested
            ENTER,  # event: the usual answer (none)
            ENTER,  # cpu: suggested by the live evidence
            "1" + ENTER,  # what next: run a probe
            ENTER,  # the first probe offered (env)
            ENTER,  # what next: save
            ENTER,  # in the default directory
            ENTER,  # what next: quit
        ]
    )
    code, printed = drive(session, keys)
    assert code == 0, printed
    assert f"Attached: pid {job.proc.pid}" in printed
    assert "wait <- result <- main" in printed  # the live evidence: what the process is doing
    assert "Why we ask: Start-up hangs" in printed
    assert "Pre-filled from live evidence: training processes use at most" in printed
    assert "Cause: thread-deadlock" in printed
    assert "probe env: " in printed
    saved = sorted(tmp_path.glob("debug-stuck-report-*.json"))
    assert len(saved) == 1 and saved[0].with_suffix(".md").is_file()
    report = json.loads(saved[0].read_text())
    assert report["verdict"]["cause"] == "thread-deadlock"
    assert [p["name"] for p in report["probes"]] == ["env"]
    assert report["answers"]["phase"] == {"value": "mid-run", "source": "user"}
    assert report["answers"]["cpu"]["source"] == "evidence"


def test_plain_session_without_a_live_job_reads_the_log(knowledge, tmp_path):
    log = tmp_path / "train.log"
    shutil.copyfile(load_example(knowledge, "nanochat-collective").logs[0], log)
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []  # whatever runs on this machine, this user describes a dead job
    keys = "".join(
        [
            UP + ENTER,  # step 1: not running any more / describe it
            str(log) + ENTER,  # its log
            ENTER,  # phase: mid-run, suggested by the log
            "2" + ENTER,  # step: random
            ENTER,  # errors: none
            "2" + ENTER,  # gpu: busy
            ENTER,  # progress: stopped
            "1" + ENTER,  # power: low
            "2" + ENTER,  # what next (probe, copy, save, quit): copy the fixes
            ENTER,  # what next: save
            ENTER,  # in the default directory
            ENTER,  # what next: quit
        ]
    )
    code, printed = drive(session, keys)
    assert code == 0, printed
    assert "Pre-filled from the log: train.log shows step 4118 in this run" in printed
    assert "Cause: collective" in printed
    assert "copied" in printed or "printed when you quit" in printed
    report = json.loads(next(tmp_path.glob("debug-stuck-report-*.json")).read_text())
    assert report["verdict"]["cause"] == "collective" and report["pattern"] == "C"
    assert report["answers"]["phase"]["source"] == "log"


def test_ctrl_c_at_a_prompt_ends_the_session(knowledge, tmp_path):
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []
    code, printed = drive(session, "\x03")
    assert code == 130 and "interrupted" in printed
    assert session.stopping.is_set()


def test_without_a_terminal_the_session_says_to_use_diagnose(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "--plain"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a terminal" in lines[0] and "debug-stuck diagnose" in lines[0]
    assert result.stdout == ""


def test_plain_flag_on_the_top_level_parser():
    import argparse

    from debug_stuck.frontends.commands.interactive import register

    parser = argparse.ArgumentParser()
    register(parser)
    assert parser.parse_args(["--plain"]).plain is True
    assert parser.parse_args([]).plain is False


def test_interactive_cli_module_is_importable_without_textual_loaded():
    code = "import sys, debug_stuck.frontends.commands.interactive; print('textual' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
