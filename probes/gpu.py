"""GPU state for a hang diagnosis: utilization, power, memory, temperature, throttling, ECC.

NVIDIA GPUs are read through NVML (the ``nvidia-ml-py`` package, imported only inside
``NvmlBackend``), AMD GPUs through the ``amd-smi`` CLI (``rocm-smi`` as a fallback). The vendor
libraries and tools are "hardware seams": the backends only fetch raw values, everything that
interprets them (bitmask decoding, units, JSON shapes, the fact line) lives above the seam and is
tested with recorded real outputs through ``RecordedBackend``.

This runs on machines that are already in trouble. A wedged driver can hang ``nvmlInit`` or any
query, so the whole vendor session runs in a daemon thread with a hard time bound; one failing
call becomes ``None`` plus an entry in ``errors`` and never an exception. No GPU at all is not an
error: the snapshot says ``available=False`` with a note.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from probes.bounded import CallTimedOut, call_with_timeout, run_command

# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


@dataclass
class GpuDevice:
    index: int
    vendor: str  # "nvidia" | "amd"
    name: Optional[str] = None
    uuid: Optional[str] = None
    busid: Optional[str] = None
    util: Optional[float] = None  # percent; the highest of the samples taken
    mem_used: Optional[int] = None  # bytes
    mem_total: Optional[int] = None  # bytes
    power_w: Optional[float] = None
    power_limit_w: Optional[float] = None
    temp_c: Optional[float] = None
    # Active clock limiters, e.g. ["sw_power_cap", "hw_thermal"]; [] when none; None when unknown.
    throttle: Optional[List[str]] = field(default_factory=list)
    ecc_volatile_uncorrected: Optional[int] = None
    ecc_aggregate_uncorrected: Optional[int] = None
    # NVML: retired pages pending (pre-Ampere) or remapped rows pending (Ampere+), 0/1.
    # AMD: number of bad pages pending retirement.
    retired_pending: Optional[int] = None
    remap_failure: Optional[bool] = None
    pcie_replay: Optional[int] = None
    clocks_sm_mhz: Optional[int] = None
    clocks_sm_max_mhz: Optional[int] = None
    util_min: Optional[float] = None
    util_max: Optional[float] = None
    util_samples: int = 0

    def mem_ratio(self) -> Optional[float]:
        if self.mem_used is None or not self.mem_total:
            return None
        return self.mem_used / self.mem_total

    def power_ratio(self) -> Optional[float]:
        if self.power_w is None or not self.power_limit_w:
            return None
        return self.power_w / self.power_limit_w

    def ecc_uncorrected(self) -> Optional[int]:
        """Uncorrected ECC errors that matter now: the volatile counter, else the aggregate one."""
        if self.ecc_volatile_uncorrected is not None:
            return self.ecc_volatile_uncorrected
        return self.ecc_aggregate_uncorrected

    def fact_line(self) -> str:
        """The `gpu` evidence line of skills/README.md; unknown values are `na`."""
        if self.throttle is None:
            throttle = "na"
        else:
            throttle = ",".join(self.throttle) if self.throttle else "none"
        return (
            f"vendor={self.vendor} index={self.index} util={_fmt_int(self.util)}"
            f" power_ratio={_fmt_ratio(self.power_ratio())} mem_ratio={_fmt_ratio(self.mem_ratio())}"
            f" temp={_fmt_int(self.temp_c)} throttle={throttle}"
            f" ecc_uncorrected={_fmt_int(self.ecc_uncorrected())}"
            f" retired_pending={_fmt_int(self.retired_pending)}"
        )

    def to_dict(self) -> dict:
        data = asdict(self)
        ratio = self.mem_ratio()
        data["mem_ratio"] = None if ratio is None else round(ratio, 4)
        ratio = self.power_ratio()
        data["power_ratio"] = None if ratio is None else round(ratio, 4)
        data["fact"] = self.fact_line()
        return data


@dataclass
class GpuProcess:
    pid: int
    gpu_index: int  # -1 when the tool does not say which device (rocm-smi --showpids)
    used_memory: Optional[int]  # bytes
    name: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GpuSnapshot:
    vendor: Optional[str]  # None when no GPU
    devices: List[GpuDevice] = field(default_factory=list)
    processes: List[GpuProcess] = field(default_factory=list)
    available: bool = False  # False when no GPU / no driver: NOT an error
    note: Optional[str] = None
    errors: List[str] = field(default_factory=list)
    source: Optional[str] = None  # "nvml" | "amd-smi" | "rocm-smi" | "recorded"
    elapsed_s: Optional[float] = None

    def fact_lines(self) -> List[str]:
        return [d.fact_line() for d in self.devices]

    def to_dict(self) -> dict:
        return {
            "vendor": self.vendor,
            "available": self.available,
            "source": self.source,
            "note": self.note,
            "devices": [d.to_dict() for d in self.devices],
            "processes": [p.to_dict() for p in self.processes],
            "errors": list(self.errors),
            "elapsed_s": self.elapsed_s,
        }


def _fmt_int(value: Optional[float]) -> str:
    if value is None:
        return "na"
    return str(int(round(value)))


def _fmt_ratio(value: Optional[float]) -> str:
    if value is None:
        return "na"
    return f"{value:.2f}"


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
            return _text(self._call(nv.nvmlDeviceGetName, handle))
        if field_name == "uuid":
            return _text(self._call(nv.nvmlDeviceGetUUID, handle))
        if field_name == "pci_bus_id":
            return _text(self._call(nv.nvmlDeviceGetPciInfo, handle).busId)
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


def _text(value: Any) -> str:
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


# --------------------------------------------------------------------------------------------
# Above the seam: decoding
# --------------------------------------------------------------------------------------------


def decode_throttle(mask: Optional[int]) -> Optional[List[str]]:
    """NVML clock event (throttle) reasons bitmask -> names, in bit order; unknown bits as hex."""
    if mask is None:
        return None
    mask = int(mask)
    names = [name for bit, name in NVML_THROTTLE_BITS.items() if mask & bit]
    rest = mask & ~sum(NVML_THROTTLE_BITS)
    if rest:
        names.append(f"unknown_0x{rest:x}")
    return names


def nvidia_device_from_raw(index: int, raw: Dict[str, Any]) -> GpuDevice:
    """Turn the raw NVML values of one device (missing key = could not be read) into a GpuDevice."""
    dev = GpuDevice(index=index, vendor="nvidia")
    dev.name = _opt_str(raw.get("name"))
    dev.uuid = _opt_str(raw.get("uuid"))
    dev.busid = _opt_str(raw.get("pci_bus_id"))
    util = raw.get("utilization")
    if isinstance(util, dict) and util.get("gpu") is not None:
        dev.util = float(util["gpu"])
    mem = raw.get("memory")
    if isinstance(mem, dict):
        dev.mem_used = _opt_int(mem.get("used"))
        dev.mem_total = _opt_int(mem.get("total"))
    if raw.get("power_usage") is not None:
        dev.power_w = float(raw["power_usage"]) / 1000.0
    if raw.get("power_limit") is not None:
        dev.power_limit_w = float(raw["power_limit"]) / 1000.0
    if raw.get("temperature") is not None:
        dev.temp_c = float(raw["temperature"])
    dev.throttle = decode_throttle(raw.get("clocks_event_reasons"))
    dev.ecc_volatile_uncorrected = _opt_int(raw.get("ecc_volatile_uncorrected"))
    dev.ecc_aggregate_uncorrected = _opt_int(raw.get("ecc_aggregate_uncorrected"))
    pending = []
    if raw.get("retired_pages_pending") is not None:
        pending.append(1 if int(raw["retired_pages_pending"]) else 0)
    rows = raw.get("remapped_rows")
    if isinstance(rows, (list, tuple)) and len(rows) >= 4:
        pending.append(1 if int(rows[2]) else 0)
        dev.remap_failure = bool(int(rows[3]))
    dev.retired_pending = max(pending) if pending else None
    dev.pcie_replay = _opt_int(raw.get("pcie_replay"))
    dev.clocks_sm_mhz = _opt_int(raw.get("clock_sm"))
    dev.clocks_sm_max_mhz = _opt_int(raw.get("max_clock_sm"))
    return dev


def nvidia_processes_from_raw(index: int, raw: Dict[str, Any]) -> List[GpuProcess]:
    seen: Dict[int, GpuProcess] = {}
    for key in ("compute_processes", "graphics_processes"):
        for proc in raw.get(key) or []:
            pid = _opt_int(proc.get("pid"))
            if pid is None:
                continue
            used = _opt_int(proc.get("usedGpuMemory"))
            old = seen.get(pid)
            if old is None:
                seen[pid] = GpuProcess(pid=pid, gpu_index=index, used_memory=used)
            elif used is not None and (old.used_memory is None or used > old.used_memory):
                old.used_memory = used
    return list(seen.values())


def _opt_int(value: Any) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _opt_str(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = _text(value).strip()
    return None if not text or text.upper() == "N/A" else text


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)")
_BYTE_UNITS = {"": 1, "B": 1, "KB": 1024, "KIB": 1024, "MB": 1024**2, "MIB": 1024**2, "GB": 1024**3, "GIB": 1024**3}


def _amd_number(value: Any) -> Optional[float]:
    """amd-smi values come as 42, "42", "42 %", {"value": 42, "unit": "%"} or "N/A"."""
    num, _unit = _amd_quantity(value)
    return num


def _amd_quantity(value: Any) -> tuple:
    if isinstance(value, dict):
        num, unit = _amd_quantity(value.get("value"))
        return num, value.get("unit") or unit
    if isinstance(value, bool) or value is None:
        return None, None
    if isinstance(value, (int, float)):
        return float(value), None
    if isinstance(value, str):
        match = _NUMBER.match(value)
        if match:
            return float(match.group(1)), match.group(2) or None
    return None, None


def _amd_bytes(value: Any, default_unit: str = "B") -> Optional[int]:
    num, unit = _amd_quantity(value)
    if num is None:
        return None
    factor = _BYTE_UNITS.get((unit or default_unit).upper())
    if factor is None:
        return None
    return int(num * factor)


def parse_json_text(text: str) -> Any:
    """JSON from a CLI's stdout, skipping warning lines some versions print before it."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for n, match in enumerate(re.finditer(r"[\[{]", text)):
        if n > 50:
            break
        try:
            return decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue
    raise ValueError("no JSON in the output")


