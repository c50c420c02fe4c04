"""gc probe: real scripts timed with gc.callbacks, and a live allocation-heavy process sampled by PID."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from debug_stuck.probes.collectors import stacks
from debug_stuck.probes.collectors.stacks import Frame
from debug_stuck.probes.targeted import gc_timing as check_gc
from debug_stuck.probes.targeted.base import ConsentRequired, ProbeContext, ProbeUsageError
from debug_stuck.probes.targeted.gc_timing import is_gc_frame
from debug_stuck.probes.targeted.registry import run_probe

TARGETS = Path(__file__).resolve().parents[1] / "targets"
HEAVY = TARGETS / "probe_gc_heavy.py"
LIGHT = TARGETS / "probe_gc_light.py"

needs_py_spy = pytest.mark.skipif(stacks._find_py_spy() is None, reason="py-spy is not installed")


def gc_probe(**kw):
    kw.setdefault("allow_exec", True)
    result = run_probe("gc", ProbeContext(**kw))
    for proc in result.data.get("processes", []):
        assert not psutil.pid_exists(proc["pid"]) or psutil.Process(proc["pid"]).status() == psutil.STATUS_ZOMBIE
    return result


@pytest.mark.timeout(60)
def test_heavy_script_killed_at_the_limit_still_reports():
    result = gc_probe(timeout=5, script=str(HEAVY), command=["200000"])
    assert result.data["timed_out"] is True  # it never exits on its own: the periodic file is what we read
    assert result.status == "fail", result.to_dict()
    assert result.data["share"] > check_gc.FAIL_SHARE
    gen2 = result.data["per_generation"][2]
    assert gen2["count"] >= 3 and gen2["total_s"] > 0.5
    assert result.data["pauses"] >= gen2["count"]
    assert result.findings[0].cause == "gc-pause"
    assert "gc.freeze()" in result.findings[0].message
    assert result.summary.startswith("GC took")


@pytest.mark.timeout(30)
def test_light_script_is_ok_and_gets_its_arguments():
    result = gc_probe(timeout=20, script=str(LIGHT), command=["alpha", "beta"])
    assert result.status == "ok", result.to_dict()
    assert result.data["exit_code"] == 0 and result.data["timed_out"] is False
    assert result.data["share"] < check_gc.WARN_SHARE
    assert any("args ['alpha', 'beta']" in line for line in result.data["output_tail"])
    assert result.findings == []


@pytest.mark.timeout(30)
def test_command_mode_counts_forked_children_and_keeps_the_users_sitecustomize(tmp_path, monkeypatch):
    # An environment with its own sitecustomize (conda and Debian ship one): it must still run.
    own = tmp_path / "own_site"
    own.mkdir()
    marker = tmp_path / "own_sitecustomize_ran"
    (own / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.setenv("PYTHONPATH", str(own))
    script = tmp_path / "forks.py"
    script.write_text(
        "import gc, os\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    for _ in range(5): gc.collect()\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "gc.collect()\n"
    )
    result = gc_probe(timeout=20, command=[sys.executable, str(script)])
    assert marker.exists()
    pids = {p["pid"] for p in result.data["processes"]}
    assert len(pids) == 2, result.data["processes"]
    counts = sorted(p["per_generation"][2]["count"] for p in result.data["processes"])
    assert counts[-1] >= 5  # the child counted its own collections, from zero
    assert result.status == "ok"  # a fraction of a second of GC in all says nothing


@pytest.mark.timeout(30)
def test_not_python_is_skipped_and_usage():
    result = gc_probe(timeout=10, command=["/bin/sh", "-c", "echo hi"])
    assert result.status == "skipped" and "no GC data" in result.summary
    with pytest.raises(ProbeUsageError):
        run_probe("gc", ProbeContext(timeout=5, allow_exec=True))
    with pytest.raises(ProbeUsageError):
        run_probe("gc", ProbeContext(timeout=5, allow_exec=True, script="/nonexistent/train.py"))
    with pytest.raises(ConsentRequired):  # script mode runs the user's code (--pid alone only reads)
        run_probe("gc", ProbeContext(timeout=5, script=str(LIGHT)))


@pytest.mark.timeout(30)
def test_gc_frame_names():
    assert is_gc_frame(Frame("gc_collect_main", "libpython3.11.so.1.0", None, native=True))
    assert is_gc_frame(Frame("collect.constprop.0", "python3.10", None, native=True))
    assert is_gc_frame(Frame("gc_collect_region", "libpython3.13.so.1.0", None, native=True))
    assert not is_gc_frame(Frame("collect", "libfoo.so", None, native=True))
    assert not is_gc_frame(Frame("gc_collect_main", "mine.py", 3, native=False))


@pytest.fixture
def start(session_job):
    """Start a target in its own session (ended with its tree at the end: conftest.session_job)."""

    def run(argv):
        proc = session_job(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.1)[0]:
                if proc.stdout.readline().strip() == b"ready":
                    return proc
        raise AssertionError(f"{argv} did not get ready")

    return run


@needs_py_spy
@pytest.mark.timeout(60)
def test_pid_mode_sees_gc_frames_in_a_live_process(start):
    proc = start([sys.executable, str(HEAVY), "300000"])
    result = gc_probe(timeout=20, pids=[proc.pid])
    if result.status == "skipped":
        pytest.skip(result.summary)  # no ptrace rights here
    assert result.status in ("warn", "fail"), result.to_dict()
    assert result.data["samples"] >= 5
    assert result.data["share"] > check_gc.WARN_SHARE
    assert result.findings[0].cause == "gc-pause"
    assert any("probe_gc_heavy.py" in site for site in result.data["gc_sites"])
    assert proc.poll() is None  # only read, never stopped for good


@needs_py_spy
@pytest.mark.timeout(60)
def test_pid_mode_idle_process_is_ok(start, monkeypatch):
    monkeypatch.setattr(check_gc, "PID_SAMPLES", 4)
    proc = start([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"])
    result = gc_probe(timeout=20, pids=[proc.pid])
    if result.status == "skipped":
        pytest.skip(result.summary)
    assert result.status == "ok", result.to_dict()
    assert result.data["samples_in_gc"] == 0 and result.data["samples"] == 4
