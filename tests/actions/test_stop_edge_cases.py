"""`stop` at its edges: 'no' is not a stop, a vanished PID gets a hint stop accepts, and a
SIGSTOPped job is continued before SIGINT so it can shut down cleanly. Real processes (the zoo)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import run_subprocess
from debug_stuck.actions.stop import stop_job
from debug_stuck.zoo.spawn import stop_signal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="stop reads /proc")

# Shuts down cleanly on SIGINT: writes CLEAN (with the signal it got) and exits 0.
CLEAN_ON_SIGINT = """
import json, os, signal, sys, time
wd = os.environ["ZOO_WORKDIR"]

def bye(signum, frame):
    with open(os.path.join(wd, "CLEAN"), "w") as fh:
        fh.write(signal.Signals(signum).name)
    sys.exit(0)

signal.signal(signal.SIGINT, bye)
with open(os.path.join(wd, ".READY.tmp"), "w") as fh:
    json.dump({"pid": os.getpid()}, fh)
os.replace(os.path.join(wd, ".READY.tmp"), os.path.join(wd, "READY"))
while True:
    time.sleep(1)
"""


@pytest.mark.timeout(60)
def test_a_sigstopped_job_is_continued_before_sigint_and_shuts_down_cleanly(zoo):  # noqa: F811
    job = zoo("clean", argv=[sys.executable, "-c", CLEAN_ON_SIGINT], wait_ready=True)
    [proc] = job.processes()
    stop_signal(job)  # SIGSTOP, waits until it is stopped (state T)
    assert proc.status() == "stopped"
    result = stop_job(proc.pid, write_report=False, grace=3.0)
    assert job.proc.wait(timeout=10) == 0  # it ran its own SIGINT handler: a clean exit
    assert (job.workdir / "CLEAN").read_text() == "SIGINT"
    assert result.signals == ["SIGINT"] and result.left == []
    assert any(step.startswith("SIGCONT to 1 stopped process(es) first") for step in result.steps), result.steps


@pytest.mark.timeout(60)
def test_stop_of_a_pid_that_does_not_exist_suggests_what_stop_accepts(zoo):  # noqa: F811
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    proc = run_subprocess("stop", "--pid", dead.pid, "--yes")
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0], proc.stderr
    assert "--cmd" not in proc.stderr and "--dir" not in proc.stderr  # options stop does not take
    assert "ps" in lines[0]