def _amd_entries(doc: Any) -> List[dict]:
    """amd-smi prints a list of per-GPU objects; ROCm 7 wraps it as {"gpu_data": [...]}."""
    if isinstance(doc, dict):
        for key in ("gpu_data", "data"):
            if isinstance(doc.get(key), list):
                return [e for e in doc[key] if isinstance(e, dict)]
        if "gpu" in doc:
            return [doc]
        return []
    if isinstance(doc, list):
        return [e for e in doc if isinstance(e, dict)]
    return []


def _amd_throttle(entry: dict) -> Optional[List[str]]:
    power = entry.get("power") if isinstance(entry.get("power"), dict) else {}
    status = power.get("throttle_status")
    names: Optional[List[str]] = None
    if isinstance(status, str) and status.upper() in ("THROTTLED", "UNTHROTTLED"):
        names = ["throttled"] if status.upper() == "THROTTLED" else []
    elif isinstance(status, bool):
        names = ["throttled"] if status else []
    violations = entry.get("throttle")
    if isinstance(violations, dict):
        for key, value in violations.items():
            if key.endswith("_violation_status") and (value is True or str(value).upper() in ("ACTIVE", "TRUE")):
                names = (names or []) + [key[: -len("_violation_status")]]
    return names


def amd_devices_from_metric(doc: Any) -> List[GpuDevice]:
    """`amd-smi metric --json` -> devices (one per "gpu" entry)."""
    devices = []
    for pos, entry in enumerate(_amd_entries(doc)):
        index = _opt_int(entry.get("gpu"))
        dev = GpuDevice(index=pos if index is None else index, vendor="amd")
        usage = entry.get("usage") if isinstance(entry.get("usage"), dict) else {}
        dev.util = _amd_number(usage.get("gfx_activity"))
        power = entry.get("power") if isinstance(entry.get("power"), dict) else {}
        dev.power_w = _amd_number(power.get("socket_power"))
        if dev.power_w is None:
            dev.power_w = _amd_number(power.get("average_socket_power"))
        temps = entry.get("temperature") if isinstance(entry.get("temperature"), dict) else {}
        dev.temp_c = _amd_number(temps.get("hotspot"))
        if dev.temp_c is None:
            dev.temp_c = _amd_number(temps.get("edge"))
        mem = entry.get("mem_usage") if isinstance(entry.get("mem_usage"), dict) else {}
        dev.mem_used = _amd_bytes(mem.get("used_vram"), "MB")
        dev.mem_total = _amd_bytes(mem.get("total_vram"), "MB")
        dev.throttle = _amd_throttle(entry)
        ecc = entry.get("ecc") if isinstance(entry.get("ecc"), dict) else {}
        uncorrected = _amd_number(ecc.get("total_uncorrectable_count"))
        dev.ecc_volatile_uncorrected = None if uncorrected is None else int(uncorrected)
        pcie = entry.get("pcie") if isinstance(entry.get("pcie"), dict) else {}
        replay = _amd_number(pcie.get("replay_count"))
        dev.pcie_replay = None if replay is None else int(replay)
        clock = entry.get("clock") if isinstance(entry.get("clock"), dict) else {}
        gfx = clock.get("gfx_0") if isinstance(clock.get("gfx_0"), dict) else {}
        sm = _amd_number(gfx.get("clk"))
        sm_max = _amd_number(gfx.get("max_clk"))
        dev.clocks_sm_mhz = None if sm is None else int(sm)
        dev.clocks_sm_max_mhz = None if not sm_max else int(sm_max)
        devices.append(dev)
    return devices


