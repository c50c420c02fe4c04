"""Raw vendor values to devices: NVIDIA throttle bitmasks and NVML fields, amd-smi and rocm-smi JSON
shapes and units."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from debug_stuck.probes.collectors.gpu.backends import NVML_THROTTLE_BITS, text_of
from debug_stuck.probes.collectors.gpu.model import GpuDevice, GpuProcess

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
    text = text_of(value).strip()
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
