"""A host that turns in place beside a GPU that computes for the job is training, not hung.

The GPU half is NVML recorded on an H100 by bench/gpu_check.py (tests/fixtures/gpu/README.md):
`quiet_gpu`, a real training loop whose log says nothing after its first line (the host, GPU-bound,
sits in the optimizer's kernel launches: a stack that only loops), and `cuda_sync`, a host in
cudaStreamSynchronize behind sleeping kernels (100% busy at a low draw). It is replayed at the
hardware seam; the host half is a real process of the zoo, sampled live.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

from debug_stuck.live.collect import collect
from debug_stuck.live.progress import judge_progress
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus

GPU_FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"
RECORDED_JOB_PID = {"nvml-h100-quiet-gpu.json": 612, "nvml-h100-cuda-sync.json": 1021}  # h100/summary.json


def recorded_gpus(fixture: str, tmp_path: Path, job_pid: int | None):
    """The recording, with its job's PID in the driver's process table replaced by `job_pid` (the
    live process that stands in for it here); None keeps the recorded PID: another job's GPU."""
    data = json.loads((GPU_FIXTURES / fixture).read_text())
    for device in data["devices"]:
        for proc in device.get("compute_processes") or []:
            assert proc["pid"] == RECORDED_JOB_PID[fixture]
            if job_pid is not None:
                proc["pid"] = job_pid
    path = tmp_path / fixture
    path.write_text(json.dumps(data))
    return collect_gpus(backend=RecordedBackend(path), samples=3, interval=0.0)


@pytest.fixture
def spinning_host(zoo):  # noqa: F811
    """A real process whose main thread computes on one line and never logs (state R, 100% CPU)."""
    job = zoo("native_spin")
    return collect([job.proc.pid], window=0.5), job.proc.pid


@pytest.mark.timeout(120)
def test_a_host_that_loops_beside_its_gpu_computing_is_progressing(spinning_host, tmp_path):
    snap, pid = spinning_host
    snap.gpus = recorded_gpus("nvml-h100-quiet-gpu.json", tmp_path, pid)
    progress = judge_progress(snap)
    assert progress.hung is False and progress.state == "progressing", progress
    assert any(r.startswith("GPU 0 computes for the job: 100% busy at 652 W of 700 W") for r in progress.reasons)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "fixture, tied",
    [
        ("nvml-h100-cuda-sync.json", True),  # 100% busy at 126 W of 700: a kernel that sleeps or spins
        ("nvml-h100-quiet-gpu.json", False),  # computing, but for another job: the table names PID 612
    ],
    ids=["low-draw", "another-job"],
)
def test_a_busy_gpu_that_is_not_this_jobs_work_is_no_sign_of_progress(spinning_host, tmp_path, fixture, tied):
    snap, pid = spinning_host
    snap.gpus = recorded_gpus(fixture, tmp_path, pid if tied else None)
    progress = judge_progress(snap)
    assert progress.hung is not False, progress
    assert not any("computes for the job" in r for r in progress.reasons)


# --- no GPU: a JAX host waiting for its CPU backend's threads (tests/fixtures/jax/README.md) ------------

JAX_FIXTURES = Path(__file__).parents[1] / "fixtures" / "jax"


def recorded_jax_wait(cpu_percent: float, state: str, gpus):
    """The recorded main-thread stack of a JAX job in block_until_ready (py-spy --native --json), with
    the process readings of that run (state S, 156.5% CPU: XLA's CPU threads at work)."""
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import StackDump, StackSeries, _parse_pyspy_json

    threads = _parse_pyspy_json((JAX_FIXTURES / "block-until-ready-cpu-py-spy-native.json").read_text())
    pid = threads[0].tid
    dumps = [StackDump(pid=pid, threads=threads, tool="py-spy", seconds=0.1) for _ in range(2)]
    info = ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "bur.py"], role="rank", state=state)
    info.cpu_percent = cpu_percent
    return Snapshot(
        host="h", taken_at=0.0, window=1.0, processes=[info], stacks={pid: StackSeries(pid, dumps)}, gpus=gpus
    )