def amd_apply_static(devices: List[GpuDevice], doc: Any) -> None:
    """`amd-smi static --json`: name, PCI address and the power cap."""
    by_index = {d.index: d for d in devices}
    for entry in _amd_entries(doc):
        dev = by_index.get(_opt_int(entry.get("gpu")))
        if dev is None:
            continue
        asic = entry.get("asic") if isinstance(entry.get("asic"), dict) else {}
        dev.name = _opt_str(asic.get("market_name")) or dev.name
        bus = entry.get("bus") if isinstance(entry.get("bus"), dict) else {}
        dev.busid = _opt_str(bus.get("bdf")) or dev.busid
        limit = entry.get("limit") if isinstance(entry.get("limit"), dict) else {}
        for key in ("socket_power", "power_cap", "max_power"):
            cap = _amd_number(limit.get(key))
            if cap:
                dev.power_limit_w = cap
                break


def amd_usage_samples(doc: Any) -> Dict[int, float]:
    """`amd-smi metric --usage --json` (or `rocm-smi --showuse --json`) -> {gpu index: util %}."""
    if isinstance(doc, dict) and any(str(k).startswith("card") for k in doc):
        return {d.index: d.util for d in rocm_devices_from_json(doc) if d.util is not None}
    return {d.index: d.util for d in amd_devices_from_metric(doc) if d.util is not None}


