"""GPU collector: decoding above the NVML / amd-smi seam, with recorded real outputs.

This machine has no GPU; everything vendor-specific is replayed through RecordedBackend from
tests/fixtures/gpu (sources in the README there), and the real NVML backend is exercised against
pynvml with its functions replaced by fakes returning pynvml's own structs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from debug_stuck.probes.collectors.gpu import collect as gpu
from debug_stuck.probes.collectors.gpu.backends import (
    AmdSmiBackend,
    GpuCallError,
    GpuUnavailable,
    NvmlBackend,
    RecordedBackend,
)
from debug_stuck.probes.collectors.gpu.collect import collect_gpus
from debug_stuck.probes.collectors.gpu.model import GpuDevice, GpuProcess
from debug_stuck.probes.collectors.gpu.parse import (
    amd_pending_bad_pages,
    decode_throttle,
    nvidia_device_from_raw,
    parse_json_text,
    rocm_processes,
)

pytestmark = pytest.mark.timeout(30)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
MiB = 1024 * 1024


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def recorded(name: str) -> RecordedBackend:
    return RecordedBackend(FIXTURES / name)


# ---------------------------------------------------------------------------------------------
# NVML, recorded
# ---------------------------------------------------------------------------------------------


def test_healthy_busy_a100s():
    snap = collect_gpus(backend=recorded("nvml-a100-busy.json"), samples=1)
    assert snap.available and snap.vendor == "nvidia" and snap.source == "recorded"
    assert snap.errors == []
    assert snap.fact_lines() == [
        "vendor=nvidia index=0 util=100 power_ratio=0.71 mem_ratio=0.09 temp=48 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
        "vendor=nvidia index=1 util=100 power_ratio=0.62 mem_ratio=0.09 temp=45 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
        "vendor=nvidia index=2 util=99 power_ratio=0.64 mem_ratio=0.09 temp=46 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
    ]
    dev = snap.devices[0]
    assert dev.name == "NVIDIA A100-SXM4-80GB"
    assert dev.busid == "00000000:01:00.0"
    assert dev.power_w == 353.0 and dev.power_limit_w == 500.0  # mW -> W
    assert dev.mem_used == 7488 * MiB and dev.mem_total == 81920 * MiB
    assert dev.uuid is None and dev.throttle is None  # not in the published summary: N/A


def test_nccl_spin_wait_is_full_util_at_low_power():
    snap = collect_gpus(backend=recorded("nvml-v100-nccl-spin.json"), samples=1)
    assert snap.fact_lines() == [
        "vendor=nvidia index=0 util=100 power_ratio=0.18 mem_ratio=0.03 temp=48 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
        "vendor=nvidia index=1 util=100 power_ratio=0.18 mem_ratio=0.03 temp=45 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
        "vendor=nvidia index=2 util=0 power_ratio=0.10 mem_ratio=0.00 temp=36 throttle=na"
        " ecc_uncorrected=0 retired_pending=na",
    ]
    spinning = snap.devices[0]
    assert spinning.util == 100 and spinning.power_ratio() < 0.2


def test_ecc_errors_pending_remap_and_thermal_throttle():
    snap = collect_gpus(backend=recorded("nvml-a100-ecc-thermal.json"), samples=1)
    assert snap.errors == []  # Not Supported (retired pages on Ampere) is N/A, not an error
    assert snap.fact_lines() == [
        "vendor=nvidia index=0 util=100 power_ratio=0.65 mem_ratio=0.73 temp=87"
        " throttle=hw_slowdown,sw_thermal,hw_thermal ecc_uncorrected=2 retired_pending=1",
        "vendor=nvidia index=1 util=97 power_ratio=0.78 mem_ratio=0.73 temp=62 throttle=none"
        " ecc_uncorrected=0 retired_pending=0",
    ]
    sick = snap.devices[0]
    assert sick.ecc_volatile_uncorrected == 2 and sick.ecc_aggregate_uncorrected == 5
    assert sick.remap_failure is False
    assert sick.pcie_replay == 0
    assert (sick.clocks_sm_mhz, sick.clocks_sm_max_mhz) == (1080, 1410)
    assert sick.uuid == "GPU-5a1c3d2e-0000-4000-8000-000000000000"
    assert snap.processes == [
        GpuProcess(pid=4242, gpu_index=0, used_memory=59000 * MiB),
        GpuProcess(pid=4243, gpu_index=1, used_memory=59000 * MiB),
    ]


def test_snapshot_to_dict_is_json_and_carries_ratios_and_util_range():
    snap = collect_gpus(backend=recorded("nvml-a100-ecc-thermal.json"), samples=1)
    data = json.loads(json.dumps(snap.to_dict()))
    dev = data["devices"][0]
    assert dev["mem_ratio"] == pytest.approx(0.7324, abs=1e-4)
    assert dev["power_ratio"] == pytest.approx(0.65)
    assert dev["util_min"] == dev["util_max"] == 100
    assert dev["throttle"] == ["hw_slowdown", "sw_thermal", "hw_thermal"]
    assert dev["fact"].startswith("vendor=nvidia index=0 util=100")
    assert data["processes"][0] == {"pid": 4242, "gpu_index": 0, "used_memory": 59000 * MiB, "name": None}
    assert data["available"] is True and data["errors"] == []


def test_utilization_is_sampled_and_keeps_min_and_max():
    data = json.loads(fixture_text("nvml-v100-nccl-spin.json"))
    data["devices"][2]["utilization_series"] = [{"gpu": 0}, {"gpu": 100}, {"gpu": 35}]
    snap = collect_gpus(backend=RecordedBackend(data), samples=3, interval=0.01)
    idle = snap.devices[2]
    assert (idle.util_min, idle.util_max, idle.util, idle.util_samples) == (0, 100, 100, 3)
    assert snap.devices[0].util_samples == 3
    assert snap.to_dict()["devices"][2]["util_min"] == 0


def test_sampling_stops_at_the_deadline():
    started = time.monotonic()
    snap = collect_gpus(backend=recorded("nvml-v100-nccl-spin.json"), timeout=1.0, samples=50, interval=0.3)
    assert time.monotonic() - started < 1.5
    assert snap.available and 1 <= snap.devices[0].util_samples < 50


def test_throttle_bitmask_decoding():
    assert decode_throttle(0) == []
    assert decode_throttle(None) is None
    assert decode_throttle(0x44) == ["sw_power_cap", "hw_thermal"]
    assert decode_throttle(0x1) == ["gpu_idle"]
    assert decode_throttle(0x80 | 0x1000) == ["hw_power_brake", "unknown_0x1000"]


def test_pre_ampere_retired_pages_pending():
    dev = nvidia_device_from_raw(3, {"retired_pages_pending": 1, "ecc_aggregate_uncorrected": 7})
    assert dev.retired_pending == 1 and dev.remap_failure is None
    assert dev.ecc_uncorrected() == 7  # no volatile counter: the aggregate one
    assert dev.fact_line() == (
        "vendor=nvidia index=3 util=na power_ratio=na mem_ratio=na temp=na throttle=na"
        " ecc_uncorrected=7 retired_pending=1"
    )


def test_fact_line_of_an_empty_device():
    assert GpuDevice(index=0, vendor="amd").fact_line() == (
        "vendor=amd index=0 util=na power_ratio=na mem_ratio=na temp=na throttle=none"
        " ecc_uncorrected=na retired_pending=na"
    )


class FailingBackend(RecordedBackend):
    """Recorded values, except that some calls raise."""

    def __init__(self, data, failures):
        super().__init__(data)
        self.failures = failures

    def read(self, index, field_name):
        exc = self.failures.get((index, field_name))
        if exc is not None:
            raise exc
        return super().read(index, field_name)


def test_one_failing_call_is_none_plus_an_error_and_the_rest_is_read():
    backend = FailingBackend(
        FIXTURES / "nvml-a100-ecc-thermal.json",
        {(0, "power_usage"): GpuCallError("GPU is lost"), (1, "temperature"): RuntimeError("boom")},
    )
    snap = collect_gpus(backend=backend, samples=1)
    assert snap.available
    first, second = snap.devices
    assert first.power_w is None and first.power_ratio() is None
    assert first.temp_c == 87 and first.power_limit_w == 400 and first.ecc_volatile_uncorrected == 2
    assert second.temp_c is None and second.power_w == 310
    assert first.fact_line() == (
        "vendor=nvidia index=0 util=100 power_ratio=na mem_ratio=0.73 temp=87"
        " throttle=hw_slowdown,sw_thermal,hw_thermal ecc_uncorrected=2 retired_pending=1"
    )
    assert snap.errors == [
        "could not read power usage on GPU 0: GPU is lost (the GPU fell off the bus: look for NVRM Xid 79"
        " in dmesg, then reset the GPU or reboot the node)",
        "could not read temperature on GPU 1: boom (check `nvidia-smi -q` and dmesg for NVRM Xid lines)",
    ]


class HangingBackend(RecordedBackend):
    """Recorded values, except that one call never returns (until the test releases it)."""

    def __init__(self, data, hang_at, release):
        super().__init__(data)
        self.hang_at = hang_at
        self.release = release

    def init(self):
        if self.hang_at == "init":
            self.release.wait(60)
        super().init()

    def read(self, index, field_name):
        if (index, field_name) == self.hang_at:
            self.release.wait(60)
        return super().read(index, field_name)


def test_a_hanging_call_is_bounded_and_reported():
    release = threading.Event()
    backend = HangingBackend(FIXTURES / "nvml-a100-ecc-thermal.json", (1, "temperature"), release)
    try:
        started = time.monotonic()
        snap = collect_gpus(backend=backend, timeout=1.5, samples=2)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 1.5 + 1.0
    assert snap.available and len(snap.devices) == 2
    assert snap.devices[0].temp_c == 87  # read before the hang: kept
    assert snap.devices[1].power_w == 310 and snap.devices[1].temp_c is None
    assert len(snap.errors) == 1
    assert snap.errors[0].startswith("could not read temperature on GPU 1: no answer within 1.5 s (")
    assert "nvidia-smi will likely hang too" in snap.errors[0]


def test_a_hanging_nvml_init_is_bounded_and_reported():
    release = threading.Event()
    backend = HangingBackend(FIXTURES / "nvml-a100-busy.json", "init", release)
    try:
        started = time.monotonic()
        snap = collect_gpus(backend=backend, timeout=1.0)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 2.0
    assert snap.vendor == "nvidia" and snap.devices == [] and not snap.available
    assert snap.errors and snap.errors[0].startswith("could not read nvmlInit: no answer within 1 s")
    assert "did not report any device" in snap.note


def test_nvml_absent_is_not_an_error():
    data = {"vendor": "nvidia", "init_error": "NVML: NVML Shared Library Not Found", "init_absent": True}
    snap = collect_gpus(backend=RecordedBackend(data))
    assert not snap.available and snap.vendor is None and snap.errors == []
    assert snap.note.startswith("no NVIDIA or AMD GPU found")
    assert "NVML Shared Library Not Found" in snap.note


def test_broken_nvml_is_reported_with_a_hint():
    data = {"vendor": "nvidia", "init_error": "Driver/library version mismatch"}
    snap = collect_gpus(backend=RecordedBackend(data))
    assert not snap.available and snap.vendor == "nvidia"
    assert snap.errors == [
        "could not initialize NVML: Driver/library version mismatch (the kernel module and the user-space"
        " driver differ: reboot or reload the nvidia module after the upgrade)"
    ]


# ---------------------------------------------------------------------------------------------
# The real NVML backend against pynvml, with pynvml's functions replaced (no GPU here)
# ---------------------------------------------------------------------------------------------


def test_nvml_backend_reads_pynvml_structs(monkeypatch):
    pynvml = pytest.importorskip("pynvml")

    def fail(code):
        def raiser(*args):
            raise pynvml.NVMLError(code)

        return raiser

    # nvidia-smi of an H100 in a hung all-gather (https://github.com/NVIDIA/nccl/issues/1550):
    # 100% util at 152 W of 700 W, 75370 of 81559 MiB, 38 C.
    util = pynvml.c_nvmlUtilization_t()
    util.gpu, util.memory = 100, 0
    mem = pynvml.c_nvmlMemory_t()
    mem.total, mem.used, mem.free = 81559 * MiB, 75370 * MiB, 6189 * MiB
    pci = pynvml.nvmlPciInfo_t()
    pci.busId = b"00000000:04:00.0"
    fakes = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
        "nvmlDeviceGetName": lambda h: "NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": lambda h: "GPU-00000000-1111-2222-3333-444444444444",
        "nvmlDeviceGetPciInfo": lambda h: pci,
        "nvmlDeviceGetUtilizationRates": lambda h: util,
        "nvmlDeviceGetMemoryInfo": lambda h: mem,
        "nvmlDeviceGetPowerUsage": lambda h: 152000,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
        "nvmlDeviceGetTemperature": lambda h, sensor: 38,
        # an old driver: the new name is missing, the deprecated one answers
        "nvmlDeviceGetCurrentClocksEventReasons": fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
        "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0,
        "nvmlDeviceGetTotalEccErrors": fail(pynvml.NVML_ERROR_NOT_SUPPORTED),
        "nvmlDeviceGetRetiredPagesPendingStatus": fail(pynvml.NVML_ERROR_NOT_SUPPORTED),
        "nvmlDeviceGetRemappedRows": lambda h: (0, 0, 0, 0),
        "nvmlDeviceGetPcieReplayCounter": fail(pynvml.NVML_ERROR_NO_PERMISSION),
        "nvmlDeviceGetClockInfo": lambda h, kind: 1980,
        "nvmlDeviceGetMaxClockInfo": lambda h, kind: 1980,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=5150, usedGpuMemory=75000 * MiB)],
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [SimpleNamespace(pid=5150, usedGpuMemory=None)],
    }
    for name, fake in fakes.items():
        monkeypatch.setattr(pynvml, name, fake)
    snap = collect_gpus(backend=NvmlBackend(), samples=1)
    assert snap.source == "nvml" and snap.available
    assert snap.fact_lines() == [
        "vendor=nvidia index=0 util=100 power_ratio=0.22 mem_ratio=0.92 temp=38 throttle=none"
        " ecc_uncorrected=na retired_pending=0"
    ]
    dev = snap.devices[0]
    assert dev.busid == "00000000:04:00.0" and dev.name == "NVIDIA H100 80GB HBM3"
    assert dev.clocks_sm_mhz == 1980 and dev.pcie_replay is None
    assert snap.processes == [GpuProcess(pid=5150, gpu_index=0, used_memory=75000 * MiB)]
    assert snap.errors == [
        "could not read PCIe replay counter on GPU 0: Insufficient Permissions (run as root, or give the"
        " container the GPU device nodes)"
    ]


def test_real_nvml_backend_says_unavailable_without_a_driver():
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(GpuUnavailable):
        NvmlBackend().init()


def test_pynvml_is_imported_lazily():
    code = "import sys, debug_stuck.probes.collectors.gpu; sys.exit(1 if 'pynvml' in sys.modules else 0)"
    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, timeout=30)
    assert result.returncode == 0


# ---------------------------------------------------------------------------------------------
# AMD, recorded
# ---------------------------------------------------------------------------------------------


def amd_outputs(**extra):
    outputs = {
        "metric": fixture_text("amd-smi-metric-rx6600.json"),
        "static": fixture_text("amd-smi-static-rx6600.json"),
        "process": fixture_text("amd-smi-process-mi300x.json"),
    }
    outputs.update(extra)
    return outputs


def test_amd_smi_metric_static_and_process():
    snap = collect_gpus(backend=RecordedBackend.amd(amd_outputs()), samples=1)
    assert snap.available and snap.vendor == "amd" and snap.errors == []
    assert snap.fact_lines() == [
        "vendor=amd index=0 util=1 power_ratio=0.06 mem_ratio=0.02 temp=37 throttle=none"
        " ecc_uncorrected=0 retired_pending=na"
    ]
    dev = snap.devices[0]
    assert dev.name == "Navi 23 [Radeon RX 6600/6600 XT"
    assert dev.busid == "0000:0b:00.0"
    assert (dev.power_w, dev.power_limit_w) == (6.0, 100.0)
    assert (dev.mem_used, dev.mem_total) == (202 * MiB, 8176 * MiB)
    assert (dev.clocks_sm_mhz, dev.clocks_sm_max_mhz) == (800, 2750)
    assert dev.pcie_replay is None  # "N/A"
    assert snap.processes == [GpuProcess(pid=2266127, gpu_index=0, used_memory=2040109465, name=None)]


def test_amd_smi_rocm7_gpu_data_wrapper_and_usage_samples():
    metric = {"gpu_data": json.loads(fixture_text("amd-smi-metric-rx6600.json"))}
    busy = json.dumps({"gpu_data": [{"gpu": 0, "usage": {"gfx_activity": {"value": 97, "unit": "%"}}}]})
    backend = RecordedBackend.amd(amd_outputs(metric=json.dumps(metric), usage=[busy]))
    snap = collect_gpus(backend=backend, samples=2, interval=0.01)
    dev = snap.devices[0]
    assert (dev.util_min, dev.util_max, dev.util_samples) == (1, 97, 2)
    assert snap.fact_lines()[0].startswith("vendor=amd index=0 util=97 power_ratio=0.06")


def test_amd_smi_throttled_and_pending_bad_pages():
    metric = json.loads(fixture_text("amd-smi-metric-rx6600.json"))
    metric[0]["power"]["throttle_status"] = "THROTTLED"
    pending = json.dumps([{"gpu": 0, "pending": [{"page_address": 1, "page_size": 4096, "status": "PENDING"}] * 2}])
    backend = RecordedBackend.amd(amd_outputs(metric=json.dumps(metric), bad_pages=pending))
    snap = collect_gpus(backend=backend, samples=1)
    assert snap.fact_lines() == [
        "vendor=amd index=0 util=1 power_ratio=0.06 mem_ratio=0.02 temp=37 throttle=throttled"
        " ecc_uncorrected=0 retired_pending=2"
    ]


def test_amd_bad_pages_shapes():
    doc = [
        {"gpu": 0, "pending": "No bad pages found."},
        {"gpu": 1, "pending": {"page_address": 4096, "page_size": 4096, "status": "PENDING"}},
        {"gpu": 2, "pending": "N/A"},
    ]
    assert amd_pending_bad_pages(doc) == {0: 0, 1: 1, 2: None}


def test_amd_smi_output_after_a_warning_line():
    # amd-smi prints this warning before its output when the user lacks the groups (ROCm/amdsmi#130)
    text = (
        "WARNING: User is missing the following required groups: render, video. Please add user to these groups.\n"
        + fixture_text("amd-smi-metric-rx6600.json")
    )
    assert parse_json_text(text)[0]["gpu"] == 0
    with pytest.raises(ValueError):
        parse_json_text("ERROR: no GPU")


def test_rocm_smi_fallback():
    backend = RecordedBackend.amd({"metric": fixture_text("rocm-smi-rx7900xtx.json")}, tool="rocm-smi")
    snap = collect_gpus(backend=backend, samples=1)
    assert snap.available and snap.vendor == "amd" and snap.errors == []
    assert snap.fact_lines() == [
        "vendor=amd index=0 util=0 power_ratio=na mem_ratio=0.03 temp=49 throttle=na"
        " ecc_uncorrected=na retired_pending=na"
    ]
    dev = snap.devices[0]
    assert (dev.power_w, dev.mem_total, dev.mem_used) == (19.0, 25753026560, 794341376)


def test_rocm_smi_showpids():
    # rocm_smi.py showPids(): one "PID<n>" entry per KFD process: name, GPUs, VRAM bytes, SDMA, CU occupancy
    doc = parse_json_text('{"system": {"PID28389": "llama-server, 1, 2353860608, 11011, 0"}}')
    assert rocm_processes(doc) == [GpuProcess(pid=28389, gpu_index=-1, used_memory=2353860608, name="llama-server")]


class FailingAmd(RecordedBackend):
    def __init__(self, data, fail=(), hang=(), release=None):
        super().__init__(data)
        self.fail, self.hang, self.release = fail, hang, release

    def run(self, key, timeout):
        if key in self.fail:
            raise GpuCallError(f"`amd-smi {key} --json` exited with 1: boom")
        if key in self.hang:
            self.release.wait(60)
        return super().run(key, timeout)


def test_amd_optional_command_failure_keeps_the_metrics():
    snap = collect_gpus(backend=FailingAmd({"vendor": "amd", "outputs": amd_outputs()}, fail=("static",)), samples=1)
    assert snap.available and snap.devices[0].util == 1 and snap.devices[0].power_limit_w is None
    assert snap.errors == [
        "could not read static GPU information (name, power cap): `amd-smi static --json` exited with 1: boom"
        " (check that the user is in the render and video groups, and dmesg for amdgpu errors)"
    ]


def test_amd_metric_failure_is_an_error_not_a_crash():
    snap = collect_gpus(backend=FailingAmd({"vendor": "amd", "outputs": amd_outputs()}, fail=("metric",)))
    assert not snap.available and snap.vendor == "amd" and snap.devices == []
    assert snap.errors[0].startswith("could not read amd-smi metrics: `amd-smi metric --json` exited with 1")


def test_amd_hanging_command_is_bounded():
    release = threading.Event()
    backend = FailingAmd({"vendor": "amd", "outputs": amd_outputs()}, hang=("process",), release=release)
    try:
        started = time.monotonic()
        snap = collect_gpus(backend=backend, timeout=1.0, samples=1)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 2.0
    assert snap.available and snap.devices[0].power_limit_w == 100.0
    assert snap.errors[0].startswith("could not read amd-smi process: no answer within 1 s")


def test_amd_backend_missing_tool_is_unavailable(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(GpuUnavailable):
        AmdSmiBackend("amd-smi").run("metric", 1.0)


# ---------------------------------------------------------------------------------------------
# This machine (no GPU)
# ---------------------------------------------------------------------------------------------


def test_this_machine_without_gpu_is_fast_and_not_an_error():
    started = time.monotonic()
    snap = collect_gpus()
    elapsed = time.monotonic() - started
    assert elapsed < 6.0
    json.dumps(snap.to_dict())
    has_gpu_stack = os.path.exists("/dev/nvidiactl") or shutil.which("amd-smi") or shutil.which("rocm-smi")
    if has_gpu_stack:
        pytest.skip("this machine has a GPU driver or tool; the no-GPU path is covered elsewhere")
    assert elapsed < 2.0
    assert not snap.available and snap.vendor is None and snap.devices == []
    assert snap.errors == []
    assert snap.note.startswith("no NVIDIA or AMD GPU found (no libnvidia-ml, no amd-smi/rocm-smi)")


def test_wedged_nvml_is_not_asked_again(monkeypatch):
    monkeypatch.setattr(gpu, "_nvml_wedged", "NVML hung earlier in this process (nvmlInit); not asked again")
    monkeypatch.setattr(gpu.shutil, "which", lambda name: None)
    snap = collect_gpus()
    assert not snap.available
    assert "NVML hung earlier in this process" in snap.note


def test_raw_nvml_recorded_on_an_h200_replays_busy_then_idle():
    busy = collect_gpus(backend=recorded("nvml-h200-cuda-sync.json"), samples=3, interval=0.0)
    idle = collect_gpus(backend=recorded("nvml-h200-dataloader.json"), samples=3, interval=0.0)
    for snap in (busy, idle):
        assert snap.available and snap.errors == []
        [dev] = snap.devices
        assert dev.name == "NVIDIA H200" and dev.power_limit_w == 700.0
        assert dev.mem_total == 150754820096 and dev.clocks_sm_mhz == dev.clocks_sm_max_mhz == 1980
        # retired pages are Not Supported on Hopper (N/A, not an error); the row remapper says none pending
        assert dev.retired_pending == 0
        assert dev.throttle == [] and dev.ecc_volatile_uncorrected == 0
    assert busy.devices[0].util == 100.0 and busy.devices[0].util_samples == 3
    assert idle.devices[0].util == 0.0
    assert busy.fact_lines() == [
        "vendor=nvidia index=0 util=100 power_ratio=0.18 mem_ratio=0.01 temp=42 throttle=none"
        " ecc_uncorrected=0 retired_pending=0"
    ]
    assert [p.pid for p in busy.processes] == [855]  # the job's own PID, as recorded (h200/summary.json)
    assert [p.pid for p in idle.processes] == [955]
