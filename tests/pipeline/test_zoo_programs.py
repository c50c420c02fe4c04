"""The hang zoo really hangs where each program's docstring says, and always cleans up.

Each test starts one program of assistant/zoo through the ``zoo`` fixture, checks the hang with plain
``py-spy dump`` and /proc (wchan, state, CPU), then checks that ``job.stop()`` leaves no process of
the tree alive.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from zoo.fixtures import zoo  # noqa: F401

from debug_stuck.zoo import spawn

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zoo needs Linux (/proc, FIFOs)"),
]

PYSPY = shutil.which("py-spy")
THREAD_RE = re.compile(r'^Thread (?P<tid>\d+) \((?P<state>[^)]*)\)(?::\s*"(?P<name>.*)")?\s*$')
FRAME_RE = re.compile(r"^\s+(?P<function>.+?) \((?P<file>.+):(?P<line>\d+)\)\s*$")


@dataclass
class Thread:
    tid: int
    state: str
    name: str
    frames: list = field(default_factory=list)  # (function, file, line), innermost first

    @property
    def functions(self) -> list[str]:
        """Short function names: ``_MultiProcessingDataLoaderIter._try_get_data`` -> ``_try_get_data``."""
        return [f.split(".")[-1] for f, _, _ in self.frames]

    def has(self, function: str, file_part: str = "") -> bool:
        return any(f.split(".")[-1] == function and file_part in path for f, path, _ in self.frames)


def parse_dump(text: str) -> list[Thread]:
    threads: list[Thread] = []
    for line in text.splitlines():
        m = THREAD_RE.match(line)
        if m:
            threads.append(Thread(int(m["tid"]), m["state"], m["name"] or ""))
            continue
        m = FRAME_RE.match(line)
        if m and threads:
            threads[-1].frames.append((m["function"], m["file"], int(m["line"])))
    return threads


def pyspy_dump(pid: int) -> tuple[str, list[Thread]]:
    if not PYSPY:
        pytest.skip("py-spy is not installed")
    last = ""
    for _ in range(3):
        out = subprocess.run([PYSPY, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            return out.stdout, parse_dump(out.stdout)
        last = out.stderr + out.stdout
        if "ermission" in last or "ptrace" in last.lower():
            pytest.skip(f"py-spy cannot attach (needs root or CAP_SYS_PTRACE): {last.strip()[:200]}")
        time.sleep(0.2)
    raise AssertionError(f"py-spy dump --pid {pid} failed: {last}")


def main_thread(threads: list[Thread]) -> Thread:
    for t in threads:
        if t.name == "MainThread":
            return t
    raise AssertionError(f"no MainThread in {[t.name for t in threads]}")


def wait_for_stack(pid: int, predicate, timeout: float = 20.0) -> list[Thread]:
    """Dump until ``predicate(threads)`` holds (a hang is a stack that stays put; a dump right after
    READY may still catch the last microseconds before the block)."""
    deadline = time.monotonic() + timeout
    while True:
        text, threads = pyspy_dump(pid)
        try:
            if predicate(threads):
                return threads
        except AssertionError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"unexpected stack for {pid}:\n{text}")
        time.sleep(0.2)


def assert_wchan(pid: int, *names: str, tid: int | None = None, timeout: float = 10.0) -> None:
    """The thread sleeps in one of the kernel functions ``names`` (substring match: Linux 6.x says
    ``anon_pipe_write`` for ``pipe_write``). Polls: a py-spy dump interrupts the blocked syscall,
    which restarts, so right after a dump the thread can be briefly R."""
    deadline = time.monotonic() + timeout
    while True:
        state = spawn.proc_state(pid, tid)
        where = spawn.wchan(pid, tid)
        if where in ("", "0"):  # running, or a kernel that hides wchan: fall back on the state
            if state in ("S", "D"):
                return
        elif any(name in where for name in names):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"wchan of {pid} is {where!r} (state {state}), expected {names}")
        time.sleep(0.05)


def busy_fraction(pid: int, seconds: float = 1.0) -> float:
    """Share of wall time the main thread spent on a CPU or waiting in the run queue: ~1.0 for a
    spinning process however loaded the machine is (cpu_percent alone drops when cores are shared)."""
    path = f"/proc/{pid}/schedstat"
    try:
        before = [int(x) for x in Path(path).read_text().split()[:2]]
    except OSError:
        proc = psutil.Process(pid)
        proc.cpu_percent(None)
        time.sleep(seconds)
        return proc.cpu_percent(None) / 100.0
    started = time.monotonic()
    time.sleep(seconds)
    after = [int(x) for x in Path(path).read_text().split()[:2]]
    return (sum(after) - sum(before)) / 1e9 / (time.monotonic() - started)


def assert_stops_cleanly(job: spawn.ZooJob) -> None:
    procs = job.processes()
    assert procs, f"{job.name}: nothing running before stop"
    job.stop()
    alive = [p.pid for p in procs if spawn.is_alive(p)]
    assert not alive, f"{job.name}: still alive after stop: {alive}"
    assert job.pids() == []
    assert job.proc.returncode is not None
    job.stop()  # idempotent


# -- the hangs --------------------------------------------------------------------------------------


def test_dataloader_io(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("dataloader_io")
    main, stuck = job.proc.pid, job.info["worker_pid"]
    workers = job.children_of(main)
    assert stuck in [w.pid for w in workers] and len(workers) == 2

    wait_for_stack(main, lambda ts: main_thread(ts).has("_try_get_data", "torch/utils/data/dataloader.py"))
    threads = wait_for_stack(stuck, lambda ts: main_thread(ts).functions[0] == "__getitem__")
    assert main_thread(threads).has("_worker_loop", "torch/utils/data/_utils/worker.py")
    assert_wchan(stuck, "wait_for_partner")

    (other,) = [w.pid for w in workers if w.pid != stuck]
    threads = wait_for_stack(other, lambda ts: main_thread(ts).has("_worker_loop"))
    assert "__getitem__" not in main_thread(threads).functions
    assert_stops_cleanly(job)


def test_gloo_straggler(zoo):  # noqa: F811
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    job = zoo("gloo_straggler", ready_timeout=90)
    rank0, rank1 = job.rank(0), job.rank(1)
    assert (job.info["rank0_pid"], job.info["rank1_pid"]) == (rank0.pid, rank1.pid)
    assert job.proc.pid not in (rank0.pid, rank1.pid)  # the top process is the torchrun agent

    threads = wait_for_stack(
        rank0.pid, lambda ts: main_thread(ts).functions[0] == "all_reduce" and main_thread(ts).has("train")
    )
    assert main_thread(threads).has("all_reduce", "torch/distributed/distributed_c10d.py")
    threads = wait_for_stack(rank1.pid, lambda ts: main_thread(ts).has("__getitem__"))
    assert "all_reduce" not in main_thread(threads).functions
    # the agent started the ranks in sessions of their own: stop() must reach them by PID
    assert_stops_cleanly(job)
    assert not spawn.is_alive(rank0) and not spawn.is_alive(rank1)


def test_rendezvous_missing_rank(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("rendezvous_missing_rank")
    pid = job.proc.pid
    threads = wait_for_stack(pid, lambda ts: main_thread(ts).has("init_process_group", "distributed_c10d.py"))
    assert main_thread(threads).has("_create_c10d_store", "torch/distributed/rendezvous.py")
    proc = psutil.Process(pid)
    conns = proc.net_connections("tcp") if hasattr(proc, "net_connections") else proc.connections("tcp")
    listening = [c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN]
    assert job.info["master_port"] in listening
    assert proc.environ()["WORLD_SIZE"] == "2"
    assert_stops_cleanly(job)


def test_future_result(zoo):  # noqa: F811
    job = zoo("future_result")
    threads = wait_for_stack(job.proc.pid, lambda ts: main_thread(ts).functions[:2] == ["wait", "result"])
    assert main_thread(threads).has("result", "concurrent/futures/_base.py")
    (task,) = [t for t in threads if t.has("prefetch_shard")]
    assert task.functions[0] == "wait" and task.has("_worker", "concurrent/futures/thread.py")
    assert all(t.state == "idle" for t in threads)
    assert_stops_cleanly(job)


def test_torch_save_blocked(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("torch_save_blocked")
    pid = job.proc.pid
    assert_wchan(pid, "wait_for_partner")
    threads = wait_for_stack(pid, lambda ts: main_thread(ts).has("save", "torch/serialization.py"))
    assert main_thread(threads).has("save_checkpoint")
    assert_stops_cleanly(job)


def test_native_spin(zoo):  # noqa: F811
    job = zoo("native_spin")
    proc = psutil.Process(job.proc.pid)
    busy = busy_fraction(proc.pid, 1.5)
    assert busy > 0.9, f"on or waiting for a CPU {busy:.0%} of the time"  # 100% of a core when it has one
    assert proc.status() == psutil.STATUS_RUNNING
    line = job.info["line"]
    for _ in range(2):  # frozen on the same line
        _, threads = pyspy_dump(proc.pid)
        main = main_thread(threads)
        assert main.frames[0][0] == "validate_token" and main.frames[0][2] == line, main.frames
        assert "active" in main.state
    assert_stops_cleanly(job)


@pytest.mark.parametrize("mode", ["print", "logging"])
def test_stdout_pipe(zoo, mode):  # noqa: F811
    job = zoo("stdout_pipe", stdout="pipe", env={"ZOO_OUTPUT": mode})
    pid = job.proc.pid
    assert psutil.Process(pid).status() == psutil.STATUS_SLEEPING
    assert_wchan(pid, "pipe_write")  # anon_pipe_write on Linux >= 6.x
    assert os.readlink(f"/proc/{pid}/fd/1").startswith("pipe:")
    threads = wait_for_stack(pid, lambda ts: main_thread(ts).has("log_progress"))
    main = main_thread(threads)
    if mode == "print":
        assert main.functions[0] == "log_progress"
    else:
        # the handler's stream.write() (or its flush()) is where the write blocks
        assert main.functions[0] in ("emit", "flush") and main.has("emit", "logging/__init__.py")
    assert_stops_cleanly(job)


@pytest.mark.parametrize("kind", ["semaphore", "lock"])
def test_lock_deadlock(zoo, kind):  # noqa: F811
    job = zoo("lock_deadlock", env={"ZOO_LOCK_KIND": kind})
    lines = job.info["lines"]
    threads = wait_for_stack(job.proc.pid, lambda ts: main_thread(ts).has("join"))
    workers = {t.name: t for t in threads if t.name.startswith("worker-")}
    assert set(workers) == {"worker-A", "worker-B"}
    for t, function in ((workers["worker-A"], "update_params"), (workers["worker-B"], "update_stats")):
        (frame,) = [f for f in t.frames if f[0] == function]
        assert frame[2] == lines[function]  # the second acquire
        if kind == "semaphore":
            assert t.functions[:3] == ["wait", "acquire", function]
        else:
            assert t.functions[0] == function
    assert all(t.state == "idle" for t in threads)
    assert_stops_cleanly(job)


def test_gc_heavy(zoo):  # noqa: F811
    job = zoo("gc_heavy")
    pid, gc_line = job.proc.pid, job.info["gc_line"]
    in_gc = 0
    for _ in range(5):
        _, threads = pyspy_dump(pid)
        top = main_thread(threads).frames[0]
        in_gc += top[0] == "train_step" and top[2] == gc_line
        time.sleep(0.1)
    assert in_gc >= 3, f"only {in_gc}/5 samples on the gc.collect() line {gc_line}"
    busy = busy_fraction(pid, 1.0)
    assert busy > 0.7, f"on or waiting for a CPU {busy:.0%} of the time"
    deadline = time.monotonic() + 30
    while "gc_fraction" not in job.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    fractions = [float(x) for x in re.findall(r"gc_fraction ([0-9.]+)", job.log_text())]
    assert fractions and fractions[-1] > 0.8, job.log_text()
    assert_stops_cleanly(job)


def test_healthy_keeps_progressing(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("healthy")

    def last_step() -> int:
        steps = re.findall(r"^step (\d+) loss [0-9.]+$", job.log_text(), re.M)
        return int(steps[-1]) if steps else 0

    first, size = last_step(), job.log.stat().st_size
    assert first >= 5
    assert len(job.children_of(job.proc.pid)) == 2  # the DataLoader workers
    deadline = time.monotonic() + 30
    while "saved checkpoint step 20" not in job.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert last_step() >= 20 > first
    assert job.log.stat().st_size > size
    reached = last_step()
    time.sleep(0.7)
    assert last_step() > reached  # still going
    assert (job.workdir / "ckpt.pt").stat().st_size > 0, job.log_text()
    assert_stops_cleanly(job)


# -- error paths and the spawner itself -----------------------------------------------------------


def gone(pid: int, timeout: float) -> bool:
    """The process has ended and been reaped (no zombie left), within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.01)
    return False


