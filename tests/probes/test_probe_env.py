"""The probe framework and the env probe, against real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types

import pytest

from debug_stuck.probes.targeted import registry as targeted
from debug_stuck.probes.targeted.base import ConsentRequired, ProbeContext, ProbeResult
from debug_stuck.probes.targeted.registry import ProbeSpec, run_probe


@pytest.fixture
def job(session_job):
    def start(env):
        proc = session_job(
            [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
            env=dict(os.environ, **env),
            stdout=subprocess.PIPE,
        )
        assert proc.stdout.readline().strip() == b"ready"  # running Python: its environment is readable
        return proc

    return start


@pytest.mark.timeout(30)
def test_env_probe_reads_the_jobs_environment(job, cli):
    proc = job(
        {
            "OMP_NUM_THREADS": "512",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
            "NCCL_SOCKET_IFNAME": "ib-does-not-exist9",
            "MIOPEN_DEBUG_DISABLE_FIND_DB": "1",
            "HF_TOKEN": "hf_secretsecretsecretsecretsecret",
        }
    )
    code, out, _ = cli("probe", "env", "--pid", proc.pid, "--format", "json")
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "fail"
    causes = {f["cause"] for f in result["findings"] if f["severity"] in ("warn", "fail")}
    assert {"cpu-spin", "collective", "nccl-init", "miopen-find"} <= causes
    assert "hf_secret" not in out


def test_env_probe_on_this_shell_is_not_an_error(cli):
    code, out, _ = cli("probe", "env")
    assert code == 0 and out.startswith("probe env: ")


def test_unknown_probe_and_missing_name(cli):
    code, _, err = cli("probe", "frobnicate")
    assert code == 2 and "no probe 'frobnicate'; valid:" in err
    code, _, err = cli("probe")
    assert code == 2 and "probe --list" in err


@pytest.mark.timeout(30)
def test_a_probe_that_overruns_is_reported_as_timeout(monkeypatch):
    slow = types.SimpleNamespace(NAME="slow", run=lambda ctx: time.sleep(30))
    monkeypatch.setitem(targeted.REGISTRY, "slow", ProbeSpec("slow", "fake.slow", "sleeps", 0.2, False))
    monkeypatch.setattr(targeted, "probe_module", lambda name: slow)
    monkeypatch.setattr(targeted, "CLEANUP_GRACE", 0.3)
    started = time.monotonic()
    result = run_probe("slow", ProbeContext(timeout=0.2))
    assert time.monotonic() - started < 3
    assert result.status == "timeout" and "did not finish" in result.summary


def test_a_probe_that_crashes_still_gives_a_result(monkeypatch):
    def boom(ctx):
        raise ValueError("bad parse")

    broken = types.SimpleNamespace(NAME="broken", run=boom)
    monkeypatch.setitem(targeted.REGISTRY, "broken", ProbeSpec("broken", "fake.broken", "x", 5, False))
    monkeypatch.setattr(targeted, "probe_module", lambda name: broken)
    result = run_probe("broken", ProbeContext(timeout=5))
    assert result.status == "fail" and "ValueError: bad parse" in result.summary


def test_consent_is_required_for_user_code(monkeypatch):
    exec_probe = types.SimpleNamespace(NAME="x", run=lambda ctx: ProbeResult("x", "ok", "ran"))
    monkeypatch.setitem(targeted.REGISTRY, "x", ProbeSpec("x", "fake.x", "x", 5, True))
    monkeypatch.setattr(targeted, "probe_module", lambda name: exec_probe)
    with pytest.raises(ConsentRequired):
        run_probe("x", ProbeContext(timeout=5))
    assert run_probe("x", ProbeContext(timeout=5, allow_exec=True)).summary == "ran"


@pytest.mark.timeout(60)
def test_probe_findings_are_evidence_in_a_diagnosis(job, cli_json):
    # more OpenMP threads than cores: a warning for cpu-spin, which one process can have; the NCCL
    # setting's warning points at collective, which one process without ranks cannot have
    threads = str(4 * (os.cpu_count() or 1))
    proc = job({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "OMP_NUM_THREADS": threads})
    report = cli_json("--pid", proc.pid, "--probe", "env", "--answer", "gpu=busy")
    assert report["probes"][0]["name"] == "env"
    spin = next(d for d in report["diagnoses"] if d["cause"] == "cpu-spin")
    assert any(e["source"] == "probe" and "OMP_NUM_THREADS" in e["detail"] for e in spin["evidence"])
    assert "collective" not in [d["cause"] for d in report["diagnoses"]], "one process has no collective"


def test_probe_list_names_every_probe_and_consent(cli):
    code, out, _ = cli("probe", "--list")
    assert code == 0
    for name in targeted.REGISTRY:
        assert out.count(f"{name} ") >= 1
    assert out.count("[runs your code; needs --allow-exec:") == 3
    # every probe says truthfully what it does: the storage probe writes, it does not only read
    storage = out.split("storage", 1)[1].split("\n")[1]
    assert "writes a temporary file" in storage and "1 MiB" in storage and "removed after" in storage
    assert out.count("[reads only:") == 2  # env and gpu-health


def test_exec_probe_without_consent_runs_nothing(cli, tmp_path):
    marker = tmp_path / "ran"
    code, out, err = cli("probe", "nccl-debug-run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert code == 2 and "--allow-exec" in err and out == ""
    assert not marker.exists()
    code, _, err = cli("diagnose", "--probe", "dataloader")
    assert code == 2 and "--allow-exec" in err
