"""A probe cut short by Ctrl-C or SIGTERM ends everything it started and removes its scratch folders
(issue 15, item 1): the user's code in the dataloader probe with its workers, torchrun and both
ranks under nccl-debug-run, a CPU-bound script under the gc probe.

Each test runs `debug-stuck probe ...` as a user does, in a session of its own, waits until the
user's code is really running under it (its processes are seen), signals the probe, and checks
that the probe exits with 128+signal, that every process seen under it is gone and that its
TMPDIR holds no `debug-stuck-*` folder. The finalizer kills whatever a failing run left, by PID.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import all_gone
from debug_stuck.bounded import kill_tree

TARGETS = Path(__file__).resolve().parents[1] / "targets"

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def running_probe(request, tmp_path):
    """Start `debug-stuck probe ARGS` in its own session; its finalizer kills what is left, by PID."""
    started = []

    def start(*args, cwd=None):
        scratch = tmp_path / "tmp"
        scratch.mkdir(exist_ok=True)
        env = dict(os.environ, TMPDIR=str(scratch), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "debug_stuck", "probe", *map(str, args)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # a shell that starts pytest in the background ignores SIGINT, and children inherit that:
            # the probe must get Ctrl-C as a user's terminal delivers it (as test_watch's runs do)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        started.append((proc, {}))
        return proc, scratch, started[-1][1]

    def cleanup():
        for proc, seen in started:
            kill_tree(proc.pid, seen)
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    request.addfinalizer(cleanup)
    return start


def wait_for_descendants(proc, seen: dict, want, seconds: float = 90.0) -> list:
    """Wait until `want(cmdlines)` holds for the probe's descendants; returns their PIDs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the probe ended before its child ran: rc={proc.returncode} {err[-400:]}")
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        lines = {}
        for child in children:
            try:
                seen.setdefault(child.pid, child.create_time())
                lines[child.pid] = " ".join(child.cmdline())
            except psutil.Error:
                pass
        if want(list(lines.values())):
            return list(seen)
        time.sleep(0.1)
    pytest.fail(f"the probe's child never reached the expected state: {lines}")


def interrupt(proc, sig: int) -> tuple:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, err


def assert_no_scratch(scratch: Path) -> None:
    left = [p.name for p in scratch.iterdir() if p.name.startswith("debug-stuck-")]
    assert not left, f"scratch folders left behind: {left}"


@needs_torch
@pytest.mark.timeout(150)
def test_sigterm_ends_the_dataloader_probes_child_and_its_workers(running_probe):
    proc, scratch, seen = running_probe(
        "dataloader",
        "--factory",
        "probe_datasets:hangs_in_worker",
        "--allow-exec",
        "--timeout",
        "120",
        cwd=str(TARGETS),
    )
    # the child that imports the factory, and at least two DataLoader workers under it
    pids = wait_for_descendants(proc, seen, lambda lines: len(lines) >= 3)
    code, err = interrupt(proc, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert "terminated" in err and "stopped" in err, err
    assert all_gone(pids, 10.0) == [], "still running after the probe was interrupted"
    assert_no_scratch(scratch)


@needs_torch
@pytest.mark.timeout(150)
def test_ctrl_c_ends_torchrun_and_both_ranks_under_nccl_debug_run(running_probe):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(TARGETS / "probe_ddp.py"),
        "missing",  # WORLD_SIZE=3 with two ranks: they wait in the rendezvous for good
    ]
    proc, scratch, seen = running_probe("nccl-debug-run", "--allow-exec", "--timeout", "120", "--", *command)
    pids = wait_for_descendants(proc, seen, lambda lines: sum("probe_ddp.py" in line for line in lines) >= 3)
    code, err = interrupt(proc, signal.SIGINT)
    assert code == 128 + signal.SIGINT, err
    assert "interrupted" in err, err
    assert all_gone(pids, 10.0) == [], "still running after the probe was interrupted"
    assert_no_scratch(scratch)


@pytest.mark.timeout(120)
def test_sigterm_ends_the_gc_probes_script_and_removes_its_folder(running_probe, tmp_path):
    proc, scratch, seen = running_probe(
        "gc", "--script", TARGETS / "probe_gc_heavy.py", "--allow-exec", "--timeout", "100", cwd=str(tmp_path)
    )
    pids = wait_for_descendants(proc, seen, lambda lines: any("probe_gc_heavy.py" in line for line in lines))
    assert any(p.name.startswith("debug-stuck-gc-") for p in scratch.iterdir()), "the probe made no scratch folder"
    code, err = interrupt(proc, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert all_gone(pids, 10.0) == [], "still running after the probe was interrupted"
    assert_no_scratch(scratch)
