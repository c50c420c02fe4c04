"""The probe commands: the env probe audits the ranks (not the launcher), sorts its findings,
keeps info notes out of the evidence and speaks of locked memory only where InfiniBand is in use;
every probe has its own --help; gc --pid needs no consent; a vanished --pid is exit 3 for every
probe; --batches must be 1 or more.

Real processes throughout (a real torchrun job, real sleepers with real rlimits). The only seam is
the InfiniBand device folder, which this machine may or may not have (hardware).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import REPO, parse_cli, run_subprocess
from debug_stuck.probes.targeted import env_audit
from debug_stuck.probes.targeted import gc_timing as check_gc
from debug_stuck.probes.targeted.registry import REGISTRY

TARGETS = REPO / "tests" / "targets"


@pytest.fixture
def job(session_job):
    """A sleeping Python process with the given environment (and, optionally, a locked-memory
    limit), in a session of its own, ended with its tree at the end (conftest.session_job)."""

    def start(env=None, memlock=None, unset=()):
        full = {k: v for k, v in os.environ.items() if k not in unset}
        full.update(env or {})

        def limit():
            if memlock is not None:
                resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]))

        proc = session_job(
            [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)"],
            env=full,
            stdout=subprocess.PIPE,
            preexec_fn=limit,
        )
        assert proc.stdout.readline().strip() == b"ready"
        return proc

    return start


def gone_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    return proc.pid


# -- item 5: env ---------------------------------------------------------------------------------

RANK_SCRIPT = """\
import os, pathlib, time
work = pathlib.Path(os.environ["ZOO_WORKDIR"])
(work / ("rank-" + os.environ["RANK"])).write_text(str(os.getpid()))
if os.environ["RANK"] == "0":
    while not (work / "rank-1").exists():
        time.sleep(0.05)
    (work / "READY").write_text("{}")
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_env_audits_the_ranks_not_the_launcher(zoo, tmp_path, cli):  # noqa: F811
    """torchrun sets OMP_NUM_THREADS=1 for its ranks when the launcher has none: not a finding."""
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    argv = ["env", "-u", "OMP_NUM_THREADS", sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    job = zoo("torchrun_env", argv=[*argv, "--master_addr=127.0.0.1", "--master_port=0", str(script)], wait_ready=True)
    launcher = job.proc.pid
    assert "OMP_NUM_THREADS" not in psutil_environ(launcher)
    ranks = sorted(int((job.workdir / f"rank-{r}").read_text()) for r in (0, 1))
    assert all(psutil_environ(pid).get("OMP_NUM_THREADS") == "1" for pid in ranks)

    for given in (launcher, ranks[1]):
        code, out, err = cli("probe", "env", "--pid", given, "--format", "json")
        assert code == 0, err
        result = json.loads(out)
        assert sorted(a["pid"] for a in result["data"]["audited"]) == ranks
        assert {a["role"] for a in result["data"]["audited"]} == {"rank"}
        assert result["data"]["launchers"] == [launcher]
        assert not any("OMP_NUM_THREADS is unset" in f["message"] for f in result["findings"]), result
        assert f"launcher pid {launcher} not audited" in result["summary"]


@pytest.mark.timeout(60)
def test_env_findings_are_sorted_worst_first(job, cli):
    proc = job(
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "NCCL_SOCKET_IFNAME": "ib-does-not-exist9"},
        unset=("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM"),
    )
    code, out, _ = cli("probe", "env", "--pid", proc.pid, "--format", "json")
    assert code == 0
    severities = [f["severity"] for f in json.loads(out)["findings"]]
    assert {"fail", "warn", "info"} <= set(severities)
    assert severities == sorted(severities, key=["fail", "warn", "info"].index)

    code, text, _ = cli("probe", "env", "--pid", proc.pid)
    lines = [line.split(":")[0].strip() for line in text.splitlines()[1:]]
    assert lines == sorted(lines, key=["- fail", "- warn", "- info"].index)


@pytest.mark.timeout(90)
def test_an_info_note_is_no_evidence_in_a_diagnosis(job, cli, cli_json):
    proc = job(unset=("TOKENIZERS_PARALLELISM",))
    code, out, _ = cli("probe", "env", "--pid", proc.pid, "--format", "json")
    note = next(f for f in json.loads(out)["findings"] if "TOKENIZERS_PARALLELISM" in f["message"])
    assert note["severity"] == "info" and "cause" not in note and note["see"] == "dataloader"

    report = cli_json("--pid", proc.pid, "--probe", "env", "--answer", "gpu=busy")
    assert report["probes"][0]["name"] == "env"
    for diagnosis in report["diagnoses"]:
        for evidence in diagnosis["evidence"]:
            assert not (evidence["source"] == "probe" and "TOKENIZERS_PARALLELISM" in evidence["detail"]), diagnosis


def _memlock_notes(cli, pid):
    code, out, err = cli("probe", "env", "--pid", pid, "--format", "json")
    assert code == 0, err
    return [f for f in json.loads(out)["findings"] if "locked-memory" in f["message"]]


@pytest.mark.timeout(60)
def test_memlock_note_only_where_infiniband_is_in_use(job, cli, tmp_path, monkeypatch):
    no_ib = tmp_path / "no-ib"
    no_ib.mkdir()
    monkeypatch.setattr(env_audit, "INFINIBAND_CLASS", str(no_ib))  # the hardware seam: no IB device here
    plain = job(memlock=64 * 1024, unset=("NCCL_IB_HCA", "NCCL_NET", "NCCL_IB_DISABLE"))
    limits = Path(f"/proc/{plain.pid}/limits").read_text()
    assert re.search(r"^Max locked memory\s+65536\s", limits, re.M), limits
    assert _memlock_notes(cli, plain.pid) == []

    asks_ib = job({"NCCL_IB_HCA": "mlx5_0"}, memlock=64 * 1024, unset=("NCCL_IB_DISABLE",))
    (note,) = _memlock_notes(cli, asks_ib.pid)
    assert "64 KiB" in note["message"] and "InfiniBand" in note["message"]

    (no_ib / "mlx5_0").mkdir()  # a machine with an InfiniBand device
    assert len(_memlock_notes(cli, plain.pid)) == 1


