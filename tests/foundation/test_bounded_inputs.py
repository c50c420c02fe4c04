"""Inputs are bounded and bad PIDs are refused (issue 23, items 1 and 2): real files, FIFOs,
devices and processes; the CLI runs as a user runs it, under a memory limit where a regression
would otherwise eat the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import psutil
import pytest

from conftest import run_subprocess
from debug_stuck.probes.collectors.procs import read_process

MEMORY_LIMIT = 1 << 30  # far above what the CLI needs, far below /dev/zero read to the end
PID_COMMANDS = [
    ["diagnose"],
    ["stop", "--yes"],
    ["resume"],
    ["snapshot"],
    ["fix"],
    ["probe", "env"],
    ["watch"],
]


def run_limited(*args, timeout=30):
    """The CLI in a fresh interpreter that may not grow past MEMORY_LIMIT, killed at `timeout`."""

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "debug_stuck", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit_memory,
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "nobody-writes"
    os.mkfifo(path)
    return path


@pytest.fixture
def started(session_job):
    """Start processes in sessions of their own, ended with their trees at the end (conftest)."""
    return session_job


def wait_for(condition, seconds=20.0, what="condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def python_children(pid):
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [c.pid for c in children if "python" in c.name().lower()]


# --- item 1: every read of the user's input is bounded ------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_answers_from_a_device_or_a_fifo_is_refused_at_once(source, fifo):
    path = fifo if source == "fifo" else source
    proc = run_limited("diagnose", "--answers", path)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert f"answers file {path}: is a" in line and "not a regular file" in line
    assert proc.stdout == ""


@pytest.mark.timeout(90)
def test_fix_report_from_a_fifo_is_refused_at_once(fifo):
    proc = run_limited("fix", "--report", fifo)
    assert proc.returncode == 2
    assert "--report" in one_line(proc.stderr) and "is a FIFO, not a regular file" in proc.stderr


@pytest.mark.timeout(90)
def test_log_bytes_has_an_upper_bound(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1\nstep 2\n")
    proc = run_limited("diagnose", "--log", log, "--log-bytes", "99999999999")
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "--log-bytes" in line and "too large" in line and "64 MiB" in line
    ok = run_limited("diagnose", "--log", log, "--log-bytes", 64 * 1024 * 1024, "--format", "json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["errors"] == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "kind, reason",
    [
        ("fifo", "is a FIFO, not a regular file"),
        ("device", "is a character device, not a regular file"),
        ("directory", "is a directory, not a regular file"),
        ("missing", "does not exist"),
    ],
)
def test_a_log_that_is_no_file_is_in_the_report_and_said_on_stderr(kind, reason, tmp_path, fifo):
    path = {"fifo": fifo, "device": "/dev/zero", "directory": tmp_path, "missing": tmp_path / "no.log"}[kind]
    proc = run_subprocess("diagnose", "--answer", "phase=start", "--format", "json", "--log", path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert any(e.startswith(f"log {path}: ") and reason in e for e in errors), errors
    line = one_line(proc.stderr)
    assert line.startswith(f"debug-stuck: log {path}: ") and reason in line and "give the job's log file" in line


@pytest.mark.timeout(120)
def test_watch_says_a_log_that_is_no_file(tmp_path, fifo):
    proc = run_subprocess(
        "watch", "--log", fifo, "--log", tmp_path, "--report-dir", tmp_path / "reports", "--",
        sys.executable, "-c", "print('step 1')",
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"log {fifo}: is a FIFO, not a regular file; give the job's log file" in proc.stderr
    assert f"log {tmp_path}: is a directory, not a regular file" in proc.stderr


def test_the_job_s_files_are_read_only_when_regular(tmp_path, fifo):
    from debug_stuck.inputs import InputError, read_input
    from debug_stuck.probes.collectors.hook_dump import _read

    log = tmp_path / "small.log"
    log.write_bytes(b"step 1\n")
    # a caller's bound far past the file is never allocated: what is read is what is there
    assert read_input(str(log), "log", 10**13) == b"step 1\n"
    assert read_input(str(log), "log", 3, tail=True) == b" 1\n"
    with pytest.raises(InputError, match="is a FIFO"):
        read_input(str(fifo), "log", 1024, seconds=2)
    started = time.monotonic()
    with pytest.raises(OSError, match="is a FIFO"):
        _read(str(fifo))  # a hook marker swapped for a FIFO: refused, not waited on
    with pytest.raises(OSError, match="character device"):
        _read("/dev/zero")
    assert time.monotonic() - started < 2


# --- item 2: bad PIDs and bad numbers ------------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", "0"])
@pytest.mark.parametrize("command", PID_COMMANDS, ids=lambda c: c[0])
def test_a_pid_that_is_no_process_id_is_one_line_exit_2(command, value, cli):
    code, out, err = cli(*command, "--pid", value)
    assert code == 2, err
    line = one_line(err)
    assert "--pid" in line and "not a process id" in line and "positive" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "--window", "nan"],
        ["diagnose", "--window", "inf"],
        ["diagnose", "--window", "-1"],
        ["diagnose", "--node-timeout", "nan", "--hosts", "h1"],
        ["fix", "--report", "r.json", "--window", "nan"],
        ["snapshot", "--auto", "--window", "inf"],
        ["stop", "--pid", "4", "--grace", "nan"],
        ["probe", "env", "--timeout", "inf"],
        ["watch", "--progress-every", "nan", "--", "true"],
        ["watch", "--startup", "inf", "--", "true"],
    ],
    ids=lambda a: "-".join(a[:3]),
)
def test_a_float_option_that_is_not_finite_is_one_line_exit_2(argv, cli):
    code, out, err = cli(*argv)
    assert code == 2, err
    option = next(a for a in argv if a.startswith("--") and a not in ("--pid", "--report", "--hosts", "--auto"))
    assert f"argument {option}:" in one_line(err)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["diagnose", "watch", "resume"])
def test_pid_1_is_not_a_training_job(command):
    if read_process(1).python:
        pytest.skip("PID 1 is a Python process here (a container running its job as init)")
    proc = run_subprocess(command, "--pid", "1", timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    line = one_line(proc.stderr)
    assert "pid 1 " in line and "not a training job" in line
    assert "Python processes below it" in line or "no Python process runs below it" in line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["diagnose", "watch", "resume"])
def test_the_shell_that_runs_debug_stuck_is_refused(command):
    # `; exit $?` keeps the shell alive as the parent (a lone command would be exec'd in its place)
    script = f'"$0" -m debug_stuck {command} --pid $$; exit $?'
    proc = subprocess.run(["sh", "-c", script, sys.executable], capture_output=True, text=True, timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    assert "is the shell that runs debug-stuck" in one_line(proc.stderr)


@pytest.mark.timeout(60)
def test_debug_stuck_itself_is_refused():
    script = 'exec "$0" -m debug_stuck diagnose --pid $$'
    proc = subprocess.run(["sh", "-c", script, sys.executable], capture_output=True, text=True, timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    assert "is debug-stuck itself" in one_line(proc.stderr)


@pytest.mark.timeout(60)
def test_an_interactive_shell_names_the_python_job_below_it(started):
    shell = started(["bash"], stdin=subprocess.PIPE, text=True)
    shell.stdin.write(f"'{sys.executable}' -c 'import time; time.sleep(120)' &\n")
    shell.stdin.flush()
    (job,) = wait_for(lambda: python_children(shell.pid), what="the shell's Python child")
    proc = run_subprocess("diagnose", "--pid", shell.pid, timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    line = one_line(proc.stderr)
    assert "interactive or login shell" in line and f"Python processes below it: {job} (" in line


@pytest.mark.timeout(60)
def test_a_wrapper_of_unrelated_jobs_is_refused_and_of_one_job_is_taken(started):
    sleeper = f"'{sys.executable}' -c 'import time; time.sleep(120)'"
    other = f"'{sys.executable}' -c 'import time; time.sleep(121)'"  # the same command twice would be ranks
    two = started(["sh", "-c", f"{sleeper} & {other} & wait"])
    jobs = wait_for(lambda: len(python_children(two.pid)) == 2 and python_children(two.pid), what="two jobs")
    proc = run_subprocess("diagnose", "--pid", two.pid, timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    line = one_line(proc.stderr)
    assert "it runs 2 unrelated jobs" in line and all(str(pid) in line for pid in jobs)
    # one job, or ranks started side by side (one command line): the wrapper stands for the job
    assert diagnosed_ranks(started(["sh", "-c", f"{sleeper}; exit $?"]), 1) == 1
    assert diagnosed_ranks(started(["sh", "-c", f"{sleeper} & {sleeper} & wait"]), 2) == 2


SIDECAR = """
import socket, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
time.sleep(120)
"""
CLIENT = """
import socket, sys, time
sock = socket.create_connection(("127.0.0.1", int(sys.stdin.readline())))
sock.recv(1)  # the answer never comes
"""


@pytest.mark.timeout(60)
def test_a_launch_script_whose_processes_talk_to_each_other_is_one_job(started):
    """A trainer and its sidecar, started side by side by one script, talk over TCP or a pipe: one
    job, diagnosed whole; a sweep's runs share nothing and stay refused (above)."""
    for joined in ("|", "| tee /dev/null |"):
        script = f"'{sys.executable}' -c '{SIDECAR}' {joined} '{sys.executable}' -c '{CLIENT}'"
        wrapper = started(["sh", "-c", script]).pid
        pids = wait_for(lambda w=wrapper: len(python_children(w)) == 2 and python_children(w), what="both")
        wait_for(lambda p=pids: sum(len(tcp_sockets(one)) for one in p) == 3, what="the connection")
        proc = run_subprocess("diagnose", "--pid", wrapper, "--window", "0.2", "--format", "json", timeout=40)
        assert proc.returncode == 0, proc.stderr
        assert {p["pid"] for p in json.loads(proc.stdout)["processes"]} >= set(pids), joined


