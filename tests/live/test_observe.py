"""Everything above the GPU seam, fed with recorded real NVML/amd-smi outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations, classify
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.observe import observe
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"


def snapshot_with(fixture: str) -> Snapshot:
    gpus = collect_gpus(backend=RecordedBackend(FIXTURES / fixture), samples=1)
    return Snapshot(host="test", taken_at=0.0, window=1.0, processes=[], gpus=gpus)


def test_nccl_spin_wait_reads_as_busy_gpu_and_points_at_collective(knowledge):
    obs = Observations()
    observe(snapshot_with("nvml-v100-nccl-spin.json"), obs)
    assert obs.derived["gpu"].value == "busy" and obs.derived["gpu"].source == "evidence"
    assert obs.derived["platform"].value == "cuda"
    assert any("power_ratio=0.1" in line.text for line in obs.lines["gpu"])
    user = {"phase": Answer("phase", "mid-run", "user"), "step": Answer("step", "random", "user")}
    result = classify(knowledge, user, obs)
    assert result.walk.pattern == "C"
    assert result.diagnoses[0].cause == "collective", [(d.cause, d.confidence) for d in result.diagnoses[:3]]
    assert any(e.source == "gpu" for e in result.diagnoses[0].evidence)


def test_ecc_and_thermal_faults_point_at_hardware(knowledge):
    obs = Observations()
    observe(snapshot_with("nvml-a100-ecc-thermal.json"), obs)
    result = classify(knowledge, {}, obs)
    top = {d.cause for d in result.diagnoses[:2]}
    assert "gpu-hardware" in top, [(d.cause, d.confidence) for d in result.diagnoses[:3]]
    assert result.answers["errors"].value == "hardware"


@pytest.mark.parametrize("fixture", ["nvml-a100-busy.json"])
def test_healthy_busy_gpu_has_no_hardware_evidence(knowledge, fixture):
    obs = Observations()
    observe(snapshot_with(fixture), obs)
    result = classify(knowledge, {}, obs)
    hardware = next((d for d in result.diagnoses if d.cause == "gpu-hardware"), None)
    assert hardware is None or all(e.source != "gpu" or (e.weight or 0) < 0.4 for e in hardware.evidence)


# --- recorded on a real H200 by bench/gpu_check.py: NVML replayed, the dump read from text -------

H200 = FIXTURES / "h200"


def observed_h200(knowledge, scenario: str, dump: str) -> Observations:
    from debug_stuck.core.logs import observe_tail
    from debug_stuck.core.logtext import LogTail

    obs = Observations()
    observe(snapshot_with(f"nvml-h200-{scenario.replace('_', '-')}.json"), obs)
    lines = (H200 / f"{scenario}-{dump}.txt").read_text(encoding="utf-8").splitlines()
    tail = LogTail(str(H200 / f"{scenario}-{dump}.txt"), lines=lines, line_numbers=list(range(1, len(lines) + 1)))
    observe_tail(knowledge.tree, tail, obs)
    return obs


@pytest.mark.parametrize("dump", ["py-spy-native", "pystack"])
def test_a_host_in_cuda_stream_synchronize_behind_a_busy_h200_is_cuda_sync(knowledge, dump):
    obs = observed_h200(knowledge, "cuda_sync", dump)
    assert obs.derived["gpu"].value == "busy"
    result = classify(knowledge, {}, obs)
    top = result.diagnoses[0]
    assert top.cause == "cuda-sync", [(d.cause, d.confidence) for d in result.diagnoses[:3]]
    assert {"gpu", "stack"} <= {e.source for e in top.evidence}, top.evidence


def test_a_loop_waiting_for_dataloader_workers_beside_an_idle_h200_is_dataloader(knowledge):
    obs = observed_h200(knowledge, "dataloader", "py-spy")
    assert obs.derived["gpu"].value == "idle"
    result = classify(knowledge, {}, obs)
    assert result.diagnoses[0].cause == "dataloader", [(d.cause, d.confidence) for d in result.diagnoses[:3]]
    assert "cuda-sync" not in [d.cause for d in result.diagnoses[:1]]


def test_a_rank_whose_stack_has_native_frames_only_groups_without_a_python_top():
    # a process caught exiting: pystack's native unwind has no Python frame left (a live job crashed
    # the report on this before)
    from debug_stuck.live.observe import group_ranks
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    native = Frame("__GI___wait4", "libc.so.6", None, native=True)
    thread = ThreadStack(tid=852, name="MainThread", state="idle", frames=[native])
    series = StackSeries(pid=852, dumps=[StackDump(pid=852, threads=[thread], tool="pystack", seconds=0.1)])
    process = ProcInfo(pid=852, ppid=1, name="python3", cmdline=["python3", "train.py"], role="rank")
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={852: series})
    (group,) = group_ranks(snap)
    assert group.top == "(no Python frame)" and group.pids == [852]


def _two_samples_of(pid: int, first: list, second: list) -> Snapshot:
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    def dump(frames):
        thread = ThreadStack(tid=pid, name="MainThread", state="idle", frames=[Frame(*f) for f in frames])
        return StackDump(pid=pid, threads=[thread], tool="py-spy", seconds=0.1)

    process = ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "-m", "torch.distributed.run"], role="rank")
    process.state, process.cpu_percent = "S", 0.5
    series = StackSeries(pid=pid, dumps=[dump(first), dump(second)])
    return Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={pid: series})


ELASTIC = "torch/distributed/elastic/"
OUTER = [
    ("DynamicRendezvousHandler.next_rendezvous", ELASTIC + "rendezvous/dynamic_rendezvous.py", 1180),
    ("SimpleElasticAgent._rendezvous", ELASTIC + "agent/server/api.py", 501),
    ("main", "torch/distributed/run.py", 936),
]


def test_a_rendezvous_retry_loop_that_moves_between_samples_is_waiting_not_progress(knowledge):
    # torch 2.13.0: _DistributedRendezvousOpExecutor.run sleeps in _delay between tries, then reads the
    # store again; two samples land on different lines of it while the agent waits for its other node
    from debug_stuck.live.assess import polls_in_retry_loop
    from debug_stuck.live.progress import judge_progress

    sleeping = [
        ("_delay", ELASTIC + "rendezvous/utils.py", 181),
        ("run", ELASTIC + "rendezvous/dynamic_rendezvous.py", 680),
    ]
    reading = [("get_state", ELASTIC + "rendezvous/c10d_rendezvous_backend.py", 90)]
    reading += [
        ("sync", ELASTIC + "rendezvous/dynamic_rendezvous.py", 460),
        ("run", ELASTIC + "rendezvous/dynamic_rendezvous.py", 650),
    ]
    snap = _two_samples_of(700, sleeping + OUTER, reading + OUTER)
    assert polls_in_retry_loop(snap, knowledge, 700)
    assert judge_progress(snap).state == "progressing"  # without the frame table: the stack moved
    judged = judge_progress(snap, retrying=lambda pid: polls_in_retry_loop(snap, knowledge, pid))
    assert judged.hung is True, judged.reasons
    # the same movement under a training loop's frames is not a retrying wait
    train = [("train_step", "train.py", 40), ("main", "train.py", 90)]
    busy = _two_samples_of(701, [("forward", "model.py", 10)] + train, [("backward", "torch/_tensor.py", 600)] + train)
    assert not polls_in_retry_loop(busy, knowledge, 701)


def test_a_log_that_grows_only_by_one_retry_line_is_no_progress(tmp_path):
    """The fourteenth hunt's j13: the job's stack frozen in its retry loop's sleep, its log gaining one
    `... unreachable ..., retry 7 in 2s` line after another: hung, and the line is the evidence."""
    from debug_stuck.core.logstacks import REPEATED_LINE
    from debug_stuck.live.collect import LogGrowth
    from debug_stuck.live.progress import judge_progress

    sleep = [("log_metrics", "train.py", 13), ("<module>", "train.py", 20)]
    snap = _two_samples_of(702, sleep, sleep)
    line = "WARNING tracking server unreachable ([Errno 111] Connection refused), retry 7 in 2s"
    snap.logs = [LogGrowth(str(tmp_path / "train.log"), 100, 190, repeated_error=REPEATED_LINE + line)]
    judged = judge_progress(snap)
    assert judged.hung is True and f"one failure again and again (`{line}`)" in judged.reasons[0], judged.reasons
    snap.logs[0].repeated_error = None
    assert judge_progress(snap).state == "progressing"
