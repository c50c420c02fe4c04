"""Whether a process's cgroup is frozen (docker pause, SLURM suspend, a pod's pause): its threads then
sleep wherever they were, in state D or S, and nothing runs until the cgroup is thawed.

cgroup v1: /sys/fs/cgroup/freezer/<path>/freezer.state reads FROZEN (Documentation/admin-guide/
cgroup-v1/freezer-subsystem.rst); cgroup v2: /sys/fs/cgroup/<path>/cgroup.freeze reads 1
(cgroup-v2.rst). The paths come from /proc/PID/cgroup, read once with the process's static facts;
the state is read each time its state is. Every read is bounded."""

from __future__ import annotations

from typing import List

from debug_stuck.probes.collectors.procfs import bounded_read, read_text

ROOT = "/sys/fs/cgroup"
FROZEN = {"freezer.state": "FROZEN", "cgroup.freeze": "1"}


def freeze_files(cgroup_text: str) -> List[str]:
    """The files that say whether the process's cgroups are frozen, from its /proc/PID/cgroup text: the
    v1 freezer controller's freezer.state, and the unified (v2) hierarchy's cgroup.freeze."""
    files = []
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "freezer" in controllers.split(","):
            files.append(f"{ROOT}/freezer{path.strip().rstrip('/')}/freezer.state")
        elif controllers == "":
            files.append(f"{ROOT}{path.strip().rstrip('/')}/cgroup.freeze")
    return files


def is_frozen(files: List[str]) -> bool:
    """Any of those files reads frozen now."""
    for path in files:
        text = bounded_read(lambda p=path: read_text(p, 64), path) or ""
        if text.strip() == FROZEN[path.rsplit("/", 1)[-1]]:
            return True
    return False
