"""env: audit the settings known to cause or hide hangs, each finding tied to its playbook.

Reads the job's environment (`--pid P`: /proc/P/environ and its limits) or, without a PID, this
shell's. Reads only; changes nothing.
"""

from __future__ import annotations

import os
import resource
from typing import Dict, List, Optional

from probes.procs import InspectError, read_process_environ, read_process_limits, shm_usage
from probes.targeted import Finding, ProbeContext, ProbeResult

NAME = "env"
SUMMARY = "audit OMP/MKL threads, TOKENIZERS_PARALLELISM, NCCL_*, TORCH_NCCL_*, HSA_*/MIOPEN_*, /dev/shm, ulimits"
DEFAULT_TIMEOUT = 10.0
RUNS_USER_CODE = False

SHM_MIN_BYTES = 1 << 30
NOFILE_MIN = 4096


def _off(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in ("0", "false", "no", "off")


def _on(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def audit(env: Dict[str, str], cores: int, limits: Dict[str, Optional[int]], shm_total: Optional[int]) -> List[Finding]:
    out: List[Finding] = []
    omp = env.get("OMP_NUM_THREADS")
    if omp is None:
        out.append(
            Finding("info", f"OMP_NUM_THREADS is unset: each process may start {cores} OpenMP threads", "cpu-spin")
        )
    elif omp.isdigit() and int(omp) > cores:
        out.append(Finding("warn", f"OMP_NUM_THREADS={omp} exceeds the {cores} cores: oversubscription", "cpu-spin"))
    mkl = env.get("MKL_NUM_THREADS")
    if mkl and mkl.isdigit() and int(mkl) > cores:
        out.append(Finding("warn", f"MKL_NUM_THREADS={mkl} exceeds the {cores} cores", "cpu-spin"))
    if env.get("TOKENIZERS_PARALLELISM") is None:
        out.append(
            Finding(
                "info",
                "TOKENIZERS_PARALLELISM is unset: HF tokenizers' threads + forked DataLoader workers can deadlock "
                "(set it to false)",
                "dataloader",
            )
        )
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname:
        names = [n.lstrip("=^") for n in ifname.split(",") if n]
        present = set(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else set()
        if present and not any(any(p.startswith(n) for p in present) for n in names):
            out.append(
                Finding(
                    "fail",
                    f"NCCL_SOCKET_IFNAME={ifname} matches no interface here ({', '.join(sorted(present))})",
                    "nccl-init",
                )
            )
    for key in ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE"):
        if _on(env.get(key)):
            out.append(
                Finding("info", f"{key}=1: a transport is off (slower; set while debugging an init hang?)", "nccl-init")
            )
    for key in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
        if _off(env.get(key)):
            out.append(
                Finding(
                    "warn", f"{key}=0: a timed-out collective will not abort the job, it hangs for ever", "collective"
                )
            )
    if _off(env.get("TORCH_NCCL_ENABLE_MONITORING")):
        out.append(
            Finding(
                "warn",
                "TORCH_NCCL_ENABLE_MONITORING=0: the heartbeat monitor that kills a hung job is off",
                "collective",
            )
        )
    if env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") in (None, "0"):
        out.append(
            Finding(
                "info",
                "Flight Recorder is off (TORCH_NCCL_TRACE_BUFFER_SIZE unset): set it to 2000 with "
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1 to see the last collectives of every rank after a hang",
                "collective",
            )
        )
    if _on(env.get("CUDA_LAUNCH_BLOCKING")):
        out.append(
            Finding(
                "warn", "CUDA_LAUNCH_BLOCKING=1: every kernel launch waits (much slower; debugging only)", "cuda-sync"
            )
        )
    if _on(env.get("MIOPEN_DEBUG_DISABLE_FIND_DB")):
        out.append(
            Finding("warn", "MIOPEN_DEBUG_DISABLE_FIND_DB=1: MIOpen searches kernels again on every run", "miopen-find")
        )
    mode = env.get("MIOPEN_FIND_MODE")
    if mode and mode.upper() in ("NORMAL", "1"):
        out.append(
            Finding("info", "MIOPEN_FIND_MODE=NORMAL is the full (slowest) search; FAST avoids it", "miopen-find")
        )
    if env.get("HSA_OVERRIDE_GFX_VERSION"):
        out.append(
            Finding(
                "info",
                f"HSA_OVERRIDE_GFX_VERSION={env['HSA_OVERRIDE_GFX_VERSION']}: an unsupported GPU runs as another gfx "
                "(no kernel database for it: slow first batches)",
                "miopen-find",
            )
        )
    if _off(env.get("HSA_ENABLE_INTERRUPT")):
        out.append(Finding("info", "HSA_ENABLE_INTERRUPT=0: ROCm busy-polls signals instead of sleeping", "cuda-sync"))
    if shm_total is not None and shm_total < SHM_MIN_BYTES:
        out.append(
            Finding(
                "warn",
                f"/dev/shm is only {shm_total >> 20} MiB: DataLoader workers can crash with a bus error "
                "(docker --shm-size=16g or --ipc=host)",
                "dataloader",
            )
        )
    nofile = limits.get("nofile")
    if nofile is not None and nofile < NOFILE_MIN:
        out.append(
            Finding(
                "warn",
                f"open-files limit is {nofile}: workers and file caches can run out (ulimit -n 65536)",
                "io-stall",
            )
        )
    memlock = limits.get("memlock")
    if memlock is not None and memlock != -1 and memlock < (64 << 20) and env.get("NCCL_IB_DISABLE") != "1":
        out.append(
            Finding(
                "info", f"locked-memory limit is {memlock >> 10} KiB: InfiniBand needs ulimit -l unlimited", "nccl-init"
            )
        )
    return out


def _own_limits() -> Dict[str, Optional[int]]:
    def soft(which):
        value = resource.getrlimit(which)[0]
        return -1 if value == resource.RLIM_INFINITY else value

    return {"nofile": soft(resource.RLIMIT_NOFILE), "memlock": soft(resource.RLIMIT_MEMLOCK)}


def run(ctx: ProbeContext) -> ProbeResult:
    if ctx.pids:
        pid = ctx.pids[0]
        try:
            env = read_process_environ(pid)
            limits = read_process_limits(pid)
        except InspectError as exc:
            return ProbeResult(NAME, "skipped", f"cannot read the job's environment: {exc.message}")
        source = f"process {pid}"
    else:
        env, limits, source = dict(os.environ), _own_limits(), "this shell (give --pid to audit the job's own)"
    shm = shm_usage()
    findings = audit(env, os.cpu_count() or 1, limits, shm["total"] if shm else None)
    worst = (
        "fail"
        if any(f.severity == "fail" for f in findings)
        else "warn"
        if any(f.severity == "warn" for f in findings)
        else "ok"
    )
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("fail", "warn", "info")}
    summary = f"{counts['fail']} problem(s), {counts['warn']} warning(s), {counts['info']} note(s) in {source}"
    return ProbeResult(
        NAME,
        worst,
        summary,
        data={"source": source, "cores": os.cpu_count(), "limits": limits, "shm_total": shm["total"] if shm else None},
        findings=findings,
    )