def test_exits_soon_waits_for_its_trigger(zoo):  # noqa: F811
    job = zoo("exits_soon", args=["--child"])
    child = job.info["child"]
    assert sorted(job.pids()) == sorted([job.proc.pid, child])
    time.sleep(0.3)
    assert job.proc.poll() is None  # nothing happens until the test says so
    (job.workdir / "EXIT-CHILD").touch()
    assert gone(child, 15)
    (job.workdir / "EXIT").touch()
    assert job.proc.wait(timeout=15) == 0
    assert job.pids() == []
    job.stop()
    assert "exiting" in job.log_text()


def test_sigstopped_non_python_job_is_killed(zoo):  # noqa: F811
    job = zoo("sleep")
    assert psutil.Process(job.proc.pid).name() == "sleep"
    assert spawn.stop_signal(job) == [job.proc.pid]
    assert spawn.proc_state(job.proc.pid) == "T"
    assert_stops_cleanly(job)  # SIGKILL needs no SIGCONT


def test_sigstopped_python_job_is_killed(zoo):  # noqa: F811
    job = zoo("lock_deadlock")
    spawn.stop_signal(job)
    assert psutil.Process(job.proc.pid).status() == psutil.STATUS_STOPPED
    spawn.continue_signal(job)
    spawn.stop_signal(job)
    assert_stops_cleanly(job)


def test_start_failures_leave_nothing_running(tmp_path):
    started = []
    with pytest.raises(spawn.ZooStartError, match="no READY"):
        spawn.start("sleep", tmp_path, ready_timeout=1.0, wait_ready=True, on_spawn=started.append)
    with pytest.raises(spawn.ZooStartError, match="exited with code 3") as info:
        script = "import sys; print('boom', flush=True); sys.exit(3)"
        spawn.start("boom", tmp_path, argv=[sys.executable, "-c", script], wait_ready=True, on_spawn=started.append)
    assert "boom" in str(info.value)
    assert [job.proc.returncode is not None and job.pids() == [] for job in started] == [True, True]
    with pytest.raises(ValueError, match="unknown zoo program"):
        spawn.start("no_such_program", tmp_path)


def test_running_context_manager_always_stops(tmp_path):
    with pytest.raises(RuntimeError, match="inside"):
        with spawn.running("future_result", tmp_path) as job:
            procs = job.processes()
            raise RuntimeError("inside")
    assert procs and not any(spawn.is_alive(p) for p in procs)
