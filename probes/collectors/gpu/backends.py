"""The hardware seams: NVML and amd-smi/rocm-smi fetch raw values only (RecordedBackend replays
recorded real outputs in tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Union

from debug_stuck.bounded import run_command

# --------------------------------------------------------------------------------------------
# The seam: exceptions, the NVML field list, the backends
# --------------------------------------------------------------------------------------------


class GpuUnavailable(Exception):
    """No GPU of this vendor here (no library, no driver, no device): not an error."""


class GpuCallError(Exception):
    """A vendor call failed; the message is the vendor's own words."""


class NotSupported(GpuCallError):
    """The device does not support this query: the value is N/A, not an error."""


# The raw values an NVML backend hands up, in pynvml's own units and shapes (structs become
# dicts with the struct's field names). Read in this order for every device.
NVML_FIELDS: Dict[str, str] = {
    "name": "name",  # str
    "uuid": "UUID",  # str
    "pci_bus_id": "PCI bus id",  # str, nvmlPciInfo_t.busId
    "utilization": "utilization",  # {"gpu": %, "memory": %}
    "memory": "memory usage",  # {"total": B, "used": B, "free": B}
    "power_usage": "power usage",  # mW
    "power_limit": "enforced power limit",  # mW
    "temperature": "temperature",  # C, NVML_TEMPERATURE_GPU
    "clocks_event_reasons": "clock event (throttle) reasons",  # bitmask
    "ecc_volatile_uncorrected": "volatile uncorrected ECC count",  # int
    "ecc_aggregate_uncorrected": "aggregate uncorrected ECC count",  # int
    "retired_pages_pending": "retired pages pending status",  # 0/1
    "remapped_rows": "remapped rows",  # [correctable, uncorrectable, pending, failure]
    "pcie_replay": "PCIe replay counter",  # int
    "clock_sm": "SM clock",  # MHz
    "max_clock_sm": "max SM clock",  # MHz
    "compute_processes": "compute processes",  # [{"pid", "usedGpuMemory" (B or None)}]
    "graphics_processes": "graphics processes",  # same
}

# nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (nvml.h), in bit order.
NVML_THROTTLE_BITS: Dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}


