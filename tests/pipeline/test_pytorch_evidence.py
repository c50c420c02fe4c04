"""PyTorch's own evidence in a diagnosis: Flight Recorder dumps handed over after the job is gone,
found from a live job's environment, and the compact agent view an AI agent relays."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import FIXTURES, run_subprocess

DUMPS = FIXTURES / "flight_recorder"  # a real 3-rank gloo job: rank 1 never reached all_reduce #3


def diagnose_json(*args, timeout=90):
    result = run_subprocess("diagnose", *args, "--format", "json", timeout=timeout)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("given", ["folder", "prefix", "files"])
def test_dumps_of_a_job_that_is_gone_name_the_cause_the_culprit_both_sides_and_the_call_site(given):
    sources = {
        "folder": [str(DUMPS)],
        "prefix": [str(DUMPS / "nccl_trace_rank_")],
        "files": [str(p) for p in sorted(DUMPS.glob("nccl_trace_rank_*"))],
    }[given]
    args = [a for path in sources for a in ("--flight-recorder", path)]
    report = diagnose_json(*args)
    verdict = report["verdict"]
    assert verdict["cause"] == "collective" and verdict["hung"] is True, verdict
    assert report["culprit"]["rank"] == 1 and report["culprit"]["source"] == "flight-recorder"
    fr = report["flight_recorder"]
    assert fr["culprits"] == [1] and fr["seq"] == 3 and fr["collective"] == "gloo:all_reduce"
    summary = verdict["summary"]
    assert "ranks 0, 2 wait in gloo:all_reduce #3" in summary and "rank 1 never reached it" in summary
    assert "gloo:broadcast #2" in summary and "fr_gloo_job.py:" in summary  # each side, at its call site
    evidence = [e for d in report["diagnoses"] for e in d["evidence"] if e["source"] == "flight-recorder"]
    assert evidence and "rank 1 never reached it" in evidence[0]["text"]
    # the first fix: what rank 1 does between its last collective and the one the others wait in
    fix = report["diagnoses"][0]["fixes"][0]
    assert fix["origin"] == "finding" and fix["title"].startswith("Rank 1 never reached gloo:all_reduce #3"), fix
    # the file as the dumps recorded it (where the job ran when the fixture was made)
    assert fix["commands"] == ["sed -n '81,84p' /work/main/tests/targets/fr_gloo_job.py"], fix


@pytest.mark.timeout(60)
def test_a_live_job_s_own_dumps_are_found_from_its_environment(tmp_path, session_job):
    """A rank whose environment turns the Flight Recorder on and names where it dumps: the dumps
    written there during its lifetime are read without being named on the command line."""
    env = dict(
        RANK="0",
        WORLD_SIZE="3",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT="29999",
        TORCH_FR_BUFFER_SIZE="2000",
        TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "trace_rank_"),
    )
    code = "import time; print('ready', flush=True); time.sleep(120)"
    proc = session_job([sys.executable, "-c", code], env={**__import__("os").environ, **env}, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    for path in sorted(DUMPS.glob("nccl_trace_rank_*")):  # written after the job started, as at a timeout
        shutil.copy(path, tmp_path / path.name.replace("nccl_trace_rank_", "trace_rank_"))
    report = diagnose_json("--pid", proc.pid)
    fr = report["flight_recorder"]
    assert fr is not None and fr["culprits"] == [1], report["errors"]
    assert len(fr["sources"]) == 3


@pytest.mark.timeout(120)
def test_the_agent_view_of_a_two_rank_job_is_small_and_holds_what_to_relay(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("gloo_straggler")
    result = run_subprocess("diagnose", "--pid", job.rank(0).pid, "--format", "agent", timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.encode()) <= 8 * 1024, len(result.stdout)
    view = json.loads(result.stdout)
    assert view["format"] == "debug-stuck-agent" and view["hung"] is True
    assert view["culprit"]["rank"] == 1 and view["finding"]
    assert view["fix"]["commands"] and all("safety" in c and "ask_first" in c for c in view["fix"]["commands"])
    assert view["resume"]["command"]
