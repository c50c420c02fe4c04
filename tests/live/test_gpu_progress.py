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
