"""NCCL RAS: the parser on NCCL's own sample output (tests/fixtures/nccl_ras, sources cited in its
README) and on a real `ncclras -v` run recorded on an H200, and the bounded run of `ncclras`. The
machines the suite runs on have no GPU: `ncclras` itself is the hardware seam, replaced on PATH by
a script that prints a fixture or misbehaves."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from debug_stuck.probes.collectors.nccl_ras import parse_rank_list, parse_ras_output, query_ras

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_ras"


def parsed(name: str):
    return parse_ras_output((FIXTURES / name).read_text())


def test_a_process_that_gave_no_data_and_the_rank_it_leaves_missing():
    report = parsed("docs_incomplete.txt")
    assert report.missing_processes == [{"pid": 3487984, "node": "172.16.64.213", "gpus": "5"}]
    assert report.missing_ranks == [21]
    assert report.timeouts == 2
    assert report.communicators == [
        {
            "group": 0,
            "comms": 1,
            "nodes_per_comm": 4,
            "ranks_per_node": "7-8",
            "ranks_per_comm": 32,
            "ranks_in_group": 32,
            "status": "RUNNING",
            "errors": "INCOMPLETE",
        }
    ]
    assert report.findings() == [
        "NCCL RAS: no data from process 3487984 on node 172.16.64.213 (GPU 5)",
        "NCCL RAS: communicator #0-0 (cf264af53edbe986) misses rank(s) 21",
        "NCCL RAS: 2 communication timeout(s) while gathering data",
    ]


def test_a_dead_process():
    report = parsed("docs_dead.txt")
    assert report.dead_processes == [{"pid": 3487984, "node": "172.16.64.213", "gpus": "5"}]
    assert not report.missing_processes and report.missing_ranks == [21]
    assert (
        report.findings()[0] == "NCCL RAS: considered dead (unreachable): process 3487984 on node 172.16.64.213 (GPU 5)"
    )


def test_ranks_behind_in_collective_count_are_listed_with_their_processes():
    report = parsed("docs_mismatch.txt")
    (issue,) = report.comm_issues
    assert (issue["comm"], issue["hash"], issue["kind"]) == ("0-0", "27a079b828ff1a75", "MISMATCH")
    behind = issue["groups"][1]
    assert (behind["count"], behind["what"]) == (6, "launched up to operation 6649")
    assert [r["rank"] for r in behind["ranks"]] == [0, 2, 3, 4, 5, 7]
    assert behind["ranks"][0] == {"rank": 0, "gpu": "0", "pid": 483072, "node": "172.16.64.210"}
    assert report.missing_ranks == []
    assert report.findings() == [
        "NCCL RAS: communicator #0-0 (27a079b828ff1a75): rank(s) 0, 2, 3, 4, 5, 7 have launched up to "
        "operation 6649; 26 others have launched up to operation 6650"
    ]


def test_ranks_with_another_status():
    report = parsed("docs_status_mismatch.txt")
    groups = report.comm_issues[0]["groups"]
    assert [(g["count"], g["what"], [r["rank"] for r in g["ranks"]]) for g in groups] == [
        (26, "status UNKNOWN", []),
        (4, "status RUNNING", [0, 8, 16, 24]),
        (2, "status FINALIZE", [4, 20]),
    ]
    assert [row["status"] for row in report.communicators] == ["FINALIZE", "RUNNING", "INIT"]


def test_per_rank_lines_and_rank_ranges():
    report = parsed("composed_rank_lines.txt")
    assert report.missing_ranks == [3, 5, 6, 21, 22, 23]
    assert report.comm_issues[0]["ranks"][2] == {"rank": 23, "gpu": None, "pid": None, "node": None}
    assert [p["pid"] for p in report.missing_processes] == [3487984, 3487990]
    assert report.timeouts == 1
    assert parse_rank_list("3, 5-6,9") == [3, 5, 6, 9]


def test_without_ncclras_on_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    report = query_ras()
    assert report.error == "could not ask NCCL RAS: ncclras is not on the PATH (it comes with NCCL 2.24+)"
    assert report.to_dict()["findings"] == []


def fake_ncclras(folder: Path, body: str) -> Path:
    path = folder / "ncclras"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_ncclras_is_run_verbose_and_its_output_parsed(tmp_path, monkeypatch):
    args = tmp_path / "args"
    fake_ncclras(tmp_path, f'echo "$@" > {args}\ncat {FIXTURES / "docs_incomplete.txt"}')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    report = query_ras(host="node3", port=28028, seconds=4)
    assert report.error is None and report.missing_ranks == [21]
    assert args.read_text().split() == ["-v", "-t", "4", "-h", "node3", "-p", "28028"]


def test_ncclras_failing_or_hanging_gives_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    fake_ncclras(tmp_path, 'echo "Couldn\'t connect to the RAS server" >&2; exit 1')
    report = query_ras(seconds=2)
    assert report.error == "could not ask NCCL RAS: ncclras exited with 1: Couldn't connect to the RAS server"
    fake_ncclras(tmp_path, "exec sleep 600")
    started = time.monotonic()
    report = query_ras(seconds=1)
    assert time.monotonic() - started < 10
    assert report.error == "could not ask NCCL RAS: ncclras did not finish within 6 s"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.txt") if not p.name.startswith("live_")))
def test_every_fixture_of_a_problem_parses_to_plain_data_with_findings(name):
    import json

    data = parsed(name).to_dict()
    json.dumps(data)
    assert data["findings"]


def test_a_real_ncclras_run_on_a_healthy_one_rank_job_finds_nothing_wrong():
    # `ncclras -v -t 10` beside a live one-rank NCCL 2.28.9 job on an H200 (bench/gpu_check.py)
    report = parsed("live_h200_one_rank.txt")
    assert report.error is None and report.findings() == []
    assert report.communicators == [
        {
            "group": 0,
            "comms": 1,
            "nodes_per_comm": 1,
            "ranks_per_node": 1,
            "ranks_per_comm": 1,
            "ranks_in_group": 1,
            "status": "RUNNING",
            "errors": "OK",
        }
    ]
    assert report.missing_ranks == [] and report.dead_processes == [] and report.comm_issues == []


NCCL_RANK = """
import ctypes, socket, sys, time
ctypes.CDLL(sys.argv[1])  # a library named libnccl in its maps, as any CUDA build of torch has
if sys.argv[2] == "listen":  # NCCL's RAS thread, started with the process's first communicator
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    print(server.getsockname()[1], flush=True)
else:
    print(0, flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ras", ["listen", "none"])
def test_ras_is_asked_only_when_a_rank_of_the_job_listens_on_its_port(tmp_path, monkeypatch, ras):
    import ctypes.util
    import shutil
    import subprocess
    import sys

    from debug_stuck.live.collect import Snapshot
    from debug_stuck.live.torch_evidence import gather_torch_evidence, ras_port
    from debug_stuck.probes.collectors.procs import ProcInfo

    libm = ctypes.util.find_library("m")
    found = [p for p in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib")
             if libm and Path(p, libm).exists()]  # fmt: skip
    if not found:
        pytest.skip("no libm to stand in for libnccl")
    fake_lib = tmp_path / "libnccl.so.2"
    shutil.copyfile(Path(found[0], libm), fake_lib)
    asked = tmp_path / "asked"
    fake_ncclras(tmp_path, f"touch {asked}\ncat {FIXTURES / 'live_h200_one_rank.txt'}")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    rank = subprocess.Popen([sys.executable, "-c", NCCL_RANK, str(fake_lib), ras], stdout=subprocess.PIPE, text=True)
    try:
        port = int(rank.stdout.readline())
        env = {"NCCL_RAS_ADDR": f"localhost:{port}"} if port else {}
        info = ProcInfo(pid=rank.pid, ppid=os.getpid(), name="python", cmdline=["python"], role="rank", env=env)
        info.loads_torch = True
        snapshot = Snapshot(host="here", taken_at=time.time(), window=1.0, processes=[info])
        assert ras_port(snapshot) == (port or 28028)
        evidence = gather_torch_evidence([], None, snapshot)
    finally:
        rank.kill()
        rank.wait()
    if ras == "listen":
        assert asked.exists() and evidence.ras is not None and evidence.ras.error is None
    else:  # libnccl loaded, no communicator: no RAS thread to ask, and nothing said about it
        assert not asked.exists() and evidence.ras is None
        assert not any("NCCL RAS" in note for note in evidence.notes), evidence.notes