@pytest.mark.parametrize(
    "cpu_percent, state, gpu, progressing",
    [
        (156.5, "S", "none", True),  # as recorded: the CPU backend computes while the host waits
        (0.5, "S", "none", False),  # nothing computes: the wait is the whole story
        (156.5, "S", "nvidia", False),  # with a GPU the GPU's own reading tells (a hung NCCL's proxy burns CPU)
    ],
)
def test_a_jax_host_waiting_for_its_cpu_backend_that_computes_is_progressing(
    knowledge, cpu_percent, state, gpu, progressing
):
    from debug_stuck.live.assess import main_thread_wait
    from debug_stuck.probes.collectors.gpu.model import GpuSnapshot

    gpus = GpuSnapshot(vendor=None, available=False) if gpu == "none" else GpuSnapshot(vendor="nvidia", available=True)
    snap = recorded_jax_wait(cpu_percent, state, gpus)
    (pid,) = snap.stacks
    assert main_thread_wait(snap, knowledge, pid) == "cuda-sync"  # jax::PyArray::BlockUntilReady, native
    progress = judge_progress(snap, device_waits=lambda p: main_thread_wait(snap, knowledge, p) == "cuda-sync")
    assert (progress.hung is False) is progressing, progress
    said = any("waits for its device's work, which runs on the CPU" in r for r in progress.reasons)
    assert said is progressing


# --- hosts that wait for a GPU inside a CUDA call, spinning (H200, bench/gpu_check.py) ----------------

H200 = GPU_FIXTURES / "h200"


def recorded_host(job: str, nvml: str, native: bool = True):
    """A job as bench/gpu_check.py recorded it live: its main thread's frames (py-spy --native),
    frozen over two samples, its CPU and system-call reading, its GPU replayed from the same run."""
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    report = json.loads((H200 / f"{job}-report.json").read_text())
    (recorded,) = [p for p in report["processes"] if p["role"] == "rank"]
    (main,) = [t for t in recorded["threads"] if t["name"] == "MainThread"]
    frames = [Frame(f["function"], f["file"], f["line"], f.get("native", False)) for f in main["frames"]]
    frames = [f for f in frames if native or not f.native]
    pid = recorded["pid"]

    def dump():
        return StackDump(
            pid=pid, threads=[ThreadStack(pid, "MainThread", "active", frames)], tool="py-spy", seconds=0.1
        )

    process = ProcInfo(pid=pid, ppid=1, name="python3", cmdline=recorded["cmdline"].split(), role="rank")
    process.state, process.cpu_percent = recorded["state"], recorded["cpu_percent"]
    process.waits = {int(tid): wait for tid, wait in recorded["waits"].items()}  # the main thread: running
    series = StackSeries(pid, [dump(), dump()])
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={pid: series})
    snap.gpus = collect_gpus(backend=RecordedBackend(GPU_FIXTURES / nvml), samples=3, interval=0)
    return snap, pid


