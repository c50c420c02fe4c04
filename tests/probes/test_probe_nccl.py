"""nccl-debug-run: the parser against recorded NCCL/c10d output, and the probe against real torchrun jobs.

The real runs use torchrun + gloo on CPU (tests/targets/probe_ddp.py): a healthy job, a collective
mismatch found by TORCH_DISTRIBUTED_DEBUG=DETAIL, and a missing rank that stalls the rendezvous,
diagnosed from the PID of a live job (the probe re-runs its command on a fresh port). Also here:
debug_stuck.bounded.run_tree, which the probe relies on to kill a launcher's whole tree.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import all_gone
from debug_stuck.bounded import run_tree
from debug_stuck.probes.targeted import nccl_debug_run
from debug_stuck.probes.targeted import nccl_log as check_nccl
from debug_stuck.probes.targeted.base import ConsentRequired, ProbeContext
from debug_stuck.probes.targeted.nccl_debug_run import judge, replace_port
from debug_stuck.probes.targeted.nccl_log import NcclLog, parse_lines
from debug_stuck.probes.targeted.registry import run_probe

HERE = Path(__file__).resolve().parents[1]
FIXTURES = HERE / "fixtures" / "nccl"
TARGET = HERE / "targets" / "probe_ddp.py"

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def fixture(name: str) -> NcclLog:
    text = (FIXTURES / name).read_text(encoding="utf-8", errors="replace")
    return parse_lines(text.splitlines())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(mode: str, port: int) -> list:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        str(TARGET),
        mode,
    ]


# --- the parser, on recorded output ---------------------------------------------------------------


@pytest.mark.timeout(30)
def test_socket_bootstrap_interfaces_and_benign_warn():
    log = fixture("socket_bootstrap_nccl857.log")
    assert log.interfaces == ["eth0:162.30.2.40"]
    assert log.bootstrap == ["eth0:162.30.2.40"]
    assert log.network == "Socket"
    assert log.nccl_version == "2.10.3+cuda11.3"
    assert log.comm_init and not log.comm_init_complete
    # The libibverbs WARN is printed on every machine without InfiniBand: not an error.
    assert log.errors == []
    assert any("libibverbs" in w for w in log.benign_warnings)


@pytest.mark.timeout(30)
def test_two_interfaces_and_socket_channels():
    log = fixture("socket_channels_pytorch68893.log")
    assert log.interfaces[0] == "ens5:172.31.0.137"
    assert log.interfaces[1].startswith("veth75fa783:fe80::")
    assert log.transports == {"NET/Socket": 1}
    assert log.nccl_version == "2.7.8+cuda11.1"
    assert log.errors == []


@pytest.mark.timeout(30)
def test_infiniband_roce_and_ifname():
    log = fixture("ib_roce_init_start_nccl1038.log")
    assert log.ib_devices == ["mlx5_0:1/RoCE"]
    assert log.network == "IB"
    assert log.ifname_env == "enp179s0f0"
    assert log.bootstrap == ["enp179s0f0:198.18.2.2"]
    assert log.comm_init and not log.comm_init_complete
    assert log.nranks == 1
    status, summary, findings = judge(log, exit_code=None, timed_out=True, seconds=60)
    assert status == "warn" and "comm-init" in summary
    assert any(f.cause == "nccl-init" for f in findings)


@pytest.mark.timeout(30)
def test_init_complete_and_transports():
    log = fixture("ib_gdrdma_init_complete_nccl429.log")
    assert log.comm_init_complete
    assert log.nranks == 16
    assert log.transports == {"NET/IB": 3, "P2P/direct": 3}
    assert log.stage(None) == "comm-init"
    ipc = fixture("p2p_ipc_megatron516.log")
    assert ipc.transports == {"P2P/IPC": 7}


@pytest.mark.timeout(30)
def test_coll_lines_reach_first_collective():
    log = fixture("allreduce_coll_nccl1193.log")
    assert log.collectives == 4
    assert log.first_collective == "AllReduce"
    assert log.nranks == 128
    status, summary, _ = judge(log, exit_code=None, timed_out=True, seconds=120)
    assert status == "ok" and "first collective" in summary


@pytest.mark.timeout(30)
def test_nccl_warn_during_init_is_nccl_init():
    log = fixture("connect_abort_nccltests166.log")
    assert log.transports == {"SHM": 2}
    messages = [f.message for f in log.errors]
    assert any("socketStartConnect" in m and "connection abort" in m for m in messages)
    assert {f.cause for f in log.errors} == {"nccl-init"}
    status, summary, _ = judge(log, exit_code=1, timed_out=False, seconds=5)
    assert status == "fail" and summary.startswith("NCCL WARN during communicator init")


@pytest.mark.timeout(30)
def test_watchdog_timeout_is_collective():
    log = fixture("watchdog_timeout_llamafactory7396.log")
    assert len(log.errors) == 1  # printed by every rank, reported once
    f = log.errors[0]
    assert f.cause == "collective"
    assert "ALLREDUCE" in f.message and "SeqNum=1580" in f.message and "600 s" in f.message
    assert {0, 3, 4} <= log.ranks_seen
    assert log.stage(1) == "first-collective"


@pytest.mark.timeout(30)
def test_shape_mismatch():
    log = fixture("shape_mismatch_msswift9443.log")
    assert len(log.errors) == 1
    f = log.errors[0]
    assert f.cause == "collective"
    assert "rank 0 runs ALLREDUCE [51123456], rank 1 runs ALLREDUCE [195812480]" in f.message
    assert "tensor shapes" in f.message


@pytest.mark.timeout(30)
def test_store_timeouts_are_rendezvous():
    log = fixture("store_timeouts.log")
    assert [f.cause for f in log.errors] == ["rendezvous"] * 3
    assert "1/3 clients joined" in log.errors[0].message
    status, summary, _ = judge(log, exit_code=1, timed_out=False, seconds=5)
    assert status == "fail" and "c10d store" in summary


@pytest.mark.timeout(30)
def test_recorded_gloo_runs():
    healthy = fixture("gloo_torch2.13_healthy.log")
    assert healthy.rendezvous and healthy.comm_init_complete
    assert healthy.fingerprints == {"ALLREDUCE": 6}
    assert healthy.store and healthy.store.startswith("127.0.0.1:")
    assert healthy.errors == [] and healthy.missing_ranks() == []
    assert judge(healthy, 0, False, 5)[0] == "ok"

    mismatch = fixture("gloo_torch2.13_mismatch.log")
    assert [f.cause for f in mismatch.errors] == ["collective"]  # both ranks' tracebacks: one finding
    assert "rank 0 runs ALLREDUCE [4], rank 1 runs BROADCAST [4]" in mismatch.errors[0].message
    assert mismatch.root_cause == {"rank": mismatch.root_cause["rank"], "exitcode": 1}

    missing = fixture("gloo_torch2.13_missing.log")
    assert missing.missing_ranks() == [2]
    status, summary, findings = judge(missing, None, True, 12)
    assert status == "warn" and "rank(s) 2" in summary
    assert all(f.cause == "rendezvous" for f in findings)


@pytest.mark.timeout(30)
def test_a_ranks_own_exception_explains_the_peers_failures():
    log = fixture("gloo_torch2.13_crash.log")
    status, summary, findings = judge(log, 1, False, 5)
    assert status == "fail"
    assert summary.startswith("rank 1 raised ValueError: bad batch at step 1")
    # Rank 0's monitored-barrier failure is a consequence: reported, once, after the cause.
    barrier = [f for f in findings if "monitoredBarrier" in f.message]
    assert len(barrier) == 1 and barrier[0].cause == "collective"
    assert log.root_cause["rank"] == 1


@pytest.mark.timeout(30)
def test_parser_memory_is_bounded():
    log = NcclLog()
    for i in range(5000):
        log.feed(f"host:1:2 [0] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x0 count 4 [nranks=2]")
        log.feed(f"host:1:2 [0] misc/socket.cc:1 NCCL WARN socketProgress: failure {i} on peer {i}")
        log.feed(f"[I socket.cpp] [c10d - trace] wait key_count:1 keys[0]:/k/{i} address:x")
    assert log.collectives == 5000
    assert len(log.errors) <= check_nccl.MAX_ERRORS
    assert len(log.keys_waited) <= check_nccl.MAX_KEYS
    assert len(log.tail) <= check_nccl.MAX_TAIL_LINES


@pytest.mark.timeout(30)
def test_replace_port_forms():
    argv = ["torchrun", "--master_port", "29500", "--rdzv-endpoint=node0:29400", "x.py", "--master_port2"]
    out, env, changed = replace_port(argv, {"MASTER_PORT": "29500", "PATH": "/bin"}, 31337)
    assert out == ["torchrun", "--master_port", "31337", "--rdzv-endpoint=node0:31337", "x.py", "--master_port2"]
    assert env["MASTER_PORT"] == "31337" and env["PATH"] == "/bin"
    assert len(changed) == 3
    out, _, _ = replace_port(["python", "-m", "torch.distributed.run", "--master-port=1", "t.py"], {}, 2)
    assert out[3] == "--master-port=2"


# --- run_tree -------------------------------------------------------------------------------------

_SPAWNS_NEW_SESSION = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; print('child', flush=True); time.sleep(600)"],
                         start_new_session=True)
print("parent", child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(30)
def test_run_tree_kills_children_in_other_sessions():
    lines = []
    result = run_tree([sys.executable, "-c", _SPAWNS_NEW_SESSION], 3, on_line=lines.append)
    assert result.timed_out and result.returncode is None
    assert any(line.startswith("parent") for line in lines)
    child = int(next(line for line in lines if line.startswith("parent")).split()[1])
    assert child in result.pids
    assert result.leftovers == []
    assert all_gone(result.pids) == []


@pytest.mark.timeout(30)
def test_run_tree_bounded_output_exit_code_and_early_stop():
    big = "import sys\nfor i in range(40000): sys.stdout.write('x' * 99 + '\\n')\nsys.exit(4)"
    result = run_tree([sys.executable, "-c", big], 20)
    assert result.returncode == 4 and not result.timed_out
    assert len(result.output) <= 2 << 20 and result.dropped_bytes > 0
    assert result.output.endswith("x\n")

    stop = "import time\nfor i in range(1000):\n print('tick', i, flush=True)\n time.sleep(0.05)"
    started = time.monotonic()
    result = run_tree([sys.executable, "-c", stop], 20, on_line=lambda line: line == "tick 3")
    assert result.stopped_early and not result.timed_out and result.returncode is None
    assert time.monotonic() - started < 10
    assert "tick 3" in result.output


# --- the probe, for real ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_needs_consent():
    with pytest.raises(ConsentRequired):
        run_probe("nccl-debug-run", ProbeContext(timeout=5, command=["true"]))


@pytest.fixture
def gloo_env(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@needs_torch
@pytest.mark.timeout(90)
def test_healthy_run_finishes(gloo_env):
    ctx = ProbeContext(timeout=45, allow_exec=True, command=torchrun("healthy", free_port()))
    result = run_probe("nccl-debug-run", ctx)
    assert result.status == "ok", result.to_dict()
    assert result.data["stage"] == "finished"
    assert result.data["collective_fingerprints"].get("ALLREDUCE", 0) >= 6
    assert result.data["socket_ifname"] == {"GLOO_SOCKET_IFNAME": "lo"}
    assert result.data["flight_recorder_dumps"] == []
    assert all_gone(result.data["pids"]) == []
    # gloo: say that NCCL was not in use, and set no variable this torch calls deprecated
    assert result.data["nccl_in_use"] is False
    assert any(f.message.startswith("NCCL was not in use") for f in result.findings)
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in result.data["env_added"]
    assert "TORCH_FR_BUFFER_SIZE" in result.data["env_added"]
    assert "is deprecated" not in " ".join(result.data.get("tail") or []) + result.summary


@needs_torch
@pytest.mark.timeout(60)
def test_a_healthy_job_cut_at_a_short_limit_is_a_timeout_not_a_cause(gloo_env):
    ctx = ProbeContext(timeout=1, allow_exec=True, command=torchrun("healthy", free_port()))
    result = run_probe("nccl-debug-run", ctx)
    assert result.status == "timeout", result.to_dict()
    assert result.summary.startswith("out of time at stage")
    assert all(f.cause is None for f in result.findings), result.to_dict()
    assert all_gone(result.data["pids"]) == []


@needs_torch
@pytest.mark.timeout(120)
def test_a_rank_that_never_enters_the_next_collective_is_a_collective_hang(gloo_env, monkeypatch):
    # rank 1 waits on an Event instead of the second all_reduce; rank 0 waits in it (issue 15, item 3).
    # A shorter silence threshold than the probe's 15 s keeps the run short; the judgement is the same.
    monkeypatch.setattr(nccl_debug_run, "STALL_SILENCE_S", 5.0)
    ctx = ProbeContext(timeout=22, allow_exec=True, command=torchrun("skip", free_port()))
    result = run_probe("nccl-debug-run", ctx)
    assert result.status == "fail", result.to_dict()
    assert result.summary == "collective hang: rank(s) 1 never entered collective #1 (ALLREDUCE)"
    assert result.findings[0].cause == "collective"
    assert result.data["rank_sequence"] == {"0": {"seq": 1, "op": "ALLREDUCE"}, "1": {"seq": 0, "op": "ALLREDUCE"}}
    assert all_gone(result.data["pids"]) == []


@needs_torch
@pytest.mark.timeout(90)
def test_a_rank_killed_by_sigkill_is_the_cause_not_its_peers_timeouts(gloo_env):
    ctx = ProbeContext(timeout=45, allow_exec=True, command=torchrun("killed", free_port()))
    result = run_probe("nccl-debug-run", ctx)
    assert result.status == "fail", result.to_dict()
    assert result.summary.startswith("rank 1 was killed by SIGKILL"), result.summary
    first = result.findings[0]
    assert first.cause == "memory-pressure" and "OOM killer" in first.message
    assert all_gone(result.data["pids"]) == []


@pytest.mark.timeout(10)
def test_a_run_still_printing_at_its_limit_is_not_judged_a_stall():
    log = parse_lines(["[I1125 c10d] TCPStore server has started on port 29500"])
    status, summary, findings = judge(log, None, True, 30.0, silent_for=2.0)
    assert status == "timeout" and all(f.cause is None for f in findings)
    status, _, findings = judge(log, None, True, 30.0, silent_for=25.0)
    assert status == "warn" and findings[-1].cause is not None


@needs_torch
@pytest.mark.timeout(90)
def test_mismatched_collective_fails(gloo_env):
    ctx = ProbeContext(timeout=45, allow_exec=True, command=torchrun("mismatch", free_port()))
    result = run_probe("nccl-debug-run", ctx)
    assert result.status == "fail", result.to_dict()
    assert result.summary.startswith("collective mismatch")
    assert "ALLREDUCE" in result.summary and "BROADCAST" in result.summary
    assert result.findings[0].cause == "collective"
    assert result.data["exit_code"] not in (0, None)
    assert all_gone(result.data["pids"]) == []


def _is_rank(argv: list) -> bool:
    return any(arg.endswith("probe_ddp.py") for arg in argv) and "torch.distributed.run" not in argv


@pytest.fixture
def live_missing_rank_job(session_job):
    """A torchrun job stalled in the rendezvous (WORLD_SIZE=3, two ranks); its tree ends with the test."""
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    port = free_port()
    proc = session_job(torchrun("missing", port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    ranks = []
    while time.monotonic() < deadline:
        try:
            # a rank runs probe_ddp.py; a child torchrun forked without exec (a multiprocessing helper)
            # keeps torchrun's command line, which names probe_ddp.py too, and is no rank
            ranks = [c for c in psutil.Process(proc.pid).children() if _is_rank(c.cmdline())]
        except psutil.Error:
            ranks = []
        if len(ranks) == 2:
            break
        time.sleep(0.1)
    assert len(ranks) == 2, "torchrun did not start its two ranks"
    return proc, port, ranks


@needs_torch
@pytest.mark.timeout(90)
def test_missing_rank_stalls_in_rendezvous_from_a_live_pid(live_missing_rank_job, monkeypatch):
    launcher, port, ranks = live_missing_rank_job
    monkeypatch.setattr(nccl_debug_run, "STALL_SILENCE_S", 5.0)  # as above: a shorter run, the same judgement
    # The first port the probe picks is taken before its run binds it (here: held by this test):
    # the run fails on it, and the probe runs once more on another instead of blaming the job.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real_free_port = nccl_debug_run.free_port
    monkeypatch.setattr(nccl_debug_run, "free_port", lambda: ports.pop() if ports else real_free_port())
    # A rank's PID is enough: the probe walks up to torchrun and re-runs its command on a free port.
    ctx = ProbeContext(timeout=20, allow_exec=True, pids=[ranks[1].pid])
    try:
        result = run_probe("nccl-debug-run", ctx)
    finally:
        taken.close()
    assert result.status == "warn", result.to_dict()
    assert any("ran again on another" in f.message for f in result.findings), result.to_dict()
    assert result.data["source"] == f"pid {launcher.pid} (launcher)"
    assert f"--master_port={port}" not in result.data["command"]
    assert any("port replaced" in f.message for f in result.findings)
    assert result.data["missing_ranks"] == [2]
    assert "rank(s) 2" in result.summary
    assert {f.cause for f in result.findings if f.severity == "warn"} == {"rendezvous"}
    assert result.data["timed_out"] is True
    # Everything the probe started is gone (torchrun's ranks live in sessions of their own)...
    assert all_gone(result.data["pids"]) == []
    assert len(result.data["pids"]) >= 3
    # ...and the live job was left alone.
    assert launcher.poll() is None and all(r.is_running() for r in ranks)
