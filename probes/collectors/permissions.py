"""What stands between us and a process's stacks, and the one change that would let us read them:
root or not, the job's user or another, Yama's ptrace_scope, a non-dumpable target, a container
without CAP_SYS_PTRACE, a Kubernetes pod. Reads only /proc and /sys; never raises."""

from __future__ import annotations

import os
from typing import Optional

from debug_stuck.probes.collectors.procs import process_uid, read_proc_file

CAP_SYS_PTRACE = 19
HOOK = "or, with no rights at all, install the hook in the job: `import debug_stuck.hook; debug_stuck.hook.install()`"


def ptrace_scope() -> Optional[int]:
    text = read_proc_file("/proc/sys/kernel/yama/ptrace_scope")
    try:
        return int(text.strip()) if text else None
    except ValueError:
        return None


def has_cap_sys_ptrace() -> bool:
    for line in (read_proc_file("/proc/self/status") or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
            except (IndexError, ValueError):
                return False
    return False


def in_container() -> Optional[str]:
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return "container"
    cgroup = read_proc_file("/proc/1/cgroup") or ""
    if any(word in cgroup for word in ("docker", "kubepods", "containerd", "libpod")):
        return "kubernetes" if "kubepods" in cgroup else "container"
    return None


def _dumpable(pid: int) -> Optional[bool]:
    """A process that set PR_SET_DUMPABLE 0 has its /proc/PID files owned by root."""
    uid = process_uid(pid)
    try:
        owner = os.stat(f"/proc/{pid}/environ").st_uid
    except OSError:
        return None
    if uid is None:
        return None
    return not (owner == 0 and uid != 0)


def ptrace_remedy(pid: int) -> str:
    """The one command or setting that would let us read pid's stacks, then the hook."""
    me = os.geteuid()
    where = in_container()
    if me == 0 and not has_cap_sys_ptrace():
        if where == "kubernetes":
            return (
                "add SYS_PTRACE to the debugging container (securityContext.capabilities.add: [SYS_PTRACE]) and "
                f"set shareProcessNamespace: true on the pod, or `kubectl debug --profile=general`; {HOOK}"
            )
        return f"start the container with --cap-add SYS_PTRACE (docker/podman run); {HOOK}"
    if me != 0:
        owner = process_uid(pid)
        if owner is not None and owner != me:
            return f"run it as root: sudo debug-stuck diagnose --pid {pid} (process {pid} is another user's); {HOOK}"
        if _dumpable(pid) is False:
            return (
                f"run it as root: sudo debug-stuck diagnose --pid {pid} (the job made itself non-dumpable, "
                f"PR_SET_DUMPABLE 0, so only root may trace it); {HOOK}"
            )
        scope = ptrace_scope()
        if scope is not None and scope >= 1:
            return (
                f"run it as root: sudo debug-stuck diagnose --pid {pid} (Yama ptrace_scope={scope} lets a user trace "
                f"only its own children; `sudo sysctl kernel.yama.ptrace_scope=0` lifts that until reboot); {HOOK}"
            )
        return f"run it as root: sudo debug-stuck diagnose --pid {pid}; {HOOK}"
    return f"run it as root, with CAP_SYS_PTRACE; {HOOK}"