@pytest.mark.parametrize(
    "job, nvml, cuda_call",
    [
        # clip_grad_norm_(error_if_nonfinite=True) behind 420 s of queued kernels: torch._foreach_norm's
        # launch blocked, the queue full (frames.yaml cuda-launch-queue-full)
        ("sync_in_library", "nvml-h200-sync-in-library.json", "cuLaunchKernel"),
        # torch.cuda.empty_cache() behind the same work: cudaFree waits for the device (cuda-alloc-sync)
        ("empty_cache_wait", "nvml-h200-empty-cache.json", "cuMemFree_v2"),
    ],
)
def test_a_host_spinning_in_a_cuda_wait_inside_a_library_is_hung_on_its_gpu(knowledge, job, nvml, cuda_call):
    # Seen live on an H200: the innermost Python frame is torch's (clip_grad.py, cuda/memory.py), it never
    # waits in Python, it burns a core: read as a library's long computation, both were left undecided,
    # then (the launch, once known) called a cpu-spin. The native frames say it waits for the GPU, which
    # is 100% busy at 0.17 of its power: a kernel that does not compute.
    from debug_stuck.core.classify import Observations, classify
    from debug_stuck.core.facts import add_facts
    from debug_stuck.live.assess import analyze, main_thread_wait
    from debug_stuck.live.helpers import computes_in_library
    from debug_stuck.live.observe import observe

    snap, pid = recorded_host(job, nvml)
    assert computes_in_library(snap, knowledge, pid) is None
    assert main_thread_wait(snap, knowledge, pid) == "cuda-sync"
    obs = Observations()
    observe(snap, obs)
    live = analyze(knowledge, snap, obs)
    assert live.progress.hung is True and not live.progress.undecided_computing, live.progress
    # CUDA spins on a core while it waits: the chain ends at the GPU, not at a runaway loop
    (end,) = [hop for chain in live.chains for hop in chain.hops if hop.terminal]
    assert end.kind == "device" and end.detail.startswith(f"waits for its GPU in {cuda_call}"), end.detail
    add_facts(knowledge, obs)  # as the judge does: the frame table's wait=cuda-sync
    diagnoses = classify(knowledge, {}, obs).diagnoses
    assert diagnoses[0].cause == "cuda-sync", [(d.cause, round(d.confidence, 2)) for d in diagnoses[:3]]


def test_without_native_frames_the_same_host_is_a_library_computing(knowledge):
    # the control: a Python-only dump cannot tell a launch queue from numpy's svd, and says so
    from debug_stuck.live.helpers import computes_in_library

    snap, pid = recorded_host("sync_in_library", "nvml-h200-sync-in-library.json", native=False)
    assert computes_in_library(snap, knowledge, pid) == "_get_total_norm (torch/nn/utils/clip_grad.py:96)"


def test_a_loop_of_small_kernels_waiting_in_its_launches_beside_its_gpu_computing_is_progressing(knowledge):
    # Healthy, seen live on an H200: x.mul_() on a 16 MiB tensor in a loop, the GPU behind, so the host
    # waits in cuLaunchKernel on one line of its own code; the GPU computes for it (100% at 269 W of 700)
    from debug_stuck.core.classify import Observations
    from debug_stuck.live.assess import analyze
    from debug_stuck.live.observe import observe

    snap, pid = recorded_host("launch_bound_small", "nvml-h200-launch-bound-small.json")
    obs = Observations()
    observe(snap, obs)
    progress = analyze(knowledge, snap, obs).progress
    assert progress.hung is False and progress.state == "progressing", progress
    assert any(r.startswith("GPU 0 computes for the job: 100% busy at 269 W of 700 W") for r in progress.reasons), (
        progress.reasons
    )


@pytest.mark.parametrize(
    "job, nvml, readings",
    [
        # x.mul_() on a 64 KiB tensor in a loop, the host the bottleneck, caught in cuLaunchKernel on one
        # line of its own code: called hung (cuda-sync 93%; before the launch was known, a cpu-spin)
        ("launch_bound_tiny", "nvml-h200-launch-bound-tiny.json", "23-28% busy in each of 3 readings"),
        # an LSTM's forward over 100,000 steps (torch's own, cuDNN off): one call of torch's, inside it a
        # matmul per step; its innermost Python frame torch's (rnn.py), a core busy
        ("lstm_long", "nvml-h200-lstm-long.json", "30-32% busy in each of 3 readings"),
    ],
)
def test_a_host_launching_small_kernels_on_one_line_beside_its_gpu_partly_busy_is_progressing(
    knowledge, job, nvml, readings
):
    # Healthy, seen live on an H200. Its GPU, partly busy in every reading, runs its kernels as they come:
    # a kernel that never ends would hold it at 100%, a host that stopped launching would leave it idle.
    from debug_stuck.core.classify import Observations
    from debug_stuck.live.assess import analyze
    from debug_stuck.live.observe import observe

    snap, pid = recorded_host(job, nvml)
    obs = Observations()
    observe(snap, obs)
    progress = analyze(knowledge, snap, obs).progress
    assert progress.hung is False and progress.state == "progressing", progress
    reason = f"GPU 0 runs the job's kernels as they come: {readings} (kernels start and end)"
    assert any(r.startswith(reason) for r in progress.reasons), progress.reasons


