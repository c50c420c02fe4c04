"""The GIL as a wait (live.gil): a thread blocked with the GIL held, and the threads waiting to take it.

The stacks are py-spy `dump --native --json` of real processes (Python 3.11.7 by pyenv, its symbols
stripped of take_gil, py-spy 0.4.x; tests/fixtures/stacks/README.md)."""

from __future__ import annotations

from pathlib import Path

from debug_stuck.live.collect import Snapshot
from debug_stuck.live.gil import idle_gil_holder, native_call, waits_for_gil
from debug_stuck.live.parties import JobView
from debug_stuck.live.wire import snapshot_from_wire, snapshot_to_wire
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, _parse_pyspy_json

STACKS = Path(__file__).parents[1] / "fixtures" / "stacks"


def threads_of(dump: str) -> dict:
    return {t.name: t for t in _parse_pyspy_json((STACKS / dump).read_text())}


def job_of(dump: str, samples: int = 2, waits: dict | None = None) -> tuple:
    threads = list(threads_of(dump).values())
    pid = next(t.tid for t in threads if t.name == "MainThread")
    process = ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "job.py"], role="rank")
    process.state, process.waits = "S", waits or {}
    series = StackSeries(pid, [StackDump(pid=pid, threads=threads, tool="py-spy", seconds=0.1) for _ in range(samples)])
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={pid: series})
    return JobView(snap), pid, {t.name: t for t in threads}


def test_py_spy_marks_the_gil_holder():
    assert {n: t.holds_gil for n, t in threads_of("gil-held-native-lock-py-spy-native.json").items()} == {
        "MainThread": True,
        "writer": False,
    }
    assert threads_of("gil-held-socket-py-spy-native.json")["metrics-uploader"].holds_gil


def test_a_condition_wait_called_by_the_interpreter_is_a_wait_for_the_gil():
    # back from time.sleep (time_sleep in libpython), and in the eval loop (py-spy shows the Python frame)
    assert waits_for_gil(threads_of("gil-held-native-lock-py-spy-native.json")["writer"].frames) == "time_sleep"
    assert waits_for_gil(threads_of("gil-held-socket-py-spy-native.json")["MainThread"].frames) == "the eval loop"


def test_take_gil_by_name_is_a_wait_for_the_gil(knowledge):
    frames = [Frame("take_gil", "ceval_gil.h", 1, native=True), Frame("loop", "train.py", 3)]
    assert waits_for_gil(frames) == "take_gil"


def test_the_holder_and_ordinary_waits_are_no_wait_for_the_gil():
    assert waits_for_gil(threads_of("gil-held-native-lock-py-spy-native.json")["MainThread"].frames) is None
    assert waits_for_gil(threads_of("gil-held-socket-py-spy-native.json")["metrics-uploader"].frames) is None
    # Event.wait, Queue.get, Lock.acquire (semaphores: PyThread_acquire_lock_timed) and time.sleep
    # (clock_nanosleep): none is a wait for the GIL
    for name, thread in threads_of("threading-waits-py-spy-native.json").items():
        assert waits_for_gil(thread.frames) is None, name


def test_the_holder_is_the_thread_idle_with_the_gil_in_every_sample():
    job, pid, threads = job_of("gil-held-native-lock-py-spy-native.json")
    assert idle_gil_holder(job, pid).name == "MainThread"
    one_sample, pid, _ = job_of("gil-held-native-lock-py-spy-native.json", samples=1)
    assert idle_gil_holder(one_sample, pid) is None  # one sample says nothing about a window
    running, pid, threads = job_of(
        "gil-held-native-lock-py-spy-native.json", waits={threads["MainThread"].tid: {"op": "running"}}
    )
    threads["MainThread"].state = "gil"
    assert idle_gil_holder(running, pid) is None  # a thread running with the GIL is running Python
    job, pid, _ = job_of("threading-waits-py-spy-native.json")
    assert idle_gil_holder(job, pid) is None


def test_the_holders_native_call_names_ctypes():
    threads = threads_of("gil-held-native-lock-py-spy-native.json")
    assert native_call(threads["MainThread"].frames) == "pthread_mutex_lock (libc.so.6), through ctypes"
    threads = threads_of("gil-held-socket-py-spy-native.json")
    assert native_call(threads["metrics-uploader"].frames) == "recv (libc.so.6), through ctypes"


def test_the_gil_holder_travels_on_the_wire():
    job, pid, _ = job_of("gil-held-native-lock-py-spy-native.json")
    back = snapshot_from_wire(snapshot_to_wire(job.snap))
    holders = {t.name for t in back.stacks[pid].latest().threads if t.holds_gil}
    assert holders == {"MainThread"}


def test_a_gil_waiter_read_as_running_still_leads_to_the_holder():
    """take_gil waits 5 ms at a time and then asks the holder to drop the GIL: a read of the waiter's
    system call can catch it awake ("running"). Its stack in the eval loop's condition wait is what it
    does (a CI run called the zoo's gil_held socket job cpu-spin, "keeps running, never waiting")."""
    from debug_stuck.live.gil import to_gil_holder
    from debug_stuck.live.hop import Hop

    job, pid, threads = job_of("gil-held-socket-py-spy-native.json")
    uploader = threads["metrics-uploader"]
    job.snap.processes[0].waits = {pid: {"op": "running"}, uploader.tid: {"op": "recv"}}
    for op in ("futex", "running"):
        hop = Hop(pid, "rank", None, pid, "MainThread", "<genexpr> (job.py:80)", op=op, kind="cpu")
        hop.facts["loop"] = "own"
        assert to_gil_holder(job, hop, threads["MainThread"]) == uploader.tid, op
        assert hop.kind == "thread" and hop.facts == {"gil": "wait"}, hop
    hop = Hop(pid, "rank", None, pid, "MainThread", "x", op="poll")
    assert to_gil_holder(job, hop, threads["MainThread"]) is None


def test_a_rank_that_asks_for_a_whole_cpu_on_a_loaded_machine_counts_as_busy():
    """On a loaded machine a computing rank gets less CPU than it wants: with two busy processes on
    2 cores, the ddp_long_backward rank fell under 80% and was grouped with the waiting rank (HUNG in
    3 runs of 3). What its main thread asked for (running or waiting for a CPU) counts."""
    from debug_stuck.live.assess import _cpu_wanted

    loaded = ProcInfo(pid=7, ppid=1, name="python", cmdline=["python", "train.py"], cpu_percent=45.0, cpu_demand=97.0)
    idle = ProcInfo(pid=8, ppid=1, name="python", cmdline=["python", "train.py"], cpu_percent=0.5, cpu_demand=0.5)
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[loaded, idle])
    assert _cpu_wanted(snap, 7) == 97.0 and _cpu_wanted(snap, 8) == 0.5 and _cpu_wanted(snap, 9) == 0.0
