"""env: audit the settings known to cause or hide hangs, each finding tied to its playbook.

Reads the job's environment or, without a PID, this shell's. Reads only; changes nothing.

With `--pid P` it audits the processes that train: the job's ranks (roles as the snapshot names
them: launcher, rank, dataloader-worker), found from P whichever of them P is. The launcher is not
audited (torchrun sets OMP_NUM_THREADS and more for its ranks only: its own environment says
nothing about theirs), nor are DataLoader workers (they inherit their rank's). A process that is
not part of a recognisable job is audited itself. A finding true of some ranks only names them.

Findings are sorted by severity (fail, warn, info). Only warn and fail findings are evidence for a
cause (`cause`); an info note names its playbook in `see` and weighs nothing in a diagnosis.
The locked-memory (ulimit -l) note is for InfiniBand only: it is given when this machine has an
InfiniBand device (/sys/class/infiniband is not empty) or the job sets NCCL_IB_* / NCCL_NET=IB.
"""

from __future__ import annotations

import os
import resource
from typing import Dict, List, Optional, Tuple

from debug_stuck.kb import load_table
from debug_stuck.probes.collectors.procs import (
    InspectError,
    ProcInfo,
    job_processes,
    read_process_environ,
    read_process_limits,
    shm_usage,
)
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult, TargetNotInspectable

NAME = "env"
SEVERITY_ORDER = {"fail": 0, "warn": 1, "info": 2}
INFINIBAND_CLASS = "/sys/class/infiniband"  # the kernel's InfiniBand devices (a hardware seam for tests)
MAX_RANKS = 64  # ranks audited per job (each costs two reads of /proc)


def _off(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in ("0", "false", "no", "off")


def _on(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _interfaces() -> List[str]:
    return sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []


def _variable_fires(when: str, value: Optional[str], cores: int, rule: dict) -> bool:
    if when == "unset":
        return value is None
    if when == "unset-or-zero":
        return value in (None, "0")
    if value is None:
        return False
    if when == "set":
        return bool(value)
    if when == "on":
        return _on(value)
    if when == "off":
        return _off(value)
    if when == "above-cores":
        return value.isdigit() and int(value) > cores
    if when == "one-of":
        return value.upper() in {str(v).upper() for v in rule.get("values", [])}
    if when == "no-interface":
        names = [n.lstrip("=^") for n in value.split(",") if n]
        present = _interfaces()
        return bool(present) and not any(any(p.startswith(n) for p in present) for n in names)
    return False


def machine_has_infiniband() -> bool:
    try:
        return bool(os.listdir(INFINIBAND_CLASS))
    except OSError:
        return False


def uses_infiniband(env: Dict[str, str], machine: Optional[bool] = None) -> bool:
    """InfiniBand is in play: the machine has a device, or the job asks NCCL for one."""
    if _on(env.get("NCCL_IB_DISABLE")):
        return False
    if machine if machine is not None else machine_has_infiniband():
        return True
    asks = any(k.startswith("NCCL_IB_") and k != "NCCL_IB_DISABLE" and env[k] for k in env)
    return asks or env.get("NCCL_NET", "").strip().upper() == "IB"


def _finding(severity: str, message: str, cause: Optional[str]) -> Finding:
    """Only warn and fail findings are evidence for their cause; an info note only points at it."""
    if severity in ("warn", "fail"):
        return Finding(severity, message, cause)
    return Finding(severity, message, None, see=cause)


def sort_findings(findings: List[Finding]) -> List[Finding]:
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity, len(SEVERITY_ORDER)))


def audit(
    env: Dict[str, str],
    cores: int,
    limits: Dict[str, Optional[int]],
    shm_total: Optional[int],
    infiniband: Optional[bool] = None,
) -> List[Finding]:
    """The findings of skills/data/env-audit.yaml's rules for this environment and these limits,
    fail first. `infiniband`: whether this machine has InfiniBand (None: look)."""
    out: List[Finding] = []
    resources = dict(limits, shm=shm_total)
    for rule in load_table("env-audit.yaml")["rules"]:
        if "limit" in rule:
            value = resources.get(rule["limit"])
            if value is None or value == -1 or value >= rule["below"] or _on(env.get(rule.get("unless", ""))):
                continue
            if rule["limit"] == "memlock" and not uses_infiniband(env, infiniband):
                continue  # locked memory matters to InfiniBand (RDMA) only
            message = rule["message"].format(value=value, mib=value >> 20, kib=value >> 10)
            out.append(_finding(rule["severity"], message, rule["cause"]))
            continue
        names = rule["var"] if isinstance(rule["var"], list) else [rule["var"]]
        for name in names:
            value = env.get(name)
            if _variable_fires(rule["when"], value, cores, rule):
                message = rule["message"].format(
                    var=name, value=value, cores=cores, interfaces=", ".join(_interfaces())
                )
                out.append(_finding(rule["severity"], message, rule["cause"]))
    return sort_findings(out)


