"""What a GPU reading holds: devices, the processes on them, one snapshot; the fact line the
playbooks' gpu signals match."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import List, Optional

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
