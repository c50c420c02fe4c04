"""One bounded GPU reading: the vendor session in a daemon thread with a hard deadline; a failing
call becomes N/A plus an error line with a hint, never an exception; no GPU is a note."""

from __future__ import annotations

import copy
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.probes.collectors.gpu.backends import (
    NVML_FIELDS,
    AmdSmiBackend,
    GpuUnavailable,
    NotSupported,
    NvmlBackend,
)
from debug_stuck.probes.collectors.gpu.model import GpuDevice, GpuProcess, GpuSnapshot
from debug_stuck.probes.collectors.gpu.parse import (
    amd_apply_static,
    amd_devices_from_metric,
    amd_pending_bad_pages,
    amd_processes,
    amd_usage_samples,
    nvidia_device_from_raw,
    nvidia_processes_from_raw,
    parse_json_text,
    rocm_devices_from_json,
    rocm_processes,
)

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
