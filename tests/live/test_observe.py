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