def test_a_partly_busy_gpu_shared_with_another_process_says_nothing_of_this_job(knowledge, tmp_path):
    # the same recording with a process of another job in the driver's table: whose kernels they are
    # is unknown, so the GPU is no sign that this job's host launches them
    from debug_stuck.live.progress import fed_gpus

    snap, pid = recorded_host("launch_bound_tiny", "nvml-h200-launch-bound-tiny.json")
    assert [d.index for d in fed_gpus(snap)] == [0]
    data = json.loads((GPU_FIXTURES / "nvml-h200-launch-bound-tiny.json").read_text())
    data["devices"][0]["compute_processes"].append({"pid": pid + 1, "usedGpuMemory": 1 << 30})
    shared = tmp_path / "shared.json"
    shared.write_text(json.dumps(data))
    snap.gpus = collect_gpus(backend=RecordedBackend(shared), samples=3, interval=0)
    assert fed_gpus(snap) == []


@pytest.mark.parametrize(
    "job, nvml, inside",
    [
        # held in CUDA's driver (cuLaunchKernel): the device's business, judged by its readings
        ("launch_bound_tiny", "nvml-h200-launch-bound-tiny.json", None),
        ("sync_in_library", "nvml-h200-sync-in-library.json", None),
        # in torch's own CUDA code, launching (an LSTM step's matmul): a library at work on the host
        ("lstm_long", "nvml-h200-lstm-long.json", "libc10_cuda.so"),
    ],
)
def test_the_native_code_under_a_frozen_line_is_a_librarys_unless_it_is_the_gpu_runtime(job, nvml, inside):
    from debug_stuck.live.loops import library_native_frame

    snap, pid = recorded_host(job, nvml)
    found = library_native_frame(snap.latest_main_thread(pid).frames)
    assert (found.file if found is not None else None) == inside, found


def test_a_rocm_host_spinning_in_a_hip_wait_waits_for_its_gpu(knowledge):
    # HIP mirrors CUDA's scheduling flags (hipDeviceScheduleAuto/Spin): a host running inside
    # hipStreamSynchronize (frames.yaml hip-runtime-sync) waits for its GPU the same way
    from debug_stuck.core.classify import Observations
    from debug_stuck.live.assess import analyze
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    frames = [
        Frame("hipStreamSynchronize", "libamdhip64.so.6", None, native=True),
        Frame("synchronize", "torch/cuda/streams.py", 108),
        Frame("train", "train.py", 40),
        Frame("<module>", "train.py", 52),
    ]
    dump = StackDump(pid=77, threads=[ThreadStack(77, "MainThread", "active", frames)], tool="py-spy", seconds=0.1)
    process = ProcInfo(pid=77, ppid=1, name="python", cmdline=["python", "train.py"], role="rank")
    process.state, process.cpu_percent, process.waits = "R", 99.0, {77: {"tid": 77, "op": "running"}}
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={77: StackSeries(77, [dump, dump])})
    (end,) = [hop for chain in analyze(knowledge, snap, Observations()).chains for hop in chain.hops if hop.terminal]
    assert end.kind == "device", end.detail
    assert end.detail.startswith("waits for its GPU in hipStreamSynchronize (HIP's wait spins on a CPU core)"), (
        end.detail
    )
