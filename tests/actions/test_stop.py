"""`debug-stuck stop`: report first, then the whole tree ends; nothing else is touched (real processes)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import psutil
import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import REPO, run_subprocess
from debug_stuck.actions.stop import _describe_left, _Tracked, signal_if_same, stop_job
from debug_stuck.errors import NotInspectable
from debug_stuck.zoo.spawn import is_alive

# Ignores SIGINT and SIGTERM, and so does the child it forks (ignored signals survive fork).
STUBBORN = """
import os, signal, time, json
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    while True:
        time.sleep(1)
wd = os.environ["ZOO_WORKDIR"]
with open(os.path.join(wd, ".READY.tmp"), "w") as fh:
    json.dump({"pid": os.getpid(), "child": child}, fh)
os.replace(os.path.join(wd, ".READY.tmp"), os.path.join(wd, "READY"))
while True:
    time.sleep(1)
"""


def stubborn(zoo):  # noqa: F811
    return zoo("stubborn", argv=[sys.executable, "-c", STUBBORN], wait_ready=True)


def gone(procs):
    return [p.pid for p in procs if is_alive(p)]


@pytest.mark.timeout(150)
def test_stop_torchrun_with_dataloader_workers_leaves_no_process(zoo, tmp_path):  # noqa: F811
    needs = pytest.importorskip("torch")  # noqa: F841
    job = zoo("ddp_workers")
    bystander = zoo("sleep")  # an unrelated process: it must survive
    deadline = time.monotonic() + 20
    while len(job.pids()) < 11 and time.monotonic() < deadline:  # launcher + 2 ranks + 2 x 4 workers
        time.sleep(0.1)
    tree = job.processes()
    assert len(tree) >= 11, [(p.pid, p.cmdline()[-1:]) for p in tree]
    rank1 = job.rank(1).pid
    launcher_cmdline = job.proc.args

    result = stop_job(rank1, report_dir=str(tmp_path), grace=3.0)  # any PID of the job: the tree is found

    assert result.root == job.proc.pid
    job.proc.poll()  # reap our child (the launcher) so it does not linger as a zombie
    assert gone(tree) == [], result.to_dict()
    assert set(p.pid for p in tree) <= set(result.stopped)
    assert result.left == [] and result.signals[0] == "SIGINT"
    assert is_alive(bystander.processes()[0]), "an unrelated process was touched"

    md, js = result.report_paths
    assert os.path.getmtime(js) <= result.first_signal_at and os.path.getmtime(md) <= result.first_signal_at
    report = json.loads(open(js).read())
    states = {p["pid"]: p["state"] for p in report["processes"]}
    assert rank1 in states and states[rank1] not in ("Z", "X"), states  # evidence taken while it lived
    assert report["resume"]["launcher"] == "torchrun"
    assert report["resume"]["command"] == shlex.join(launcher_cmdline)
    assert "## Resume" in open(md).read()


@pytest.mark.timeout(60)
def test_stop_escalates_to_sigkill_when_sigint_and_sigterm_are_ignored(zoo):  # noqa: F811
    job = stubborn(zoo)
    bystander = zoo("sleep")
    tree = job.processes()
    assert len(tree) == 2
    started = time.monotonic()
    result = stop_job(job.proc.pid, write_report=False, grace=0.5)
    elapsed = time.monotonic() - started
    job.proc.poll()
    assert result.signals == ["SIGINT", "SIGTERM", "SIGKILL"]
    assert gone(tree) == [] and result.left == []
    assert elapsed < 0.5 + 0.5 + 5.0, elapsed
    assert is_alive(bystander.processes()[0])


@pytest.mark.timeout(30)
def test_a_reused_pid_is_never_signalled(zoo):  # noqa: F811
    bystander = zoo("sleep").processes()[0]
    impostor = _Tracked(psutil.Process(bystander.pid), bystander.create_time() + 1.0)  # same PID, other process
    assert signal_if_same(impostor, signal.SIGKILL) == "gone"
    assert signal_if_same(_Tracked(psutil.Process(), psutil.Process().create_time()), signal.SIGINT) == "protected"
    time.sleep(0.2)
    assert is_alive(bystander)
    described = _describe_left(_Tracked(bystander, bystander.create_time()))
    assert described["pid"] == bystander.pid and described["state"] == "S" and described["why"]


def test_stop_refuses_a_tree_holding_debug_stuck_itself():
    # exit 3, as for any process that is not a training job (README: exit codes)
    with pytest.raises(NotInspectable, match="holds this debug-stuck"):
        stop_job(os.getpid(), write_report=False, grace=0.1)
    with pytest.raises(NotInspectable, match="not a training job"):
        stop_job(1, write_report=False, grace=0.1)
    assert NotInspectable.exit_code == 3


def _cli(*args, timeout=90):
    return subprocess.run(
        [sys.executable, "-m", "debug_stuck", *map(str, args)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.mark.timeout(60)
def test_stop_without_a_terminal_needs_yes(zoo):  # noqa: F811
    job = stubborn(zoo)
    proc = _cli("stop", "--pid", job.proc.pid)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--yes" in proc.stderr, proc.stderr
    proc = subprocess.run(  # the same through the real entry point
        [sys.executable, "-m", "debug_stuck", "stop", "--pid", str(job.proc.pid)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "--yes" in proc.stderr
    assert all(is_alive(p) for p in job.processes()) and len(job.processes()) == 2


@pytest.mark.timeout(90)
def test_stop_cli_with_yes_writes_the_report_and_stops(zoo, tmp_path):  # noqa: F811
    job = stubborn(zoo)
    tree = job.processes()
    proc = _cli("stop", "--pid", job.proc.pid, "--yes", "--grace", "0.3", "--report-dir", tmp_path, "--format", "json")
    job.proc.poll()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert sorted(result["stopped"]) == sorted(p.pid for p in tree)
    assert result["signals"][-1] == "SIGKILL" and gone(tree) == []
    md, js = result["report_paths"]
    assert os.path.exists(md) and json.loads(open(js).read())["processes"]

    assert _cli("stop", "--pid", 2**22 + 4321, "--yes").returncode == 3
    bad = _cli("stop", "--pid", job.proc.pid, "--yes", "--grace", "-1")
    assert bad.returncode == 2 and "--grace" in bad.stderr


@pytest.mark.timeout(60)
def test_stop_on_a_terminal_asks_and_no_means_no(zoo):  # noqa: F811
    import pty

    job = stubborn(zoo)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "debug_stuck", "stop", "--pid", str(job.proc.pid)],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        os.write(master, b"n\n")
        out, err = proc.communicate(timeout=45)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 1, err  # "not stopped" is not a stop (issue 15, item 12)
    assert "Stop them? [y/N]" in out and "not stopped" in err and str(job.proc.pid) in err
    assert all(is_alive(p) for p in job.processes()) and len(job.processes()) == 2
    assert "1 not stopped" in run_subprocess("stop", "--help", cwd=REPO).stdout