def amd_processes(doc: Any) -> List[GpuProcess]:
    """`amd-smi process --json`: [{"gpu": 0, "process_list": [{"process_info": {...}}]}]."""
    processes = []
    for entry in _amd_entries(doc):
        index = _opt_int(entry.get("gpu"))
        for item in entry.get("process_list") or []:
            info = item.get("process_info", item) if isinstance(item, dict) else None
            if not isinstance(info, dict):  # "No running processes detected"
                continue
            pid = _opt_int(info.get("pid"))
            if pid is None:
                continue
            used = None
            mem = info.get("memory_usage")
            if isinstance(mem, dict):
                used = _amd_bytes(mem.get("vram_mem"))
            if used is None:
                used = _amd_bytes(info.get("mem_usage")) or _amd_bytes(info.get("mem"))
            processes.append(
                GpuProcess(
                    pid=pid, gpu_index=-1 if index is None else index, used_memory=used, name=_opt_str(info.get("name"))
                )
            )
    return processes


def amd_pending_bad_pages(doc: Any) -> Dict[int, Optional[int]]:
    """`amd-smi bad-pages --pending --json` -> {gpu index: pages pending retirement}."""
    counts: Dict[int, Optional[int]] = {}
    for entry in _amd_entries(doc):
        index = _opt_int(entry.get("gpu"))
        if index is None:
            continue
        values = entry.get("values") if isinstance(entry.get("values"), dict) else entry
        pending = values.get("pending")
        if isinstance(pending, list):
            counts[index] = len(pending)
        elif isinstance(pending, dict):
            counts[index] = 1
        elif isinstance(pending, str) and "no bad pages" in pending.lower():
            counts[index] = 0
        else:
            counts[index] = None
    return counts


_ROCM_CARD = re.compile(r"^card(\d+)$")


