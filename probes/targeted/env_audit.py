"""env: audit the settings known to cause or hide hangs, each finding tied to its playbook.

Reads the job's environment (`--pid P`: /proc/P/environ and its limits) or, without a PID, this
shell's. Reads only; changes nothing.
"""

from __future__ import annotations

import os
import resource
from typing import Dict, List, Optional

from debug_stuck.probes.collectors.procs import InspectError, read_process_environ, read_process_limits, shm_usage
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult
from debug_stuck.tables import load_table

NAME = "env"


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


def audit(env: Dict[str, str], cores: int, limits: Dict[str, Optional[int]], shm_total: Optional[int]) -> List[Finding]:
    """The findings of skills/data/env-audit.yaml's rules for this environment and these limits."""
    out: List[Finding] = []
    resources = dict(limits, shm=shm_total)
    for rule in load_table("env-audit.yaml")["rules"]:
        if "limit" in rule:
            value = resources.get(rule["limit"])
            if value is None or value == -1 or value >= rule["below"] or _on(env.get(rule.get("unless", ""))):
                continue
            message = rule["message"].format(value=value, mib=value >> 20, kib=value >> 10)
            out.append(Finding(rule["severity"], message, rule["cause"]))
            continue
        names = rule["var"] if isinstance(rule["var"], list) else [rule["var"]]
        for name in names:
            value = env.get(name)
            if _variable_fires(rule["when"], value, cores, rule):
                message = rule["message"].format(
                    var=name, value=value, cores=cores, interfaces=", ".join(_interfaces())
                )
                out.append(Finding(rule["severity"], message, rule["cause"]))
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
