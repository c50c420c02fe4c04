"""The hook's stack dumps when several diagnoses ask at once: each gets one dump of its own.

A real job with debug_stuck.hook installed (tests/targets/hooked_job.py, dumpable, run as this
user); several threads ask it for stacks at the same moment, as two `diagnose --pid` runs would.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from debug_stuck.probes.collectors.hook_dump import dump_by_hook, find_marker

TARGETS = Path(__file__).resolve().parents[1] / "targets"


@pytest.fixture
def hooked_job(tmp_path, monkeypatch, session_job):
    monkeypatch.setenv("DEBUG_STUCK_HOOK_DIR", str(tmp_path))
    proc = session_job(
        [sys.executable, TARGETS / "hooked_job.py", "--stay-dumpable"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.timeout(90)
def test_diagnoses_at_once_each_get_one_copy_of_every_thread(hooked_job):
    marker, why = find_marker(hooked_job.pid)
    assert marker is not None, why
    alone = dump_by_hook(marker, samples=1, interval=0.1)
    assert alone.dumps, alone.error
    expected = sorted(t.name for t in alone.dumps[0].threads)

    results = []
    start = threading.Barrier(3)

    def ask():
        start.wait()
        results.append(dump_by_hook(marker, samples=2, interval=0.1))

    askers = [threading.Thread(target=ask) for _ in range(3)]
    for thread in askers:
        thread.start()
    for thread in askers:
        thread.join(60)
    assert len(results) == 3
    for series in results:
        assert len(series.dumps) == 2, series.error
        for dump in series.dumps:
            assert sorted(t.name for t in dump.threads) == expected, "a thread listed twice, or one missing"
    assert hooked_job.poll() is None, "the job died of a signal"


@pytest.mark.timeout(90)
def test_a_request_waits_for_the_one_before_it_and_reads_only_its_own_dump(hooked_job):
    """faulthandler writes every dump through the one descriptor the hook registered, so each
    request is its own stretch of the stack file: a request takes the file's lock, notes where the
    file ends, signals, and reads only what follows. While another request holds the lock, it
    sends nothing."""
    import fcntl
    import os

    marker, why = find_marker(hooked_job.pid)
    assert marker is not None, why
    assert dump_by_hook(marker, samples=1, interval=0.1).dumps  # the file exists, one dump in it
    before = os.path.getsize(marker.stacks)
    holder = os.open(marker.stacks, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another diagnosis, mid-request
    results = []
    asker = threading.Thread(target=lambda: results.append(dump_by_hook(marker, samples=1, interval=0.1)))
    try:
        asker.start()
        asker.join(1.5)
        assert asker.is_alive() and not results, "the request did not wait for the lock"
        assert os.path.getsize(marker.stacks) == before, "a signal was sent while another request held the file"
    finally:
        os.close(holder)  # releases the lock
    asker.join(60)
    [series] = results
    assert len(series.dumps) == 1, series.error
    threads = [t.name for t in series.dumps[0].threads]
    assert len(threads) == len(set(threads))
    grown = open(marker.stacks, encoding="utf-8", errors="replace").read()[before:]
    assert grown.count("most recent call first") == len(threads)  # exactly one dump was added: its own