def rocm_devices_from_json(doc: Any) -> List[GpuDevice]:
    """`rocm-smi --showuse --showpower --showtemp --showmeminfo vram --json` -> devices."""
    devices = []
    if not isinstance(doc, dict):
        return devices
    for key, values in doc.items():
        match = _ROCM_CARD.match(str(key))
        if not match or not isinstance(values, dict):
            continue
        dev = GpuDevice(index=int(match.group(1)), vendor="amd", throttle=None)
        dev.util = _amd_number(values.get("GPU use (%)"))
        for power_key in (
            "Average Graphics Package Power (W)",
            "Current Socket Graphics Package Power (W)",
        ):
            if dev.power_w is None:
                dev.power_w = _amd_number(values.get(power_key))
        dev.power_limit_w = _amd_number(values.get("Max Graphics Package Power (W)")) or None
        for temp_key in ("Temperature (Sensor junction) (C)", "Temperature (Sensor edge) (C)"):
            if dev.temp_c is None:
                dev.temp_c = _amd_number(values.get(temp_key))
        dev.mem_total = _amd_bytes(values.get("VRAM Total Memory (B)"))
        dev.mem_used = _amd_bytes(values.get("VRAM Total Used Memory (B)"))
        dev.name = _opt_str(values.get("Card Series") or values.get("Device Name"))
        dev.busid = _opt_str(values.get("PCI Bus"))
        replay = _amd_number(values.get("PCIe Replay Count"))
        dev.pcie_replay = None if replay is None else int(replay)
        devices.append(dev)
    devices.sort(key=lambda d: d.index)
    return devices


def rocm_processes(doc: Any) -> List[GpuProcess]:
    """`rocm-smi --showpids --json`: {"system": {"PID28389": "name, gpus, vram B, sdma, cu"}}."""
    processes = []
    system = doc.get("system") if isinstance(doc, dict) else None
    if not isinstance(system, dict):
        return processes
    for key, value in system.items():
        match = re.match(r"^PID(\d+)$", str(key))
        if not match:
            continue
        parts = [p.strip() for p in str(value).split(",")]
        used = _opt_int(parts[2]) if len(parts) > 2 else None
        name = parts[0] if parts and parts[0] else None
        processes.append(GpuProcess(pid=int(match.group(1)), gpu_index=-1, used_memory=used, name=name))
    return processes


# --------------------------------------------------------------------------------------------
# Hints for errors
# --------------------------------------------------------------------------------------------

_HINTS = [
    (
        re.compile(r"GPU is lost|fallen off the bus", re.I),
        "the GPU fell off the bus: look for NVRM Xid 79 in dmesg, then reset the GPU or reboot the node",
    ),
    (re.compile(r"requires reset|reset required", re.I), "reset the GPU (nvidia-smi -r) or reboot the node"),
    (
        re.compile(r"Insufficient Permissions|No permission|permission denied", re.I),
        "run as root, or give the container the GPU device nodes",
    ),
    (
        re.compile(r"mismatch", re.I),
        "the kernel module and the user-space driver differ: reboot or reload the nvidia module after the upgrade",
    ),
    (
        re.compile(r"Timeout|did not (finish|answer|return)", re.I),
        "the driver is not answering: check dmesg for NVRM Xid / amdgpu errors",
    ),
    (re.compile(r"Driver Not Loaded", re.I), "load the driver (modprobe nvidia) or check the node's driver install"),
]


def _hint(vendor: Optional[str], message: str) -> str:
    for pattern, hint in _HINTS:
        if pattern.search(message):
            return hint
    if vendor == "amd":
        return "check that the user is in the render and video groups, and dmesg for amdgpu errors"
    return "check `nvidia-smi -q` and dmesg for NVRM Xid lines"


def _error(vendor: Optional[str], what: str, index: Optional[int], why: str) -> str:
    where = f" on GPU {index}" if index is not None else ""
    return f"could not read {what}{where}: {why} ({_hint(vendor, why)})"


# --------------------------------------------------------------------------------------------
# Bounded sessions
# --------------------------------------------------------------------------------------------


