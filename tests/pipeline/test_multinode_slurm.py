"""Multi-node diagnosis through a real Slurm: a hung torchrun+gloo job submitted with sbatch,
diagnosed with `--slurm-job` (an `srun --overlap` step runs `snapshot` on its node), then over a
real sshd on loopback, then with its node wedged (slurmd stopped), then scancelled.

Needs root (installs slurm-wlm, munge, openssh-server when missing; runs slurmd and sshd);
skips with the reason otherwise. Every daemon and job process is stopped by PID at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from multinode_engines import (
    SlurmCluster,
    running,
    sshd,  # noqa: F401 (a fixture)
    submit_straggler,
)

from conftest import diagnose_with_options
from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.live import slurm
from debug_stuck.pipeline.judge import judge_nodes
from debug_stuck.render.text import render_text

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("torch")
    with running(SlurmCluster(tmp_path_factory.mktemp("slurm")), "Slurm") as cluster:
        os.environ["SLURM_CONF"] = str(cluster.conf)  # for srun/squeue run by the code under test
        try:
            yield cluster
        finally:
            os.environ.pop("SLURM_CONF", None)


@pytest.fixture(scope="module")
def straggler(cluster, tmp_path_factory):
    job = submit_straggler(cluster, tmp_path_factory.mktemp("job"), nproc=4)
    yield job
    job.cancel()


def assert_straggler_report(report, job, node):
    rank1 = job.ready()["rank1_pid"]
    assert report.culprit is not None, report.stack_groups
    assert report.culprit["rank"] == 1 and report.culprit["pid"] == rank1, report.culprit
    assert report.culprit["host"] == node
    assert "all_reduce" in report.culprit["reason"]
    assert report.verdict.hung is True, report.verdict.summary
    assert report.verdict.cause == "dataloader", [(d.cause, d.confidence) for d in report.diagnoses[:3]]
    assert [g["label"] for g in report.stack_groups] == [f"ranks 0,2,3 ({node})", f"rank 1 ({node})"]
    roles = sorted(p["role"] for p in report.processes)
    assert roles == ["launcher", "rank", "rank", "rank", "rank"], roles
    assert {p["host"] for p in report.processes} == {node}
    assert not [e for e in report.errors if "did not answer" in e or "no snapshot" in e], report.errors
    assert f"ranks 0,2,3 ({node}) in all_reduce / rank 1 ({node}) in sleep_forever" in report.notes[0]


def test_slurm_job_names_the_culprit_rank_and_node(knowledge, cluster, straggler, tmp_path):
    log = tmp_path / "train.log"  # read here, its tail bounded by --log-bytes, as on one node
    log.write_text("".join(f"[rank0] step {n} loss 0.{n:03d}\n" for n in range(1, 400)))
    started = time.perf_counter()
    options = ("--log", str(log), "--log-bytes", "2048", "--probe", "env")
    report = diagnose_with_options(knowledge, "--slurm-job", straggler.jobid, *options)
    elapsed = time.perf_counter() - started
    [entry] = [e for e in report.logs if e["path"] == str(log)]
    assert entry["bytes_read"] <= 2048 and entry["last_line"] == "[rank0] step 399 loss 0.399", entry
    assert [p["name"] for p in report.probes] == ["env"], report.probes
    print(f"\nreal --slurm-job diagnosis (1 node, 4 ranks): {elapsed:.2f} s wall")
    assert_straggler_report(report, straggler, cluster.node)
    assert report.answers.get("nodes") is None  # one node: not a multi-node job
    text = render_text(report)
    assert f"ranks 0,2,3 ({cluster.node}): all_reduce" in text
    rank1 = straggler.ready()["rank1_pid"]
    assert report.verdict.summary.startswith(f"Rank 1 ({cluster.node}, pid {rank1}) sleeps in a loop at sleep_forever")
    assert f"inside __getitem__; ranks 0,2,3 ({cluster.node}) wait for it in all_reduce." in report.verdict.summary
    assert " ".join(report.verdict.summary.split()) in " ".join(text.split())


def test_same_job_over_ssh_on_loopback(knowledge, cluster, straggler, sshd):  # noqa: F811
    options = []
    for option in sshd.options:
        options += ["--ssh-option", option]
    args = ("--hosts", f"localhost:{sshd.port}", "--slurm-job", straggler.jobid, *options)
    report = diagnose_with_options(knowledge, *args)
    assert_straggler_report(report, straggler, cluster.node)


def test_snapshot_command_on_the_node_finds_the_job_by_its_id(cluster, straggler):
    proc = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "snapshot", "--slurm-job", straggler.jobid, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    wire = json.loads(lines[0])
    assert wire["node"] == cluster.node and wire["job"] == straggler.jobid
    pids = {p["pid"] for p in wire["processes"]}
    assert set(straggler.rank_pids()) <= pids
    assert os.getpid() not in pids and proc.returncode == 0
    # every rank sampled twice, yet each distinct stack is stored once
    threads = sum(len(d["threads"]) for s in wire["series"] for d in s["dumps"])
    assert len(wire["stacks"]) < threads


def test_diagnose_command_with_slurm_job(cluster, straggler):
    proc = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "diagnose", "--slurm-job", straggler.jobid, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["culprit"]["rank"] == 1 and report["culprit"]["host"] == cluster.node


def test_bad_job_ids_say_so(knowledge, cluster, straggler):
    with pytest.raises(BadInput):
        diagnose_with_options(knowledge, "--slurm-job", "not-a-job")
    with pytest.raises(NotInspectable, match="not found"):
        diagnose_with_options(knowledge, "--slurm-job", "987654")
    with pytest.raises(BadInput):
        diagnose_with_options(knowledge, "--slurm-job", straggler.jobid, "--node-timeout", "0")
    with pytest.raises(BadInput):
        diagnose_with_options(knowledge, "--slurm-job", straggler.jobid, "--pid", "1")


def test_a_wedged_node_is_named_and_the_call_stays_bounded(knowledge, cluster, straggler):
    slurmd = cluster.slurmd_pid()
    os.kill(slurmd, signal.SIGSTOP)  # the node's daemon stops answering: a wedged node
    try:
        started = time.monotonic()
        merged = slurm.collect_slurm(straggler.jobid, timeout=4)
        elapsed = time.monotonic() - started
    finally:
        os.kill(slurmd, signal.SIGCONT)
    assert elapsed < 4 + 6, elapsed
    [node] = merged.nodes
    assert node.node == cluster.node and not node.answered and node.timed_out
    report = judge_nodes(knowledge, merged)
    assert f"{cluster.node}: did not answer within 4 s" in " ".join(report.errors)
    assert "No node of Slurm job" in report.verdict.summary
    assert report.verdict.hung is None and report.culprit is None
    assert cluster.job_state(straggler.jobid) == "RUNNING"


def test_scancel_leaves_no_process_of_the_job(cluster, straggler):
    pids = list(straggler.seen)
    assert len(pids) >= 5  # torchrun and its four ranks
    left = straggler.cancel()
    assert not left, f"still alive after scancel: {left}"