class NvmlBackend:
    """Real NVML through pynvml. Thin on purpose: fetch, convert structs to dicts, nothing else."""

    vendor = "nvidia"
    source = "nvml"

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: Dict[int, Any] = {}

    def init(self) -> None:
        try:
            import pynvml  # the nvidia-ml-py distribution; lazily, only here
        except ImportError as exc:
            raise GpuUnavailable(f"nvidia-ml-py is not installed ({exc})") from exc
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            absent = (
                pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
                pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
                pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
            )
            if getattr(exc, "value", None) in absent:
                raise GpuUnavailable(f"NVML: {exc}") from exc
            raise GpuCallError(str(exc)) from exc
        except OSError as exc:  # a broken libnvidia-ml
            raise GpuUnavailable(f"NVML: {exc}") from exc

    def shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def device_count(self) -> int:
        return self._call(self._nvml.nvmlDeviceGetCount)

    def read(self, index: int, field_name: str) -> Any:
        nv = self._nvml
        handle = self._handles.get(index)
        if handle is None:
            handle = self._handles[index] = self._call(nv.nvmlDeviceGetHandleByIndex, index)
        if field_name == "name":
            return text_of(self._call(nv.nvmlDeviceGetName, handle))
        if field_name == "uuid":
            return text_of(self._call(nv.nvmlDeviceGetUUID, handle))
        if field_name == "pci_bus_id":
            return text_of(self._call(nv.nvmlDeviceGetPciInfo, handle).busId)
        if field_name == "utilization":
            rates = self._call(nv.nvmlDeviceGetUtilizationRates, handle)
            return {"gpu": rates.gpu, "memory": rates.memory}
        if field_name == "memory":
            mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
            return {"total": mem.total, "used": mem.used, "free": mem.free}
        if field_name == "power_usage":
            return self._call(nv.nvmlDeviceGetPowerUsage, handle)
        if field_name == "power_limit":
            return self._call(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
        if field_name == "temperature":
            return self._call(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
        if field_name == "clocks_event_reasons":
            fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            if fn is not None:
                try:
                    return self._call(fn, handle)
                except GpuCallError:
                    pass  # drivers before r535 only know the throttle-reasons name
            return self._call(nv.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
        if field_name in ("ecc_volatile_uncorrected", "ecc_aggregate_uncorrected"):
            counter = nv.NVML_VOLATILE_ECC if field_name == "ecc_volatile_uncorrected" else nv.NVML_AGGREGATE_ECC
            return self._call(nv.nvmlDeviceGetTotalEccErrors, handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
        if field_name == "retired_pages_pending":
            return self._call(nv.nvmlDeviceGetRetiredPagesPendingStatus, handle)
        if field_name == "remapped_rows":
            return list(self._call(nv.nvmlDeviceGetRemappedRows, handle))
        if field_name == "pcie_replay":
            return self._call(nv.nvmlDeviceGetPcieReplayCounter, handle)
        if field_name == "clock_sm":
            return self._call(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
        if field_name == "max_clock_sm":
            return self._call(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM)
        if field_name in ("compute_processes", "graphics_processes"):
            fn = (
                nv.nvmlDeviceGetComputeRunningProcesses
                if field_name == "compute_processes"
                else nv.nvmlDeviceGetGraphicsRunningProcesses
            )
            return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in self._call(fn, handle)]
        raise NotSupported(f"unknown field {field_name}")

    def _call(self, fn: Callable, *args: Any) -> Any:
        nv = self._nvml
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_SUPPORTED:
                raise NotSupported(str(exc)) from exc
            raise GpuCallError(str(exc)) from exc


def text_of(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class GpuCallTimedOut(GpuCallError):
    """A CLI tool did not answer within its bound."""


AMD_SMI_ARGV: Dict[str, List[str]] = {
    "metric": ["amd-smi", "metric", "--json"],
    "usage": ["amd-smi", "metric", "--usage", "--json"],
    "static": ["amd-smi", "static", "--json"],
    "process": ["amd-smi", "process", "--json"],
    "bad_pages": ["amd-smi", "bad-pages", "--pending", "--json"],
}
ROCM_SMI_ARGV: Dict[str, List[str]] = {
    "metric": [
        "rocm-smi",
        "--showuse",
        "--showpower",
        "--showtemp",
        "--showmeminfo",
        "vram",
        "--showmaxpower",
        "--json",
    ],
    "usage": ["rocm-smi", "--showuse", "--json"],
    "process": ["rocm-smi", "--showpids", "--json"],
}


class AmdSmiBackend:
    """`amd-smi` (or, with tool="rocm-smi", the older `rocm-smi`) through bounded subprocesses.

    `run(key, timeout)` returns the raw stdout of one of the commands in AMD_SMI_ARGV /
    ROCM_SMI_ARGV; all parsing happens above the seam.
    """

    vendor = "amd"

    def __init__(self, tool: str = "amd-smi") -> None:
        if tool not in ("amd-smi", "rocm-smi"):
            raise ValueError(f"unknown AMD tool {tool!r}")
        self.tool = tool
        self.source = tool
        self._argv = AMD_SMI_ARGV if tool == "amd-smi" else ROCM_SMI_ARGV

    def commands(self) -> Sequence[str]:
        return list(self._argv)

    def run(self, key: str, timeout: float) -> str:
        argv = self._argv.get(key)
        if argv is None:
            raise NotSupported(f"{self.tool} has no {key} command")
        try:
            result = run_command(argv, timeout=max(timeout, 0.1))
        except FileNotFoundError as exc:
            raise GpuUnavailable(f"{argv[0]} is not installed") from exc
        if result.timed_out:
            raise GpuCallTimedOut(f"`{' '.join(argv)}` did not finish within {timeout:.1f} s")
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise GpuCallError(f"`{' '.join(argv)}` exited with {result.returncode}: {' / '.join(tail)}")
        return result.stdout


class RecordedBackend:
    """Replays recorded raw outputs, for tests and for diagnosing a snapshot taken elsewhere.

    NVML: ``{"vendor": "nvidia", "devices": [{<NVML_FIELDS key>: raw value, ...}, ...]}``. A
    value ``{"error": "message"}`` makes the call raise (``"Not Supported"`` means N/A); a field
    left out is N/A. ``"utilization_series": [...]`` gives successive utilization readings.

    AMD: ``{"vendor": "amd", "tool": "amd-smi"|"rocm-smi", "outputs": {<command key>: text}}``
    where text is the raw CLI output (JSON text) of that command.
    """

    source = "recorded"

    def __init__(self, data: Union[dict, str, Path]) -> None:
        if not isinstance(data, dict):
            data = json.loads(Path(data).read_text(encoding="utf-8"))
        self.data = data
        self.vendor = data.get("vendor", "nvidia")
        self.tool = data.get("tool", "amd-smi" if self.vendor == "amd" else None)
        self._series_pos: Dict[int, int] = {}
        self._run_counts: Dict[str, int] = {}

    @classmethod
    def amd(cls, outputs: Dict[str, str], tool: str = "amd-smi") -> RecordedBackend:
        return cls({"vendor": "amd", "tool": tool, "outputs": dict(outputs)})

    # NVML side
    def init(self) -> None:
        err = self.data.get("init_error")
        if err:
            raise GpuUnavailable(err) if self.data.get("init_absent") else GpuCallError(err)

    def shutdown(self) -> None:
        pass

    def device_count(self) -> int:
        return len(self.data.get("devices", []))

    def read(self, index: int, field_name: str) -> Any:
        device = self.data["devices"][index]
        if field_name == "utilization" and "utilization_series" in device:
            series = device["utilization_series"]
            pos = self._series_pos.get(index, 0)
            self._series_pos[index] = pos + 1
            return _raise_recorded(series[min(pos, len(series) - 1)])
        if field_name not in device:
            raise NotSupported("Not Supported")
        return _raise_recorded(device[field_name])

    # AMD side
    def commands(self) -> Sequence[str]:
        return list(self.data.get("outputs", {}))

    def run(self, key: str, timeout: float) -> str:
        outputs = self.data.get("outputs", {})
        if key not in outputs:
            raise NotSupported(f"no recorded output for {key}")
        value = outputs[key]
        if isinstance(value, list):  # successive outputs (e.g. usage samples)
            n = self._run_counts.get(key, 0)
            self._run_counts[key] = n + 1
            value = value[min(n, len(value) - 1)]
        value = _raise_recorded(value)
        return value if isinstance(value, str) else json.dumps(value)


def _raise_recorded(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"error"}:
        message = str(value["error"])
        if message.lower().replace(" ", "") == "notsupported":
            raise NotSupported(message)
        raise GpuCallError(message)
    return value
