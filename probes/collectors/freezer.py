"""Whether a process's cgroup is frozen (docker pause, SLURM suspend, a pod's pause): its threads then
sleep wherever they were, in state D or S, and nothing runs until the cgroup is thawed.

cgroup v1: /sys/fs/cgroup/freezer/<path>/freezer.state reads FROZEN (Documentation/admin-guide/
cgroup-v1/freezer-subsystem.rst); cgroup v2: /sys/fs/cgroup/<path>/cgroup.freeze reads 1
(cgroup-v2.rst). The path comes from /proc/PID/cgroup. Every read is bounded."""

from __future__ import annotations

from debug_stuck.probes.collectors.procfs import bounded_read, read_text

ROOT = "/sys/fs/cgroup"


def is_frozen(pid: int) -> bool:
    text = bounded_read(lambda: read_text(f"/proc/{pid}/cgroup", 8192), f"cgroup of {pid}") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "freezer" in controllers.split(","):
            state = f"{ROOT}/freezer{path.rstrip('/')}/freezer.state"
            if (bounded_read(lambda s=state: read_text(s, 64), state) or "").strip() == "FROZEN":
                return True
        elif controllers == "":
            freeze = f"{ROOT}{path.rstrip('/')}/cgroup.freeze"
            if (bounded_read(lambda f=freeze: read_text(f, 64), freeze) or "").strip() == "1":
                return True
    return False
