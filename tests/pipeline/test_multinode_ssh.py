"""Multi-node diagnosis over ssh: a real sshd on loopback, a real hung torchrun+gloo job, and hosts
that never answer or refuse. A node that fails leaves a report of the rest, with the node named.

The sshd tests need root (sshd's privilege separation, logging in as root with our key) and skip
with the reason otherwise; the failing-host tests need only the ssh client.
"""

from __future__ import annotations

import socket
import time

import pytest
from multinode_engines import (
    Blackhole,
    LoopbackSshd,
    free_port,
    sshd,  # noqa: F401 (a fixture)
)
from zoo.fixtures import sibling_ranks, zoo  # noqa: F401

from conftest import diagnose_with_options
from debug_stuck.errors import BadInput
from debug_stuck.live import ssh
from debug_stuck.pipeline.judge import judge_nodes

pytestmark = pytest.mark.timeout(300)
NODE = socket.gethostname().split(".")[0]


def ssh_flags(server: LoopbackSshd) -> list:
    out = []
    for option in server.options:
        out += ["--ssh-option", option]
    return out


@pytest.fixture
def blackhole():
    hole = Blackhole()
    yield hole
    hole.close()


@pytest.fixture
def straggler(zoo):  # noqa: F811
    pytest.importorskip("torch")
    return zoo("gloo_straggler", nproc_per_node=3)


def test_hosts_over_ssh_name_the_culprit_rank_and_node(knowledge, sshd, straggler, tmp_path):  # noqa: F811
    """Every option means what it means on one node: the log is read here, its tail bounded by
    --log-bytes, and the probe runs here and weighs in."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"[rank0] step {n} loss 0.{n:03d}\n" for n in range(1, 400)))
    args = ("--hosts", f"localhost:{sshd.port}", "--pid", str(straggler.proc.pid), *ssh_flags(sshd))
    args += ("--log", str(log), "--log-bytes", "2048", "--probe", "env")
    report = diagnose_with_options(knowledge, *args)
    [entry] = [e for e in report.logs if e["path"] == str(log)]
    assert entry["bytes_read"] <= 2048 and entry["last_line"] == "[rank0] step 399 loss 0.399", entry
    assert [p["name"] for p in report.probes] == ["env"], report.probes
    assert report.culprit is not None, report.stack_groups
    assert report.culprit["rank"] == 1 and report.culprit["pid"] == straggler.rank(1).pid
    assert report.culprit["host"] == NODE
    assert [g["label"] for g in report.stack_groups] == [f"ranks 0,2 ({NODE})", f"rank 1 ({NODE})"]
    assert report.verdict.hung is True and report.verdict.cause == "dataloader"
    assert not [e for e in report.errors if "did not answer" in e or "ssh failed" in e], report.errors


def test_hosts_take_sibling_ranks_started_without_a_launcher_as_one_job(knowledge, sshd, sibling_ranks):  # noqa: F811
    """As srun or pdsh start them: two ranks, no common parent but the test. `--hosts` without a PID
    takes the node's training job, both ranks of it, and follows the wait to the straggler."""
    pytest.importorskip("torch")
    rank0, rank1, _ = sibling_ranks("straggle")
    args = ("--hosts", f"localhost:{sshd.port}", *ssh_flags(sshd))
    report = diagnose_with_options(knowledge, *args)
    assert {rank0, rank1} <= {p["pid"] for p in report.processes}, report.notes
    assert report.culprit is not None and report.culprit["pid"] == rank1, report.stack_groups
    assert report.culprit["host"] == NODE
    # the test runner loads torch too: a second "job" on this node, named in the notes, not taken
    taken = [n for n in report.notes if "one job of 2 process trees" in n or "training jobs found" in n]
    assert taken and f"{rank0}, {rank1}" in taken[0] if "training jobs" in taken[0] else taken, report.notes
    assert report.verdict.summary.startswith(f"Rank 1 ({NODE}, pid {rank1}) sleeps in a loop at sleep_forever")
    assert f"rank 0 ({NODE}, pid {rank0}) waits for it in all_reduce" in report.verdict.summary
    assert [hop["host"] for hop in report.chain] == [NODE, NODE]


def test_a_host_that_never_answers_leaves_a_report_of_the_rest(knowledge, sshd, straggler, blackhole):  # noqa: F811
    wedged = f"127.0.0.1:{blackhole.port}"
    refused = f"127.0.0.1:{free_port()}"
    hosts = f"localhost:{sshd.port},{wedged},{refused}"
    args = ("--hosts", hosts, "--pid", str(straggler.proc.pid), "--node-timeout", "20", *ssh_flags(sshd))
    report = diagnose_with_options(knowledge, *args)
    assert report.culprit is not None and report.culprit["rank"] == 1 and report.culprit["host"] == NODE
    errors = " ".join(report.errors)
    assert wedged in errors and refused in errors
    assert "Connection refused" in errors
    assert "2 of 3 nodes gave no snapshot" in report.notes[1]
    evidence = " ".join(e.detail for e in report.diagnoses[0].evidence)
    assert wedged in evidence and refused in evidence
    assert report.answers["nodes"]["value"] == "3"


def test_the_node_timeout_bounds_a_host_that_hangs(knowledge, blackhole):
    wedged = f"127.0.0.1:{blackhole.port}"
    started = time.monotonic()
    merged = ssh.collect_hosts([wedged], "auto", timeout=2)
    elapsed = time.monotonic() - started
    assert elapsed < 2 + 3, elapsed
    [node] = merged.nodes
    assert node.timed_out and node.error.startswith("did not answer"), node.error
    report = judge_nodes(knowledge, merged)
    assert report.errors == [f"{wedged}: {node.error}"]
    assert report.verdict.hung is None and report.verdict.cause is None
    assert "No node of hosts" in report.verdict.summary


def test_bad_host_lists_are_one_clear_error(knowledge):
    for hosts in ("a,,b", "node1:99999", "bad host"):
        with pytest.raises(BadInput):
            diagnose_with_options(knowledge, "--hosts", hosts)
    assert ssh.parse_host("[::1]:2222") == ("::1", 2222)
    assert ssh.parse_host("me@node-7") == ("me@node-7", None)


@pytest.mark.skipif(__import__("shutil").which("ssh") is None, reason="needs the ssh client")
def test_an_example_means_the_same_with_many_nodes(knowledge):
    """--example with --hosts: the example's answers and logs weigh in as on one node (read on
    this machine), beside the node that could not be reached."""
    refused = f"127.0.0.1:{free_port()}"
    alone = diagnose_with_options(knowledge, "--example", "nanochat-collective")
    report = diagnose_with_options(knowledge, "--hosts", refused, "--example", "nanochat-collective")
    assert refused in " ".join(report.errors) and "Connection refused" in " ".join(report.errors)
    assert [e["path"] for e in report.logs] == [e["path"] for e in alone.logs] and report.logs
    assert {k: v for k, v in report.answers.items() if v["source"] == "user"} == {
        k: v for k, v in alone.answers.items() if v["source"] == "user"
    }
    assert report.diagnoses and report.diagnoses[0].cause == alone.diagnoses[0].cause == "collective"