# -- item 6: help, consent, vanished PIDs, --batches ------------------------------------------------


def test_every_probe_has_its_own_help(cli):
    helps = {}
    for name, spec in REGISTRY.items():
        code, out, err = cli("probe", name, "--help")
        assert code == 0 and err == ""
        assert out.startswith(f"debug-stuck probe {name}: {spec.summary}")
        assert f"time limit: {spec.timeout:g} s" in out
        assert spec.safety_note in out
        options = {"pid": "--pid", "path": "--path", "factory": "--factory", "script": "--script"}
        for item in spec.inputs:
            assert options.get(item, "") in out
        assert ("needs --allow-exec" in out) == (spec.runs_user_code or any(m.runs_user_code for m in spec.modes))
        assert spec.examples and all(e in out for e in spec.examples)
        for example in spec.examples:  # each example is a valid command line
            words = shlex.split(example)
            assert words[:3] == ["debug-stuck", "probe", name]
            args = parse_cli(*words[1:])
            assert args.name == name
        helps[name] = out
    assert len(set(helps.values())) == len(helps)
    code, out, _ = cli("probe", "--help")
    assert code == 0 and out.startswith("usage: debug-stuck probe")


@pytest.mark.timeout(30)
def test_probe_help_from_a_real_shell():
    proc = run_subprocess("probe", "gc", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("debug-stuck probe gc: ")
    assert "with --pid alone: reads only; no --allow-exec needed" in proc.stdout
    proc = run_subprocess("probe", "frobnicate", "--help")
    assert proc.returncode == 2 and "no probe 'frobnicate'; valid:" in proc.stderr


@pytest.mark.timeout(60)
def test_gc_pid_mode_only_samples_and_needs_no_consent(job, cli, monkeypatch):
    monkeypatch.setattr(check_gc, "PID_SAMPLES", 3)
    proc = job()
    code, out, err = cli("probe", "gc", "--pid", proc.pid, "--timeout", "20", "--format", "json")
    assert code == 0, err
    assert "--allow-exec" not in err and "runs your code" not in err
    result = json.loads(out)
    assert result["data"]["mode"] == "pid"
    assert proc.poll() is None

    code, out, err = cli("probe", "gc", "--script", TARGETS / "probe_gc_light.py")
    assert code == 2 and out == "" and "--allow-exec" in err and "runs your code" in err

    listed = {p["name"]: p for p in json.loads(json.dumps([s.to_dict() for s in REGISTRY.values()]))}
    (pid_mode,) = listed["gc"]["modes"]
    assert pid_mode["when"] == ["pid"] and pid_mode["safety"]["label"] == "reads"


@pytest.mark.timeout(60)
def test_the_gc_playbooks_command_runs(job, tmp_path):
    text = (REPO / "skills" / "gc-pause.md").read_text()
    block = re.search(r"```bash (\w+) \"[^\"]*\"\n(debug-stuck probe gc[^\n]*)\n```", text)
    assert block, "the gc playbook has no `debug-stuck probe gc` command"
    label, command = block.groups()
    assert label == "reads" and "--allow-exec" not in command
    proc = job()
    argv = shlex.split(command.replace("{pid}", str(proc.pid)))[1:]
    run = run_subprocess(*argv, "--timeout", "8", "--format", "json", timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["name"] == "gc"


NEEDS = {
    "dataloader": ["--allow-exec", "--factory", "probe_datasets:fast"],
    "nccl-debug-run": ["--allow-exec"],
}


@pytest.mark.timeout(60)
def test_a_vanished_pid_is_exit_3_for_every_probe(cli):
    pid = gone_pid()
    for name in REGISTRY:
        code, out, err = cli("probe", name, "--pid", pid, *NEEDS.get(name, []))
        assert code == 3, (name, code, out, err)
        assert out == "" and err.count("\n") == 1, (name, err)
        assert f"process {pid} does not exist" in err


@pytest.mark.timeout(30)
def test_a_vanished_pid_from_a_real_shell():
    pid = gone_pid()
    for name in ("env", "storage", "gc"):
        proc = run_subprocess("probe", name, "--pid", pid)
        assert proc.returncode == 3, (name, proc.stdout, proc.stderr)
        assert proc.stdout == "" and proc.stderr.count("\n") == 1
        assert proc.stderr.startswith(f"debug-stuck: error: process {pid} does not exist")


@pytest.mark.timeout(30)
def test_batches_must_be_one_or_more(cli, tmp_path):
    marker = tmp_path / "ran"
    base = ["probe", "dataloader", "--allow-exec", "--factory", "probe_datasets:fast", "--path", str(TARGETS)]
    for value in ("0", "-3"):
        code, out, err = cli(*base, "--batches", value, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
        assert code == 2 and out == "", err
        assert err.count("\n") == 1 and f"--batches {value}" in err and "1 or more" in err
    code, _, err = cli(*base, "--num-workers", "-1")
    assert code == 2 and "--num-workers -1" in err and "0" in err
    assert not marker.exists()


def psutil_environ(pid: int) -> dict:
    import psutil

    deadline = time.monotonic() + 5
    while True:
        try:
            return psutil.Process(pid).environ()
        except psutil.AccessDenied:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
