"""`debug-stuck snapshot` on one node: which processes belong to the job here, and their evidence
as one wire dict (no classification: the node that asked merges and classifies)."""

from __future__ import annotations

import os
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

from debug_stuck.errors import NotInspectable

JOB_ID = re.compile(r"^[0-9]+([_+.][0-9A-Za-z]+)*$")


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def find_job_processes(jobid: str) -> List[int]:
    """The roots of the Slurm job's Python process trees on this node (by SLURM_JOB_ID in environ)."""
    import psutil

    from debug_stuck.bounded import CallTimedOut, call_with_timeout

    me = psutil.Process()
    skip = {me.pid} | {p.pid for p in _safe(me.parents, [])}
    # Our own step carries the job id too (srun --overlap runs inside the job): leave it out.
    own_step = os.environ.get("SLURM_STEP_ID") if os.environ.get("SLURM_JOB_ID") == str(jobid) else None

    def environ(proc) -> Optional[dict]:
        try:
            return call_with_timeout(proc.environ, 2.0, f"environ of {proc.pid}")
        except (psutil.Error, OSError, CallTimedOut):
            return None

    candidates = [p for p in psutil.process_iter(["pid", "ppid", "name", "cmdline"]) if p.pid not in skip]
    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="job-env") as pool:
        envs = list(pool.map(environ, candidates))
    members: Dict[int, Tuple[int, bool]] = {}
    for proc, env in zip(candidates, envs):
        if not env or str(jobid) not in (env.get("SLURM_JOB_ID"), env.get("SLURM_JOBID")):
            continue
        if own_step is not None and env.get("SLURM_STEP_ID") == own_step:
            continue
        head = " ".join((proc.info.get("cmdline") or [])[:1]) + " " + (proc.info.get("name") or "")
        members[proc.pid] = (proc.info.get("ppid") or 0, "python" in head.lower())
    python = {pid: v for pid, v in members.items() if v[1]}
    pool_ = python or members
    return sorted(pid for pid, (ppid, _) in pool_.items() if ppid not in pool_)


def _safe(fn, default):
    try:
        return fn()
    except Exception:  # a process that went away while we looked
        return default


def take_snapshot(
    pids: Sequence[int] = (),
    auto: bool = False,
    slurm_job: Optional[str] = None,
    window: float = 1.0,
    native: bool = True,
) -> dict:
    """This node's evidence as a wire dict. Raises NotInspectable when there is nothing to inspect."""
    from debug_stuck.live.collect import collect
    from debug_stuck.live.wire import snapshot_to_wire

    node = node_name()
    if slurm_job:
        pids = find_job_processes(slurm_job)
        if not pids:
            raise NotInspectable(
                f"no process of Slurm job {slurm_job} runs on {node}",
                "the job may have ended here, or runs as a user whose processes we may not read",
            )
    snap = collect(list(pids), auto=auto and not pids, window=window, native=native)
    node_id = os.environ.get("SLURM_NODEID") if slurm_job else None
    if node_id is None:
        node_id = next((p.env.get("SLURM_NODEID") for p in snap.processes if p.env.get("SLURM_NODEID")), None)
    return snapshot_to_wire(snap, node=node, node_id=node_id, job=slurm_job)
