"""dataloader probe against real torch Datasets (tests/targets/probe_datasets.py) in real child processes.

Each run imports the factory in a child, fetches batches with workers and with num_workers=0, and
must leave no process behind: every PID the probe dumped is checked to be gone.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import psutil
import pytest

from debug_stuck.probes.targeted import dataloader as check_dataloader
from debug_stuck.probes.targeted.base import ConsentRequired, ProbeContext, ProbeUsageError
from debug_stuck.probes.targeted.dataloader import Setting, judge
from debug_stuck.probes.targeted.registry import run_probe

TARGETS = Path(__file__).resolve().parents[1] / "targets"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def probe(factory: str, timeout: float = 12, num_workers=None, batches: int = 3):
    ctx = ProbeContext(
        timeout=timeout,
        allow_exec=True,
        factory=f"probe_datasets:{factory}",
        cwd=str(TARGETS),
        num_workers=num_workers,
        batches=batches,
    )
    result = run_probe("dataloader", ctx)
    assert_nothing_left(result)
    return result


def dumped_pids(result) -> list:
    pids = []
    for setting in result.data.get("settings", []):
        for proc in (setting.get("stuck") or {}).get("processes", []):
            pids.append(proc["pid"])
    return pids


def assert_nothing_left(result) -> None:
    """No child of this test process and none of the processes the probe dumped is still alive."""
    deadline = time.monotonic() + 5
    while True:
        alive = []
        for pid in dumped_pids(result):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        children = [c.pid for c in psutil.Process().children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
        if not alive and not children:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"processes left behind: dumped {alive}, children {children}")
        time.sleep(0.1)


def setting(result, n: int) -> dict:
    return next(s for s in result.data["settings"] if s["num_workers"] == n)


@pytest.mark.timeout(60)
def test_fast_loader_uses_its_own_workers_then_zero():
    result = probe("fast")
    assert result.status == "ok", result.to_dict()
    assert result.data["loaded"]["kind"] == "DataLoader"
    assert [s["num_workers"] for s in result.data["settings"]] == [1, 0]  # the DataLoader's own, then 0
    for s in result.data["settings"]:
        assert s["status"] == "ok" and s["batches"] == 3
        assert s["first_batch_s"] is not None and s["per_batch_s"] is not None
    assert result.findings == []


@pytest.mark.timeout(60)
def test_slow_first_batch_warns(monkeypatch):
    # A 0.4 s sample against a 0.3 s threshold: the same rule as the real 10 s one, in test time.
    monkeypatch.setattr(check_dataloader, "SLOW_FIRST_BATCH_S", 0.3)
    result = probe("slow", batches=2)
    assert result.status == "warn", result.to_dict()
    assert [s["num_workers"] for s in result.data["settings"]] == [2, 0]  # a bare Dataset: 2 workers
    assert setting(result, 0)["per_batch_s"] >= 0.35
    assert all(f.cause == "dataloader" and "slow first batch" in f.message for f in result.findings)


@pytest.mark.timeout(90)
def test_workers_hang_but_zero_works():
    result = probe("hangs_in_worker", timeout=30)
    assert result.status == "fail", result.to_dict()
    assert result.summary == "workers hang (num_workers=2), num_workers=0 works"
    finding = result.findings[0]
    assert finding.cause == "dataloader"
    assert "probe_datasets.py" in finding.message and "__getitem__" in finding.message
    assert "num_workers=0" in finding.message and "spawn" in finding.message
    hung = setting(result, 2)
    assert hung["status"] == "hang" and hung["batches"] == 0
    roles = {p["role"] for p in hung["stuck"]["processes"]}
    assert roles == {"main", "worker"}
    assert hung["stuck"]["thread"]["role"] == "worker"
    assert setting(result, 0)["status"] == "ok"
    assert result.data["works"] == [0]


@pytest.mark.timeout(90)
def test_worker_crash():
    # The bound is generous: both settings must run, and the second pays for a fresh torch import.
    result = probe("crashes_in_worker", timeout=40)
    assert result.status == "fail", result.to_dict()
    assert result.summary.startswith("worker crashed (num_workers=2)")
    assert result.findings[0].cause == "dataloader"
    assert "exited unexpectedly" in result.findings[0].message or "killed by signal" in result.findings[0].message
    assert setting(result, 2)["status"] == "crash"
    assert setting(result, 0)["status"] == "ok"


def test_a_dead_worker_is_read_as_dead_however_it_ended(tmp_path):
    """How a worker ended is read from /proc while it is an unreaped zombie, whatever the DataLoader
    has noticed by then."""
    import signal
    import subprocess
    import sys

    segv = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    code = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(
            psutil.Process(p.pid).status() == psutil.STATUS_ZOMBIE for p in (segv, code)
        ):
            time.sleep(0.02)
        assert check_dataloader.worker_end(segv.pid)["signal"] == "SIGSEGV"
        assert check_dataloader.worker_end(code.pid)["code"] == 3
        assert check_dataloader.worker_end(alive.pid) is None
    finally:
        alive.send_signal(signal.SIGKILL)
        for proc in (segv, code, alive):
            proc.wait()
    assert "already reaped" in check_dataloader.worker_end(segv.pid)["text"]


@pytest.mark.timeout(60)
def test_blocked_read_is_io_stall(tmp_path, monkeypatch):
    fifo = tmp_path / "samples.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("PROBE_DATASETS_FIFO", str(fifo))  # the probe's child inherits it
    result = probe("fifo_samples", timeout=15, num_workers=0)
    assert result.status == "fail", result.to_dict()
    finding = result.findings[0]
    assert finding.cause == "io-stall", finding
    assert "probe_datasets.py" in finding.message
    thread = setting(result, 0)["stuck"]["thread"]
    assert thread["role"] == "main" and thread["io_wait"]
    assert setting(result, 0)["batches"] == 1  # sample 0 came, sample 1 blocks


@pytest.mark.timeout(60)
def test_sample_that_never_returns_is_bad_sample():
    result = probe("stuck_sample", timeout=15, num_workers=0)
    assert result.status == "fail", result.to_dict()
    finding = result.findings[0]
    assert finding.cause == "bad-sample", finding
    assert "__getitem__ (probe_datasets.py" in finding.message
    assert setting(result, 0)["stuck"]["thread"]["io_wait"] is None


@pytest.mark.timeout(30)
def test_bad_factory_and_usage():
    result = probe("not_a_dataset")
    assert result.status == "fail" and "not a Dataset or DataLoader" in result.summary
    with pytest.raises(ProbeUsageError):
        run_probe("dataloader", ProbeContext(timeout=5, allow_exec=True))
    with pytest.raises(ProbeUsageError):
        run_probe("dataloader", ProbeContext(timeout=5, allow_exec=True, factory="no_colon"))
    with pytest.raises(ConsentRequired):
        run_probe("dataloader", ProbeContext(timeout=5, factory="probe_datasets:fast"))


def _hung(n: int, io: bool) -> Setting:
    thread = {
        "pid": 10 + n,
        "role": "worker" if n else "main",
        "user_frames": ["__getitem__ (data.py:12)"],
        "python_frames": ["read (gzip.py:300)" if io else "decode (codec.py:9)"],
        "io_wait": "kernel wait channel rpc_wait_bit_killable" if io else None,
        "state": "idle",
        "frames": ["futex_wait (libc.so.6)", "decode (codec.py:9)"],
    }
    return Setting(n, status="hang", batches=0, seconds=30.0, stuck={"processes": [], "thread": thread})


@pytest.mark.timeout(30)
@pytest.mark.parametrize("io, cause", [(True, "io-stall"), (False, "bad-sample")])
def test_both_settings_hang_verdict(io, cause):
    status, summary, findings = judge([_hung(2, io), _hung(0, io)], 5)
    assert status == "fail"
    assert "num_workers=2 and num_workers=0" in summary
    assert findings[0].cause == cause
    assert "in the main (pid 10) at __getitem__ (data.py:12)" in findings[0].message


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "state, frames, stuck",
    [
        ("idle", ["clock_nanosleep (libc.so.6)", "time_sleep (libpython3.11.so)", "__getitem__ (data.py:12)"], False),
        ("active", ["decode (codec.py:9)", "__getitem__ (data.py:12)"], False),
        ("idle", ["futex_wait (libc.so.6)", "wait (threading.py:320)", "__getitem__ (data.py:12)"], True),
    ],
    ids=["timed-sleep", "computing", "waiting-on-an-event"],
)
def test_only_a_wait_that_never_ends_by_itself_is_a_hang(state, frames, stuck):
    setting_ = _hung(2, False)
    setting_.stuck["thread"].update(state=state, frames=frames)
    status, summary, findings = judge([setting_], 5)
    if stuck:
        assert status == "fail" and findings[0].cause == "dataloader"
    else:
        assert status == "timeout", summary
        assert summary.startswith("out of time before a verdict: num_workers=2")
        assert all(f.cause is None for f in findings)


@pytest.mark.timeout(30)
def test_a_setting_with_no_stuck_thread_found_is_out_of_time_not_hung():
    status, summary, findings = judge([Setting(2, status="hang", seconds=3.0, stuck=None)], 5)
    assert status == "timeout" and "still starting" in findings[0].message


@pytest.mark.timeout(90)
def test_a_slow_dataset_at_a_short_limit_is_a_timeout_not_a_cause():
    # 2 s a sample against a limit of a few seconds: slow, never hung (issue 15, item 2)
    result = probe("very_slow", timeout=10)
    assert result.status == "timeout", result.to_dict()
    assert result.summary.startswith("out of time before a verdict"), result.summary
    assert all(f.cause is None for f in result.findings), result.to_dict()
    assert any("sleeping a set time" in f.message for f in result.findings), result.to_dict()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "factory, said",
    [("exits_3_in_worker", "exited with code 3"), ("killed_in_worker", "was killed by SIGKILL")],
)
def test_a_dead_worker_says_how_it_ended(factory, said):
    # exit code 3 and SIGKILL used to give the same "exited unexpectedly" (issue 15, item 4)
    result = probe(factory, timeout=40, num_workers=2)
    assert result.status == "fail", result.to_dict()
    assert result.summary.startswith("worker crashed (num_workers=2): worker "), result.summary
    assert said in result.summary and said in result.findings[0].message
    assert ("OOM killer" in result.summary) == (factory == "killed_in_worker")


@pytest.mark.timeout(60)
def test_workers_blocked_in_io_say_so(tmp_path, monkeypatch):
    fifo = tmp_path / "samples.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("PROBE_DATASETS_FIFO", str(fifo))
    result = probe("fifo_in_worker", timeout=20)
    assert result.status == "fail", result.to_dict()
    assert result.summary.startswith("workers hang in an I/O wait ("), result.summary
    assert result.summary.endswith("(num_workers=2), num_workers=0 works")
    assert "blocked in I/O:" in result.findings[0].message


def test_the_user_frames_of_a_stuck_worker_are_the_users_not_the_probes_runner(tmp_path):
    """The probe runs the user's factory from `python -c` (frames in `<string>`): those frames and
    the libraries' are not the user's code; the user's own `datasets/` package under the folder the
    probe put on sys.path is, though py-spy's short name is Hugging Face's too."""
    from debug_stuck.probes.collectors.stacks import Frame

    own = str(tmp_path / "datasets" / "shards.py")
    frames = [
        Frame("read", "shards.py", 9, path=own.replace("datasets/shards.py", "shards.py")),
        Frame("__getitem__", "datasets/shards.py", 12, path=own),
        Frame("fetch", "torch/utils/data/_utils/fetch.py", 52, path="/venv/lib/python3.11/site-packages/torch/x.py"),
        Frame("<module>", "<string>", 80),
        Frame("_run_code", "<frozen runpy>", 88),
    ]
    user = check_dataloader._user_frames(frames, [str(tmp_path)])
    assert [f.function for f in user] == ["read", "__getitem__"]
