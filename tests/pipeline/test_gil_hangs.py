"""A thread blocked in native code with the GIL held stops every other thread of its process (zoo
`gil_held.py`, real processes): the chain goes from a thread waiting for the GIL to the holder, and the
holder blocked on a native lock that a GIL waiter holds is a deadlock, with the fix to release the GIL."""

from __future__ import annotations

import time

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from debug_stuck.pipeline import DiagnoseRequest

pytestmark = pytest.mark.timeout(180)


def blocked_on_futex(pid: int, tid: int) -> bool:
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii") as f:
            return f.read().split()[0] == "202"  # futex on x86_64
    except (OSError, IndexError):
        return False


def settled(job, tids, reads: int = 5) -> None:
    """Every thread in `tids` blocked in futex for `reads` reads in a row, 0.1 s apart."""
    pid, streak, deadline = job.proc.pid, 0, time.monotonic() + 30
    while streak < reads:
        assert time.monotonic() < deadline, job.log_text()[-2000:]
        streak = streak + 1 if all(blocked_on_futex(pid, t) for t in tids) else 0
        time.sleep(0.1)


def diagnose(knowledge, pid):
    return run_diagnosis(DiagnoseRequest(pids=[pid], window=1.0), knowledge)


@pytest.fixture
def fix_of(knowledge):
    from debug_stuck.advice import advise
    from debug_stuck.kb import load_knowledge

    return lambda report: advise(report, load_knowledge()).diagnoses[0].fixes[0]


@pytest.mark.skipif(not __import__("platform").machine() == "x86_64", reason="reads the x86_64 futex number")
def test_a_native_lock_waited_for_with_the_gil_held_is_a_deadlock_with_the_gil(knowledge, zoo, fix_of):  # noqa: F811
    job = zoo("gil_held", args=["native_lock"])
    settled(job, [job.info["holder_tid"], job.info["waiter_tid"]])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", report.verdict.summary
    end = report.chain[-1]["waits_on"]
    assert end.get("gil") == "held" and end.get("end") == "gil-held", end
    summary = report.verdict.summary
    assert "is blocked in pthread_mutex_lock (libc.so.6), through ctypes" in summary, summary
    assert "holding the GIL" in summary and "thread 'writer' at writer (assistant/zoo/gil_held.py:" in summary, summary
    fix = fix_of(report)
    assert fix.title.endswith("blocks on a native lock while it holds the GIL; release the GIL around that call")
    assert any('ctypes.CDLL("libc.so.6")' in c for c in fix.commands), fix.commands


@pytest.mark.skipif(not __import__("platform").machine() == "x86_64", reason="reads the x86_64 futex number")
def test_a_thread_waiting_for_the_gil_leads_to_the_holder_and_what_it_waits_on(knowledge, zoo):  # noqa: F811
    job = zoo("gil_held", args=["socket"])
    settled(job, [job.info["waiter_tid"]])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", report.verdict.summary
    first, end = report.chain[0], report.chain[-1]
    assert first["waits_on"]["gil"] == "wait" and first["waits_on"]["kind"] == "thread", first
    assert end["thread"]["name"] == "metrics-uploader" and end["waits_on"]["kind"] == "socket", end
    assert end["waits_on"]["end"] == "never-accepted" and end["waits_on"]["gil"] == "held", end
    summary = report.verdict.summary
    assert "thread 'metrics-uploader', which holds the GIL" in summary, summary
    assert "its main thread waits for the GIL in" in summary, summary