@dataclass
class _Session:
    """What a vendor session has gathered so far; read by the caller even if the worker hangs."""

    vendor: Optional[str] = None
    source: Optional[str] = None
    raw: List[Dict[str, Any]] = field(default_factory=list)  # NVML: per device raw values
    devices: List[GpuDevice] = field(default_factory=list)  # AMD: parsed as it goes
    util: Dict[int, List[float]] = field(default_factory=dict)
    processes: List[GpuProcess] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    current: str = "starting"
    unavailable: Optional[str] = None
    init_failed: bool = False
    stop: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _nvml_session(backend: Any, session: _Session, deadline: float, samples: int, interval: float) -> None:
    session.current = "nvmlInit"
    try:
        backend.init()
    except GpuUnavailable as exc:
        session.unavailable = str(exc)
        return
    except Exception as exc:  # NVML present but broken
        session.init_failed = True
        session.errors.append(f"could not initialize NVML: {exc} ({_hint('nvidia', str(exc))})")
        return
    try:
        session.current = "nvmlDeviceGetCount"
        try:
            count = int(backend.device_count())
        except Exception as exc:
            session.init_failed = True
            session.errors.append(_error("nvidia", "the GPU count", None, str(exc)))
            return
        if count == 0:
            session.unavailable = "NVML reports no NVIDIA GPU"
            return
        for index in range(count):
            raw: Dict[str, Any] = {}
            with session.lock:
                session.raw.append(raw)
            for key, label in NVML_FIELDS.items():
                if session.stop:
                    return
                session.current = f"{label} on GPU {index}"
                try:
                    value = backend.read(index, key)
                except NotSupported:
                    continue
                except Exception as exc:
                    with session.lock:
                        session.errors.append(_error("nvidia", label, index, str(exc) or type(exc).__name__))
                    continue
                with session.lock:
                    raw[key] = value
                    if key == "utilization" and isinstance(value, dict) and value.get("gpu") is not None:
                        session.util.setdefault(index, []).append(float(value["gpu"]))
        for _ in range(max(samples, 1) - 1):
            if session.stop or time.monotonic() + interval >= deadline - 0.05:
                break
            time.sleep(interval)
            for index in range(count):
                session.current = f"utilization on GPU {index} (sample)"
                try:
                    value = backend.read(index, "utilization")
                except Exception:
                    continue  # the first reading already recorded any error
                if isinstance(value, dict) and value.get("gpu") is not None:
                    with session.lock:
                        session.util.setdefault(index, []).append(float(value["gpu"]))
    finally:
        session.current = "nvmlShutdown"
        try:
            backend.shutdown()
        except Exception:
            pass
        session.current = "done"


def _amd_session(backend: Any, session: _Session, deadline: float, samples: int, interval: float) -> None:
    tool = getattr(backend, "tool", "amd-smi") or "amd-smi"

    def remaining() -> float:
        return max(deadline - time.monotonic(), 0.1)

    def run(key: str) -> Any:
        session.current = f"{tool} {key}"
        return parse_json_text(backend.run(key, remaining()))

    try:
        doc = run("metric")
    except GpuUnavailable as exc:
        session.unavailable = str(exc)
        return
    except NotSupported as exc:
        session.unavailable = str(exc)
        return
    except Exception as exc:
        session.init_failed = True
        session.errors.append(_error("amd", f"{tool} metrics", None, str(exc)))
        return
    devices = amd_devices_from_metric(doc) if tool == "amd-smi" else rocm_devices_from_json(doc)
    if not devices:
        session.unavailable = f"{tool} reports no AMD GPU"
        return
    with session.lock:
        session.devices = devices
        for dev in devices:
            if dev.util is not None:
                session.util.setdefault(dev.index, []).append(dev.util)
    available = set(backend.commands()) if hasattr(backend, "commands") else set()

    def optional(key: str, what: str, apply: Callable[[Any], None]) -> None:
        if session.stop or (available and key not in available):
            return
        try:
            apply(run(key))
        except NotSupported:
            return
        except Exception as exc:
            with session.lock:
                session.errors.append(_error("amd", what, None, str(exc)))

    if tool == "amd-smi":
        optional("static", "static GPU information (name, power cap)", lambda d: amd_apply_static(devices, d))

    for _ in range(max(samples, 1) - 1):
        if session.stop or time.monotonic() + interval + 0.5 >= deadline:
            break
        time.sleep(interval)

        def add_samples(d: Any) -> None:
            with session.lock:
                for index, value in amd_usage_samples(d).items():
                    session.util.setdefault(index, []).append(value)

        optional("usage", "GPU utilization samples", add_samples)

    def set_processes(d: Any) -> None:
        session.processes = amd_processes(d) if tool == "amd-smi" else rocm_processes(d)

    optional("process", "GPU processes", set_processes)

    if tool == "amd-smi":

        def set_pending(d: Any) -> None:
            for index, count in amd_pending_bad_pages(d).items():
                for dev in devices:
                    if dev.index == index:
                        dev.retired_pending = count

        optional("bad_pages", "pending bad pages", set_pending)
    session.current = "done"


