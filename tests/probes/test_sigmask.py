"""Signal masks read from /proc/PID/status: a blocked SIGTERM that was sent stays pending."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from debug_stuck.probes.collectors.sigmask import blocked_and_held, mask_names

BLOCKS_SIGTERM = (
    "import signal, sys, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
    "print('blocked', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def blocker(request):
    proc = subprocess.Popen([sys.executable, "-c", BLOCKS_SIGTERM], stdout=subprocess.PIPE, text=True)
    request.addfinalizer(lambda: (proc.kill(), proc.wait()))
    assert proc.stdout.readline().strip() == "blocked"
    return proc


def _status(pid: int) -> str:
    with open(f"/proc/{pid}/status") as fh:
        return fh.read()


def test_a_blocked_sigterm_is_held_only_once_it_is_sent(blocker):
    blocked, held = blocked_and_held(_status(blocker.pid))
    assert "SIGTERM" in blocked and held == []
    os.kill(blocker.pid, signal.SIGTERM)
    blocked, held = blocked_and_held(_status(blocker.pid))
    assert held == ["SIGTERM"] and blocker.poll() is None


def test_a_process_that_blocks_nothing_holds_nothing():
    assert blocked_and_held(_status(os.getpid()))[1] == []
    assert mask_names(0) == [] and mask_names(1 << 14 | 1 << 1) == ["SIGINT", "SIGTERM"]
