"""The helpers a main thread waits for (live.helpers.busy_helpers): a pool worker caught between two
tasks, its stack moving (sending the result it computed), works as much as one computing now."""

from __future__ import annotations

from debug_stuck.live.collect import Snapshot
from debug_stuck.live.helpers import busy_helpers
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

PARENT = [
    Frame("wait", "threading.py", 331),
    Frame("get", "multiprocessing/pool.py", 768),
    Frame("<module>", "prep.py", 9),
]
POOL = [Frame("worker", "multiprocessing/pool.py", 125), Frame("_bootstrap", "multiprocessing/process.py", 314)]
COMPUTING = [Frame("heavy", "prep.py", 5), Frame("mapstar", "multiprocessing/pool.py", 48), *POOL]
SENDING = [Frame("_send", "multiprocessing/connection.py", 373), Frame("send", "multiprocessing/connection.py", 206)]
IDLE = [
    Frame("_recv_bytes", "multiprocessing/connection.py", 430),
    Frame("get", "multiprocessing/queues.py", 367),
    *POOL,
]


def process(pid: int, ppid: int, role: str, samples: list) -> tuple:
    info = ProcInfo(pid=pid, ppid=ppid, name="python", cmdline=["python", "prep.py"], role=role)
    info.state, info.cpu_percent = "R", 95.0
    dumps = [
        StackDump(pid=pid, threads=[ThreadStack(pid, "MainThread", "active", f)], tool="py-spy", seconds=0.1)
        for f in samples
    ]
    return info, StackSeries(pid, dumps)


def snapshot(*workers) -> Snapshot:
    parent, parent_series = process(100, 1, "rank", [PARENT, PARENT])
    parent.state, parent.cpu_percent = "S", 0.0
    procs, stacks = [parent], {100: parent_series}
    for pid, samples in workers:
        info, series = process(pid, 100, "dataloader-worker", samples)
        procs.append(info)
        stacks[pid] = series
    return Snapshot(host="h", taken_at=0.0, window=1.0, processes=procs, stacks=stacks)


def test_a_worker_moving_from_its_task_to_sending_its_result_works(knowledge):
    snap = snapshot((101, [COMPUTING, COMPUTING]), (102, [COMPUTING, SENDING + POOL]))
    found = busy_helpers(snap, knowledge, 100)
    assert found is not None and found.what == "pool worker processes", found


def test_a_worker_frozen_sending_or_idle_is_no_helper_at_work(knowledge):
    stuck_send = snapshot((101, [COMPUTING, COMPUTING]), (102, [SENDING + POOL, SENDING + POOL]))
    assert busy_helpers(stuck_send, knowledge, 100) is None
    idle = snapshot((101, [COMPUTING, COMPUTING]), (102, [IDLE, IDLE]))
    assert busy_helpers(idle, knowledge, 100) is None


def test_a_joblib_parallel_whose_loky_workers_compute_is_no_hang(knowledge):
    # recorded live: the parent polls (it sleeps between looks), loky's workers compute; the resource
    # trackers beside them idle by design (was: hung, cpu-spin 93%, a worker blamed)
    import json
    from pathlib import Path

    from debug_stuck.core.classify import Observations
    from debug_stuck.live.assess import analyze
    from debug_stuck.live.wire import snapshot_from_wire

    recorded = Path(__file__).parents[1] / "fixtures" / "stacks" / "joblib-loky-snapshot.json"
    snap = snapshot_from_wire(json.loads(recorded.read_text()))
    parent = next(p.pid for p in snap.processes if p.role == "rank")
    found = busy_helpers(snap, knowledge, parent)
    assert found is not None and found.what == "pool worker processes" and len(found.members) == 2, found
    progress = analyze(knowledge, snap, Observations()).progress
    assert progress.hung is None and "while all 2 of them compute" in progress.reasons[0], progress


# the eleventh hunt's h06: `a @ a; torch.tanh(b / 3000)` with 8 threads on 2 CPUs, the main thread
# caught in libgomp at the end of the division's parallel region (its team's barrier)
IN_GOMP = [
    Frame("0x7f5a3561de8e", "libgomp.so.1", None, native=True),
    Frame("GOMP_parallel", "libgomp.so.1", None, native=True),
    Frame("at::TensorIteratorBase::for_each", "libtorch_cpu.so", None, native=True),
    Frame("at::native::(anonymous namespace)::div_true_kernel", "libtorch_cpu.so", None, native=True),
    Frame("torch::autograd::THPVariable_div", "libtorch_python.so", None, native=True),
    Frame("<module>", "train.py", 7),
]


def test_a_main_thread_at_its_openmp_teams_barrier_while_the_process_computes_waits_for_working_threads(knowledge):
    """It was called a hung cpu-spin ("keeps running inside GOMP_parallel"): libgomp's team is a native
    pool (frames.yaml libgomp-team-wait, lost_at_fork), whose threads py-spy does not show."""
    info, series = process(300, 1, "rank", [IN_GOMP, IN_GOMP])
    info.cpu_percent = 83.5
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[info], stacks={300: series})
    found = busy_helpers(snap, knowledge, 300)
    assert found is not None and found.what == "native pool threads", found
    assert "whose threads compute (84% CPU for the process)" in found.said(), found.said()
    info.state, info.cpu_percent = "S", 0.0  # a team lost at fork: the process idles, no helper at work
    assert busy_helpers(snap, knowledge, 300) is None