# A real NVML session that hung is still stuck in its thread: never start a second one.
_nvml_wedged: Optional[str] = None


def collect_gpus(timeout: float = 5.0, samples: int = 2, interval: float = 0.5, backend: Any = None) -> GpuSnapshot:
    """Read every GPU of this machine within `timeout` seconds; never raises, never hangs.

    Picks NVML if it initializes, else amd-smi, else rocm-smi; with none of them the snapshot is
    `available=False` with a note (not an error). `backend` replaces the detection (tests,
    recorded snapshots). Utilization is sampled `samples` times `interval` apart: `util` is the
    highest reading, `util_min`/`util_max` the range.
    """
    global _nvml_wedged
    started = time.monotonic()
    deadline = started + max(timeout, 0.1)
    if backend is not None:
        candidates = [backend]
    else:
        candidates = []
        if _nvml_wedged is None:
            candidates.append(NvmlBackend())
        if shutil.which("amd-smi"):
            candidates.append(AmdSmiBackend("amd-smi"))
        if shutil.which("rocm-smi"):
            candidates.append(AmdSmiBackend("rocm-smi"))
    reasons = []
    if backend is None and _nvml_wedged is not None:
        reasons.append(_nvml_wedged)
    snapshot: Optional[GpuSnapshot] = None
    for candidate in candidates:
        if time.monotonic() >= deadline:
            break
        session = _Session(vendor=getattr(candidate, "vendor", None), source=getattr(candidate, "source", None))
        runner = _nvml_session if session.vendor == "nvidia" else _amd_session
        left = deadline - time.monotonic()
        try:
            call_with_timeout(
                lambda c=candidate, s=session, r=runner: r(c, s, deadline, samples, interval),
                left,
                f"{session.source} session",
            )
        except CallTimedOut:
            session.stop = True
            stuck = session.current
            tool = "nvidia-smi" if session.vendor == "nvidia" else "the same tool"
            with session.lock:
                session.errors.append(
                    f"could not read {stuck}: no answer within {timeout:g} s"
                    f" ({_hint(session.vendor, 'did not answer')}; {tool} will likely hang too)"
                )
            if isinstance(candidate, NvmlBackend):
                _nvml_wedged = f"NVML hung earlier in this process ({stuck}); not asked again"
        except Exception as exc:  # a bug in a backend must not take the report down
            session.errors.append(f"could not read the GPUs: {type(exc).__name__}: {exc}")
        if session.unavailable is not None and not session.errors:
            reasons.append(session.unavailable)
            continue
        snapshot = _snapshot_from_session(session)
        break
    if snapshot is None:
        detail = "; ".join(reasons) if reasons else "no vendor tool found"
        snapshot = GpuSnapshot(
            vendor=None,
            available=False,
            note=f"no NVIDIA or AMD GPU found (no libnvidia-ml, no amd-smi/rocm-smi): {detail}",
        )
    snapshot.elapsed_s = round(time.monotonic() - started, 3)
    return snapshot


def _snapshot_from_session(session: _Session) -> GpuSnapshot:
    with session.lock:
        if session.vendor == "nvidia":
            raws = [dict(r) for r in session.raw]
            devices = [nvidia_device_from_raw(i, raw) for i, raw in enumerate(raws)]
            processes = [p for i, raw in enumerate(raws) for p in nvidia_processes_from_raw(i, raw)]
        else:  # copies: a worker that overran its bound may still be writing
            devices = copy.deepcopy(session.devices)
            processes = copy.deepcopy(session.processes)
        util = {k: list(v) for k, v in session.util.items()}
        errors = list(session.errors)
    for dev in devices:
        readings = util.get(dev.index)
        if readings:
            dev.util_min, dev.util_max = min(readings), max(readings)
            dev.util = dev.util_max
            dev.util_samples = len(readings)
    note = None
    available = bool(devices)
    if session.init_failed:
        note = f"{session.vendor} driver present but {session.source} could not read it"
        available = False
    elif not devices:
        note = f"{session.vendor} driver present but {session.source} did not report any device in time"
    return GpuSnapshot(
        vendor=session.vendor,
        devices=devices,
        processes=processes,
        available=available,
        note=note,
        errors=errors,
        source=session.source,
    )