def _own_limits() -> Dict[str, Optional[int]]:
    def soft(which):
        value = resource.getrlimit(which)[0]
        return -1 if value == resource.RLIM_INFINITY else value

    return {"nofile": soft(resource.RLIMIT_NOFILE), "memlock": soft(resource.RLIMIT_MEMLOCK)}


def _who(proc: ProcInfo) -> str:
    return f"rank {proc.rank}" if proc.role == "rank" and proc.rank is not None else f"pid {proc.pid}"


def audited_processes(pids: List[int]) -> Tuple[List[ProcInfo], List[ProcInfo]]:
    """(the job's ranks to audit, its launchers), found from the given PIDs. Raises InspectError."""
    procs = job_processes(pids)
    ranks = [p for p in procs if p.role == "rank" and p.state != "Z"]
    launchers = [p for p in procs if p.role == "launcher"]
    if not ranks:  # not a job we recognise (or only its launcher is left): the process given itself
        ranks = [p for p in procs if p.pid in pids and p.state != "Z"]
    return ranks[:MAX_RANKS], launchers


def _audit_ranks(
    ranks: List[ProcInfo], cores: int, shm_total: Optional[int]
) -> Tuple[List[Finding], List[str], Dict[str, dict]]:
    """Each rank's findings, merged: one finding per message, naming the ranks when not all have it."""
    seen: Dict[Tuple[str, str, Optional[str], Optional[str]], List[str]] = {}
    errors: List[str] = []
    limits_of: Dict[str, dict] = {}
    audited = []
    for proc in ranks:
        try:
            env = read_process_environ(proc.pid)
        except InspectError as exc:
            if exc.kind == "gone" and len(ranks) > 1:
                errors.append(exc.message)
                continue
            if exc.kind == "gone":
                raise TargetNotInspectable(exc.message, "give the PID of a running process of the job") from None
            errors.append(f"cannot read the environment of {_who(proc)}: {exc.message}")
            continue
        limits = read_process_limits(proc.pid)
        limits_of[str(proc.pid)] = limits
        audited.append(proc)
        for f in audit(env, cores, limits, shm_total):
            seen.setdefault((f.severity, f.message, f.cause, f.see), []).append(_who(proc))
    findings = []
    for (severity, message, cause, see), who in seen.items():
        if len(audited) > 1 and len(who) < len(audited):
            message = f"{message} (on {', '.join(who)} only)"
        findings.append(Finding(severity, message, cause, see=see))
    return sort_findings(findings), errors, limits_of


def run(ctx: ProbeContext) -> ProbeResult:
    shm = shm_usage()
    shm_total = shm["total"] if shm else None
    cores = os.cpu_count() or 1
    data: dict = {"cores": os.cpu_count(), "shm_total": shm_total}
    if ctx.pids:
        try:
            ranks, launchers = audited_processes(list(ctx.pids))
        except InspectError as exc:
            if exc.kind == "gone":
                raise TargetNotInspectable(exc.message, "give the PID of a running process of the job") from None
            return ProbeResult(NAME, "skipped", f"cannot read the job's processes: {exc.message}")
        if not ranks:
            why = f"process {', '.join(map(str, ctx.pids))} has exited (a zombie its parent has not reaped)"
            return ProbeResult(NAME, "skipped", f"nothing to audit: {why}")
        findings, errors, limits = _audit_ranks(ranks, cores, shm_total)
        if not limits:
            return ProbeResult(NAME, "skipped", f"cannot read the job's environment: {'; '.join(errors)}")
        names = ", ".join(
            _who(p) + (f" (pid {p.pid})" if p.role == "rank" and p.rank is not None else "") for p in ranks
        )
        source = f"{len(limits)} ranks: {names}" if len(ranks) > 1 else f"process {ranks[0].pid}"
        if launchers:
            source += f"; launcher pid {', '.join(str(p.pid) for p in launchers)} not audited (it sets its ranks' own)"
        data.update(
            source=source,
            audited=[{"pid": p.pid, "role": p.role, "rank": p.rank} for p in ranks],
            launchers=[p.pid for p in launchers],
            limits=limits,
            errors=errors,
        )
    else:
        source = "this shell (give --pid to audit the job's own)"
        limits = _own_limits()
        findings = audit(dict(os.environ), cores, limits, shm_total)
        data.update(source=source, limits=limits)
    worst = (
        "fail"
        if any(f.severity == "fail" for f in findings)
        else "warn"
        if any(f.severity == "warn" for f in findings)
        else "ok"
    )
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("fail", "warn", "info")}
    summary = f"{counts['fail']} problem(s), {counts['warn']} warning(s), {counts['info']} note(s) in {source}"
    return ProbeResult(NAME, worst, summary, data=data, findings=findings)
