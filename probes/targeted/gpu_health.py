"""gpu-health: is the GPU itself sick? ECC, retired pages / remapped rows, heat and throttling,
clocks, PCIe replays, and the driver's own complaints in the kernel log (NVRM Xid, amdgpu).

Reads only. The device state comes from debug_stuck.probes.collectors.gpu.collect_gpus (NVML, amd-smi or rocm-smi,
each call bounded), the kernel log from debug_stuck.probes.collectors.kernel.read_kernel_log; amd-smi's per-block
ECC and deferred-error counters, which GpuDevice does not keep, are read through the same
`run(key, timeout)` seam as the rest of the AMD data. `check()` turns what was read into
findings and is what the tests feed with recorded outputs.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout, run_command
from debug_stuck.kb import load_table
from debug_stuck.probes.collectors.gpu.backends import AMD_SMI_ARGV, AmdSmiBackend, NotSupported
from debug_stuck.probes.collectors.gpu.collect import collect_gpus
from debug_stuck.probes.collectors.gpu.model import GpuDevice, GpuSnapshot
from debug_stuck.probes.collectors.gpu.parse import parse_json_text
from debug_stuck.probes.collectors.kernel import KernelLog, Runner, interesting_tagged, read_kernel_log
from debug_stuck.probes.collectors.kernel_scope import KernelJudge
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult, worst_status

NAME = "gpu-health"

CAUSE = "gpu-hardware"

# Above these the GPU slows itself down (NVIDIA slowdown temperatures are ~85-95 C; AMD junction
# temperatures run hotter, with throttling near 105-110 C).
HOT_C = {"nvidia": 90.0, "amd": 100.0}
# A link that keeps retransmitting is marginal; a handful of replays since boot is normal noise.
PCIE_REPLAY_WARN = 100
# Under load the SM clock should be near its maximum; far below it with no reason given is odd.
LOW_CLOCK_RATIO = 0.5
BUSY_UTIL = 50.0
# Throttle reasons that mean the hardware protects itself (heat, power brake), not a policy cap.
HARD_THROTTLE = (
    "hw_slowdown",
    "hw_thermal",
    "sw_thermal",
    "hw_power_brake",
    "throttled",
    # amd-smi violation statuses (MI300+): processor hot and thermal limits
    "prochot",
    "socket_thermal",
    "vr_thermal",
    "hbm_thermal",
)

# --------------------------------------------------------------------------------------------
# NVIDIA Xid events: the catalogue is data (skills/data/xid.yaml)
# --------------------------------------------------------------------------------------------

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)"
    r"(?:, pid=(?P<pid>'[^']*'|[^,\s]+))?(?:, name=(?P<name>[^,]*))?(?:,\s*(?P<detail>.*))?"
)


@dataclass
class XidEvent:
    xid: int
    pci: Optional[str]
    pid: Optional[str]
    name: Optional[str]
    detail: str
    line: str

    def to_dict(self) -> dict:
        return asdict(self)


def parse_xid(line: str) -> Optional[XidEvent]:
    m = _XID.search(line)
    if not m:
        return None
    pid = m.group("pid")
    if pid is not None:
        pid = pid.strip("'")
    name = (m.group("name") or "").strip() or None
    return XidEvent(int(m.group("xid")), m.group("pci"), pid, name, (m.group("detail") or "").strip(), line.strip())


def describe_xid(xid: int) -> Tuple[str, str, str]:
    """(severity, meaning, advice) of an Xid number, from skills/data/xid.yaml."""
    table = load_table("xid.yaml")
    entry = table["codes"].get(xid)
    if entry is None:
        unknown = table["unknown"]
        return unknown["severity"], f"Xid {xid}", unknown["advice"]
    return entry["severity"], entry["meaning"], entry["advice"]


def _pci_key(address: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """(domain, bus, device) of '0000:3b:00', 'PCI:0000:3b:00' or '00000000:3B:00.0'."""
    if not address:
        return None
    parts = address.replace("PCI:", "").split(":")
    try:
        if len(parts) >= 3:
            return int(parts[-3], 16), int(parts[-2], 16), int(parts[-1].split(".")[0], 16)
        if len(parts) == 2:
            return 0, int(parts[0], 16), int(parts[1].split(".")[0], 16)
    except ValueError:
        return None
    return None


def gpu_index_for_pci(address: Optional[str], devices: Sequence[GpuDevice]) -> Optional[int]:
    key = _pci_key(address)
    if key is None:
        return None
    for dev in devices:
        if _pci_key(dev.busid) == key:
            return dev.index
    return None


# --------------------------------------------------------------------------------------------
# amd-smi: the ECC counters GpuDevice does not keep (correctable, deferred, per block)
# --------------------------------------------------------------------------------------------

AMD_RAS_ARGV: Dict[str, List[str]] = {"ras": ["amd-smi", "metric", "--ecc", "--ecc-blocks", "--json"]}


class AmdRasBackend(AmdSmiBackend):
    """amd-smi with one more command behind the same `run(key, timeout)` seam.

    rocm-smi is not asked: `rocm-smi --showrasinfo --json` prints nothing, its table printer
    returns early in JSON mode (rocm_smi.py printTableLog); the kernel log carries AMD RAS events.
    """

    def __init__(self) -> None:
        super().__init__("amd-smi")
        self._argv = {**AMD_SMI_ARGV, **AMD_RAS_ARGV}


def _count(value: Any) -> Optional[int]:
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None  # "N/A"


def amd_ras_counts(doc: Any) -> Dict[int, dict]:
    """`amd-smi metric --ecc --ecc-blocks --json` -> {gpu: {correctable, uncorrectable, deferred, blocks}}."""
    if isinstance(doc, dict):
        entries = doc.get("gpu_data") if isinstance(doc.get("gpu_data"), list) else [doc]
    elif isinstance(doc, list):
        entries = doc
    else:
        entries = []
    out: Dict[int, dict] = {}
    for pos, entry in enumerate(e for e in entries if isinstance(e, dict)):
        index = _count(entry.get("gpu"))
        ecc = entry.get("ecc") if isinstance(entry.get("ecc"), dict) else {}
        blocks: Dict[str, dict] = {}
        raw_blocks = entry.get("ecc_blocks")
        if isinstance(raw_blocks, dict):
            for block, counts in raw_blocks.items():
                if isinstance(counts, dict):
                    blocks[str(block)] = {
                        "correctable": _count(counts.get("correctable_count")),
                        "uncorrectable": _count(counts.get("uncorrectable_count")),
                        "deferred": _count(counts.get("deferred_count")),
                    }
        out[pos if index is None else index] = {
            "correctable": _count(ecc.get("total_correctable_count")),
            "uncorrectable": _count(ecc.get("total_uncorrectable_count")),
            "deferred": _count(ecc.get("total_deferred_count")),
            "blocks": blocks,
        }
    return out


def read_amd_ras(backend: Any, timeout: float) -> Tuple[Optional[Dict[int, dict]], Optional[str]]:
    """(counts, None) or (None, why); never raises, never outlives `timeout`."""
    try:
        text = call_with_timeout(lambda: backend.run("ras", timeout), timeout + 1.0, "amd-smi ECC counters")
        return amd_ras_counts(parse_json_text(text)), None
    except NotSupported:
        return None, None
    except CallTimedOut as exc:
        return None, f"could not read the amd-smi ECC counters: {exc} (the driver is not answering?)"
    except Exception as exc:
        return None, f"could not read the amd-smi ECC counters: {exc}"


# --------------------------------------------------------------------------------------------
# Judging what was read
# --------------------------------------------------------------------------------------------

_GPU_KERNEL_KINDS = (
    "nvidia-xid",
    "nvidia-bus",
    "amdgpu-timeout",
    "amdgpu-reset",
    "amdgpu-error",
    "amdgpu-fault",
    "amdgpu-ras",
)


def _label(dev: GpuDevice) -> str:
    return f"GPU {dev.index}" + (f" ({dev.name})" if dev.name else "")


def _device_findings(dev: GpuDevice) -> List[Finding]:
    out: List[Finding] = []
    label = _label(dev)
    volatile, aggregate = dev.ecc_volatile_uncorrected, dev.ecc_aggregate_uncorrected
    if volatile:
        out.append(
            Finding(
                "fail",
                f"{label}: {volatile} uncorrected ECC error(s) since the last driver load or reset: work on it may "
                "have been lost; reset the GPU (nvidia-smi -r) or drain the node",
                CAUSE,
            )
        )
    elif aggregate:
        out.append(
            Finding(
                "warn",
                f"{label}: {aggregate} uncorrected ECC error(s) over its lifetime (none since the last reset): "
                "a GPU with a history of memory errors; suspect it first if hangs are random",
                CAUSE,
            )
        )
    if dev.remap_failure:
        out.append(
            Finding("fail", f"{label}: row remapping FAILED: the memory cannot repair itself; an RMA candidate", CAUSE)
        )
    if dev.retired_pending:
        what = "row remapping / page retirement" if dev.vendor == "nvidia" else "bad pages retirement"
        out.append(
            Finding(
                "warn",
                f"{label}: {what} pending ({dev.retired_pending}): reset the GPU or reboot to apply it",
                CAUSE,
            )
        )
    hard = [t for t in (dev.throttle or []) if t in HARD_THROTTLE]
    temp = "" if dev.temp_c is None else f" at {dev.temp_c:.0f} C"
    if hard:
        out.append(
            Finding(
                "warn",
                f"{label}: clocks throttled{temp} ({', '.join(hard)}): the job crawls rather than hangs; "
                "check cooling and power",
                CAUSE,
            )
        )
    elif dev.temp_c is not None and dev.temp_c >= HOT_C.get(dev.vendor, 90.0):
        out.append(Finding("warn", f"{label}: running hot ({dev.temp_c:.0f} C): it will throttle", CAUSE))
    if "sw_power_cap" in (dev.throttle or []):
        out.append(Finding("info", f"{label}: at its power cap (normal under full load)", CAUSE))
    sm, sm_max = dev.clocks_sm_mhz, dev.clocks_sm_max_mhz
    if sm and sm_max and dev.util is not None and dev.util >= BUSY_UTIL and sm < LOW_CLOCK_RATIO * sm_max and not hard:
        out.append(
            Finding(
                "warn",
                f"{label}: clock {sm} of {sm_max} MHz at {dev.util:.0f}% utilization: slowed with no thermal reason "
                "given (power brake, applications clocks, a locked clock?)",
                CAUSE,
            )
        )
    if dev.pcie_replay:
        severity = "warn" if dev.pcie_replay >= PCIE_REPLAY_WARN else "info"
        out.append(
            Finding(
                severity,
                f"{label}: {dev.pcie_replay} PCIe replays since boot: the link retransmits (marginal riser, cable "
                "or slot when it keeps growing)",
                CAUSE,
            )
        )
    return out


def _ras_findings(ras: Dict[int, dict], devices: Sequence[GpuDevice]) -> List[Finding]:
    out: List[Finding] = []
    known = {d.index: d for d in devices}
    for index, counts in sorted(ras.items()):
        label = _label(known[index]) if index in known else f"GPU {index}"
        dev = known.get(index)
        blocks = ", ".join(
            f"{name} {c['uncorrectable']}"
            for name, c in counts.get("blocks", {}).items()
            if c.get("uncorrectable") not in (None, 0)
        )
        # GpuDevice already carries the uncorrectable total: only add what it lacks.
        if counts.get("uncorrectable") and blocks and not (dev and dev.ecc_volatile_uncorrected):
            out.append(Finding("fail", f"{label}: uncorrectable ECC errors by block: {blocks}", CAUSE))
        elif blocks:
            out.append(Finding("info", f"{label}: uncorrectable ECC errors by block: {blocks}", CAUSE))
        if counts.get("deferred"):
            out.append(
                Finding(
                    "warn",
                    f"{label}: {counts['deferred']} deferred (poisoned) ECC error(s): data was corrupted and will "
                    "fault whoever reads it",
                    CAUSE,
                )
            )
    return out


def _xid_findings(events: List[XidEvent], devices: Sequence[GpuDevice]) -> List[Finding]:
    groups: Dict[Tuple[int, Optional[str]], List[XidEvent]] = {}
    for ev in events:
        groups.setdefault((ev.xid, ev.pci), []).append(ev)
    out: List[Finding] = []
    for (xid, pci), group in groups.items():
        severity, meaning, advice = describe_xid(xid)
        index = gpu_index_for_pci(pci, devices)
        where = f" on PCI:{pci}" if pci else ""
        if index is not None:
            where += f" (GPU {index})"
        times = f" x{len(group)}" if len(group) > 1 else ""
        procs = sorted({e.name for e in group if e.name and e.name != "<unknown>"})
        who = f", process {', '.join(procs)}" if procs else ""
        out.append(Finding(severity, f"NVRM Xid {xid}{where}{times}{who}: {meaning}: {advice}", CAUSE))
        if xid == 79:
            out.append(
                Finding(
                    "info",
                    f"the GPU{where} is gone: processes that used it block in a CUDA synchronize or a collective "
                    "until they are killed",
                    "cuda-sync",
                )
            )
    return out


def _kernel_findings(tagged: List[Tuple[str, str]]) -> List[Finding]:
    by_kind: Dict[str, List[str]] = {}
    for kind, line in tagged:
        by_kind.setdefault(kind, []).append(line)
    out: List[Finding] = []

    def last(lines: List[str]) -> str:
        text = lines[-1].strip()
        return text if len(text) <= 200 else text[:197] + "..."

    def times(lines: List[str]) -> str:
        return f" ({len(lines)} lines)" if len(lines) > 1 else ""

    if "nvidia-bus" in by_kind:
        lines = by_kind["nvidia-bus"]
        out.append(Finding("fail", f"the NVIDIA driver lost a GPU{times(lines)}: {last(lines)}", CAUSE))
        if any("fallen off the bus" in line for line in lines):
            out.append(
                Finding("info", "a GPU fell off the bus: its processes block in CUDA calls for ever", "cuda-sync")
            )
    if "amdgpu-timeout" in by_kind:
        lines = by_kind["amdgpu-timeout"]
        out.append(
            Finding(
                "fail", f"amdgpu: a GPU ring timed out (the GPU stopped responding){times(lines)}: {last(lines)}", CAUSE
            )
        )
    if "amdgpu-reset" in by_kind:
        lines = by_kind["amdgpu-reset"]
        out.append(
            Finding(
                "fail",
                f"amdgpu: the GPU was reset, which kills every context on it{times(lines)}: {last(lines)}",
                CAUSE,
            )
        )
    if "amdgpu-ras" in by_kind:
        lines = by_kind["amdgpu-ras"]
        severity = "fail" if any(re.search(r"uncorrect|poison", line, re.I) for line in lines) else "warn"
        out.append(Finding(severity, f"amdgpu RAS (memory/ECC) event{times(lines)}: {last(lines)}", CAUSE))
    for kind, what in (("amdgpu-fault", "GPU page fault"), ("amdgpu-error", "driver error")):
        if kind in by_kind:
            lines = by_kind[kind]
            out.append(Finding("warn", f"amdgpu {what}{times(lines)}: {last(lines)}", CAUSE))
    aer = [line for line in by_kind.get("hardware-error", []) if "AER" in line]
    if aer:
        out.append(Finding("warn", f"PCIe AER error(s) on a device{times(aer)}: {last(aer)}", CAUSE))
    return out


def _collection_findings(gpus: GpuSnapshot) -> List[Finding]:
    out: List[Finding] = []
    for err in gpus.errors:
        if re.search(r"GPU is lost|fallen off the bus|Unknown Error|requires reset", err, re.I):
            out.append(Finding("fail", f"the driver reports the GPU unusable: {err}", CAUSE))
        elif re.search(r"no answer within|did not (finish|answer)", err, re.I):
            out.append(Finding("fail", f"the GPU driver does not answer: {err}", CAUSE))
    return out


MAX_CONTEXT_LINES = 5


def check(
    gpus: GpuSnapshot,
    kernel_log: Optional[KernelLog],
    *,
    amd_ras: Optional[Dict[int, dict]] = None,
    extra_errors: Sequence[str] = (),
    kernel_judge: Optional[KernelJudge] = None,
) -> ProbeResult:
    """Findings from a GPU snapshot and a kernel log (either may come from recordings). With a
    `kernel_judge` (a diagnosis of one job), a kernel line counts only when it belongs to that job (a
    GPU it uses, one of its processes, within its lifetime); the others are context, said as such."""
    lines = kernel_log.lines if kernel_log is not None else []
    tagged = [
        (kind, line)
        for kind, line in interesting_tagged(lines)
        if kind in _GPU_KERNEL_KINDS or (kind == "hardware-error" and "AER" in line)
    ]
    context: List[Tuple[str, str]] = []
    if kernel_judge is not None:
        boot = getattr(kernel_log, "boot_time", None)
        judged = [(kind, line, kernel_judge(kind, line, boot)) for kind, line in tagged]
        tagged = [(kind, line) for kind, line, (belongs, _) in judged if belongs]
        context = [(why, line) for _, line, (belongs, why) in judged if not belongs]
    events = [ev for ev in (parse_xid(line) for kind, line in tagged if kind == "nvidia-xid") if ev is not None]
    data: Dict[str, Any] = {
        "vendor": gpus.vendor,
        "source": gpus.source,
        "available": gpus.available,
        "note": gpus.note,
        "devices": [d.to_dict() for d in gpus.devices],
        "errors": list(gpus.errors) + list(extra_errors),
        "xid": [e.to_dict() for e in events],
        "kernel_lines": [line for _, line in tagged],
        "kernel_context": [{"line": line, "why": why} for why, line in context],
        "kernel_log": None
        if kernel_log is None
        else {"source": kernel_log.source, "error": kernel_log.error, "lines_read": len(kernel_log.lines)},
    }
    if amd_ras is not None:
        data["amd_ras"] = {str(k): v for k, v in amd_ras.items()}
    if gpus.vendor is None and not tagged:
        reason = gpus.note or "no GPU found"
        return ProbeResult(NAME, "skipped", f"no GPU on this machine: {reason}", data=data)

    findings: List[Finding] = _collection_findings(gpus)
    if gpus.vendor and not gpus.available and not findings:
        why = "; ".join(gpus.errors) or gpus.note or "no device answered"
        findings.append(Finding("warn", f"the {gpus.vendor} driver is loaded but no GPU could be read: {why}", CAUSE))
    for dev in gpus.devices:
        findings.extend(_device_findings(dev))
    if amd_ras:
        findings.extend(_ras_findings(amd_ras, gpus.devices))
    findings.extend(_xid_findings(events, gpus.devices))
    findings.extend(_kernel_findings([(k, line) for k, line in tagged if k != "nvidia-xid"]))
    for why, line in context[-MAX_CONTEXT_LINES:]:  # the latest; never a cause
        findings.append(Finding("info", f"kernel log, not counted against this job ({why}): {line.strip()[:200]}"))
    if kernel_log is not None and kernel_log.error:
        findings.append(Finding("info", f"kernel log not checked: {kernel_log.error}"))

    status = worst_status(findings)
    problems = [f for f in findings if f.severity == status] if status != "ok" else []
    count = len(gpus.devices)
    what = f"{count} {gpus.vendor} GPU(s)" if count else "no GPU readable"
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        summary = f"{problems[0].message}{more}"
    else:
        checked = ["ECC", "remapping", "temperature/throttling", "clocks", "PCIe replays"]
        if kernel_log is not None and kernel_log.ok:
            checked.append(f"kernel log ({kernel_log.source})")
        summary = f"{what} healthy: {', '.join(checked)} clean"
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


# --------------------------------------------------------------------------------------------
# Collecting, bounded
# --------------------------------------------------------------------------------------------

_DRIVER_NODES = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd", "/sys/module/amdgpu")


def driver_present(nodes: Sequence[str] = _DRIVER_NODES) -> bool:
    """A GPU driver is loaded even if no tool could read a device (a GPU off the bus)."""
    return any(os.path.exists(p) for p in nodes)


def probe(
    timeout: float,
    *,
    backend: Any = None,
    runner: Runner = run_command,
    amd_backend: Any = None,
    has_driver: Optional[bool] = None,
    kern_log: Optional[str] = None,
    samples: int = 2,
    kernel_judge: Optional[KernelJudge] = None,
    job_pids: Sequence[int] = (),
) -> ProbeResult:
    """Collect within `timeout` s and judge. The keywords replace the hardware seams in tests. With
    a job (`kernel_judge`, or `job_pids` to build one from), its kernel lines alone count."""
    started = time.monotonic()
    deadline = started + max(timeout, 1.0)
    gpus = collect_gpus(timeout=min(8.0, 0.45 * timeout), samples=samples, interval=0.5, backend=backend)
    if has_driver is None:
        has_driver = driver_present()
    if gpus.vendor is None and not has_driver:
        return check(gpus, None)  # nothing to read: no device, no driver
    if kernel_judge is None and job_pids:  # a job named, no judge handed in (the session's probes)
        from debug_stuck.probes.collectors.kernel_scope import judge_for_pids

        kernel_judge = judge_for_pids(job_pids, gpus)
    left = deadline - time.monotonic()
    kwargs = {"kern_log": kern_log} if kern_log else {}
    kernel_log = read_kernel_log(max_lines=5000, timeout=max(0.5, min(4.0, left * 0.5)), runner=runner, **kwargs)
    amd_ras = None
    extra: List[str] = []
    if gpus.vendor == "amd" and (gpus.source == "amd-smi" or amd_backend is not None):
        left = deadline - time.monotonic()
        if left > 1.0:
            amd_ras, err = read_amd_ras(amd_backend or AmdRasBackend(), min(5.0, left - 0.5))
            if err:
                extra.append(err)
    return check(gpus, kernel_log, amd_ras=amd_ras, extra_errors=extra, kernel_judge=kernel_judge)


def run(ctx: ProbeContext) -> ProbeResult:
    ctx.progress("reading the GPUs and the kernel log")
    return probe(ctx.timeout, kernel_judge=ctx.kernel_judge, job_pids=ctx.pids)