@pytest.mark.timeout(90)
def test_a_service_outside_the_job_is_offered_to_be_read_beside_it(started):
    """The job waits for an answer from a Python process it did not start: the fix offers to read
    both as one, and that diagnosis reads the service too."""
    sidecar = started([sys.executable, "-c", SIDECAR], stdout=subprocess.PIPE, text=True)
    client = started([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, text=True)
    client.stdin.write(sidecar.stdout.readline())
    client.stdin.flush()
    wait_for(lambda: len(tcp_sockets(sidecar.pid)) == 2, what="the accepted connection")
    wait_for(lambda: psutil.Process(client.pid).status() == psutil.STATUS_SLEEPING, what="the client's read")
    proc = run_subprocess("diagnose", "--pid", client.pid, "--window", "0.5", "--format", "json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [p["pid"] for p in report["processes"]] == [client.pid]
    both = f"debug-stuck diagnose --pid {client.pid} --pid {sidecar.pid}"
    assert both in report["diagnoses"][0]["fixes"][0]["commands"], report["diagnoses"][0]["fixes"][0]
    proc = run_subprocess(*both.split()[1:], "--window", "0.5", "--format", "json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {p["pid"] for p in report["processes"]} == {client.pid, sidecar.pid}
    assert not any(both in f["commands"] for d in report["diagnoses"] for f in d["fixes"])  # read already


def tcp_sockets(pid):
    proc = psutil.Process(pid)
    return getattr(proc, "net_connections", proc.connections)(kind="tcp")  # psutil < 6 has only the old name


def diagnosed_ranks(wrapper, count):
    wait_for(lambda: len(python_children(wrapper.pid)) == count, what="the wrapped job")
    proc = run_subprocess("diagnose", "--pid", wrapper.pid, "--window", "0.2", "--format", "json", timeout=40)
    assert proc.returncode == 0, proc.stderr
    return sum(p["role"] == "rank" for p in json.loads(proc.stdout)["processes"])


ZOMBIE_PARENT = """
import os, sys, time
child = os.fork()
if child == 0:
    os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(child))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)  # never reaps the child
"""


@pytest.mark.timeout(90)
def test_a_zombie_is_diagnosed_as_the_process_that_exited(started, tmp_path):
    note = tmp_path / "child.pid"
    parent = started([sys.executable, "-c", ZOMBIE_PARENT, str(note)])
    zombie = int(wait_for(lambda: note.exists() and note.read_text(), what="the child's PID"))
    wait_for(lambda: psutil.Process(zombie).status() == psutil.STATUS_ZOMBIE, what="the zombie")
    proc = run_subprocess("diagnose", "--pid", zombie, timeout=40)
    assert proc.returncode == 3, proc.stdout[-2000:]
    line = one_line(proc.stderr)
    assert f"process {zombie} has exited (zombie, not yet reaped by its parent {parent.pid})" in line
    assert f"--pid {parent.pid}" in line
    # with its parent named too, the dead child is the parent's dead worker, as before
    both = run_subprocess("diagnose", "--pid", parent.pid, "--pid", zombie, "--window", "0.2", "--format", "json")
    assert both.returncode == 0, both.stderr
    roles = {p["pid"]: p["role"] for p in json.loads(both.stdout)["processes"]}
    assert roles[zombie] == "worker-process"  # its parent runs no DataLoader
