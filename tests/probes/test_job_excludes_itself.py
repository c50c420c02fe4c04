"""debug-stuck run by the same Python harness that started the job is never part of the job: the ninth
hunt's h01 run A counted the tool's own process as a rank (and blamed its sampling thread)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HARNESS = r"""
import subprocess, sys
job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
check = "import os, sys; from debug_stuck.probes.collectors.procs import job_processes; " \
        "print(os.getpid(), [p.pid for p in job_processes([int(sys.argv[1])])])"
try:
    print(job.pid, subprocess.run([sys.executable, "-c", check, str(__import__("os").getpid())],
                                  capture_output=True, text=True, timeout=60).stdout, flush=True)
finally:
    job.kill()
    job.wait()
"""


@pytest.mark.timeout(90)
def test_the_tool_started_beside_the_job_is_not_one_of_its_processes():
    out = subprocess.run([sys.executable, "-c", HARNESS], capture_output=True, text=True, timeout=80).stdout.split(
        None, 2
    )
    job, tool, found = int(out[0]), int(out[1]), out[2]
    pids = [int(p) for p in found.strip().strip("[]").split(",")]
    assert job in pids and tool not in pids, (job, tool, pids)
