"""Where users really are: no root, no ptrace (issue 16).

The tool runs as an unprivileged user (uid 65534, `nobody`) through setpriv. It keeps only
CAP_DAC_READ_SEARCH, so it can read the installed package wherever CI put it. It has no
CAP_SYS_PTRACE and no CAP_KILL, so ptrace and signals follow the normal rules for a user. The
targets are real processes:
- a root job (another user's);
- a job of the same user that made itself non-dumpable (PR_SET_DUMPABLE 0);
- the same job with debug_stuck.hook installed.
Every process is killed by its PID in a finalizer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import end_process_tree
from debug_stuck.hook import hook_dir, process_start_ticks
from debug_stuck.probes.collectors.hook_dump import find_marker, parse_dump, read_heartbeat

TARGETS = Path(__file__).resolve().parents[1] / "targets"
NOBODY = 65534
AS_NOBODY = [
    "setpriv",
    f"--reuid={NOBODY}",
    f"--regid={NOBODY}",
    "--clear-groups",
    "--inh-caps=+dac_read_search",
    "--ambient-caps=+dac_read_search",
]

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user"
)


@pytest.fixture
def spawn_job(request, session_job):
    """A hung job (as nobody, or as root), started by session_job: its whole tree is ended at the
    end; the hook's files it left are removed."""
    started = []

    def start(argv, as_nobody: bool):
        prefix = AS_NOBODY if as_nobody else []
        proc = session_job([*prefix, *argv], cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        line = proc.stdout.readline()  # "ready" once it hangs (setpriv execs: the PID is the job's)
        assert line.strip() == "ready", line
        return proc

    def end_and_clean():
        folder = Path(hook_dir(NOBODY, env={}))
        for proc in started:
            end_process_tree(proc)  # before its files go (session_job ends it again, harmlessly)
            for suffix in (".json", ".stacks", ".heartbeat"):
                (folder / f"{proc.pid}{suffix}").unlink(missing_ok=True)

    request.addfinalizer(end_and_clean)
    return start


def diagnose_as_nobody(pid: int) -> tuple:
    result = subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "debug_stuck", "diagnose", "--pid", str(pid), "--format", "json"],
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout) if result.stdout.strip() else None
    return result.returncode, report, result.stderr


@needs_root
@pytest.mark.timeout(120)
def test_another_users_job_gets_a_partial_report_that_says_what_is_missing(spawn_job):
    job = spawn_job([sys.executable, str(TARGETS / "hooked_job.py"), "--no-hook", "--stay-dumpable"], as_nobody=False)
    code, report, err = diagnose_as_nobody(job.pid)
    assert code == 0, err
    missing = report["missing"]
    assert missing and missing[0]["what"] == f"Python stacks of process(es) {job.pid}"
    assert f"sudo debug-stuck diagnose --pid {job.pid}" in missing[0]["get_it"]
    assert "another user's" in missing[0]["get_it"] and "debug_stuck.hook" in missing[0]["get_it"]
    # what could be read is there: the process, its state, its CPU
    entry = next(p for p in report["processes"] if p["pid"] == job.pid)
    assert entry["state"] == "S" and report["answers"]["cpu"]["value"] == "idle"
    assert job.poll() is None, "the job must not be disturbed"


@needs_root
@pytest.mark.timeout(120)
def test_a_non_dumpable_job_without_the_hook_is_partial_and_is_never_signalled(spawn_job):
    job = spawn_job([sys.executable, str(TARGETS / "hooked_job.py"), "--no-hook"], as_nobody=True)
    code, report, err = diagnose_as_nobody(job.pid)
    assert code == 0, err
    assert "non-dumpable" in report["missing"][0]["get_it"], report["missing"]
    time.sleep(0.5)  # a stray SIGUSR2 would have ended it by now; it must still wait
    assert job.poll() is None, "a process without the hook's marker was signalled"


@needs_root
@pytest.mark.timeout(120)
def test_a_hooked_job_gives_its_stacks_and_heartbeat_without_ptrace(spawn_job):
    job = spawn_job([sys.executable, str(TARGETS / "hooked_job.py")], as_nobody=True)
    code, report, err = diagnose_as_nobody(job.pid)
    assert code == 0, err
    assert report["missing"] == [], report["missing"]
    assert any("stacks read through its debug_stuck.hook (SIGUSR2" in n for n in report["notes"]), report["notes"]
    assert any("last heartbeat at step 4" in n for n in report["notes"]), report["notes"]
    entry = next(p for p in report["processes"] if p["pid"] == job.pid)
    functions = [f["function"] for t in entry["threads"] for f in t["frames"]]
    assert "wait_for_batch" in functions and "wait" in functions, functions
    assert report["answers"]["phase"]["value"] == "mid-run", report["answers"]  # from the heartbeat's step 4
    assert job.poll() is None, "the dump must not end the job"


@pytest.mark.timeout(60)
def test_the_hook_writes_a_marker_a_live_heartbeat_and_removes_them_at_exit(tmp_path):
    folder = tmp_path / "hook"
    code = (
        "import os, sys, debug_stuck.hook as h\n"
        f"marker = h.install({str(folder)!r})\n"
        "h.step(7)\n"
        "print(marker, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        marker_path = proc.stdout.readline().strip()
        data = json.loads(Path(marker_path).read_text())
        assert data["pid"] == proc.pid and data["signal_name"] == "SIGUSR2"
        assert data["start_ticks"] == process_start_ticks(proc.pid)
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        marker, why = find_marker_in(folder, proc.pid)
        assert marker is not None, why
        at, step = read_heartbeat(marker)
        assert step == 7 and abs(time.time() - at) < 60
    finally:
        proc.communicate("\n", timeout=20)
    assert proc.returncode == 0
    assert list(folder.iterdir()) == [], "the hook left its files behind"


@pytest.mark.timeout(30)
def test_a_marker_of_an_earlier_process_with_the_same_pid_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBUG_STUCK_HOOK_DIR", str(tmp_path))
    pid = os.getpid()
    forged = {"pid": pid, "start_ticks": (process_start_ticks(pid) or 0) + 1, "signal": 12, "signal_name": "SIGUSR2"}
    (tmp_path / f"{pid}.json").write_text(json.dumps(dict(forged, stacks="x", heartbeat="y")))
    marker, why = find_marker(pid)
    assert marker is None and "earlier process" in why


@pytest.mark.timeout(30)
def test_a_faulthandler_dump_becomes_threads_with_the_main_thread_named():
    text = [
        "Thread 0x00007f1c2a5ff6c0 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 324 in wait',
        '  File "/srv/job/loader.py", line 40 in worker',
        "",
        "Current thread 0x00007f1c2b9e8740 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 327 in wait',
        '  File "/srv/job/train.py", line 12 in wait_for_batch',
        '  File "/srv/job/train.py", line 30 in <module>',
    ]
    threads = parse_dump(4242, text)
    assert [t.name for t in threads] == ["Thread 0x00007f1c2a5ff6c0", "MainThread"]
    main = threads[1]
    assert main.tid == 4242 and [f.function for f in main.frames] == ["wait", "wait_for_batch", "<module>"]
    assert main.frames[1].path == "/srv/job/train.py"


def find_marker_in(folder: Path, pid: int):
    old = os.environ.get("DEBUG_STUCK_HOOK_DIR")
    os.environ["DEBUG_STUCK_HOOK_DIR"] = str(folder)
    try:
        return find_marker(pid)
    finally:
        if old is None:
            os.environ.pop("DEBUG_STUCK_HOOK_DIR", None)
        else:
            os.environ["DEBUG_STUCK_HOOK_DIR"] = old
