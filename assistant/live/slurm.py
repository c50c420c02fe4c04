"""Collect a Slurm job's snapshots: one `srun --overlap --jobid J --ntasks-per-node 1` step runs
`debug-stuck snapshot` on every node beside the job's own steps, bounded by one node timeout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.live.nodes import (
    DEFAULT_NODE_TIMEOUT,
    MergedSnapshot,
    NodeSnapshot,
    Progressor,
    last_line,
    read_wire,
    remote_argv,
    snapshot_arguments,
)
from debug_stuck.live.snapshot import JOB_ID

SRUN_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
SLURM_QUERY_SECONDS = 10.0


def _slurm_env() -> dict:
    # Options of an enclosing allocation (SLURM_NTASKS, SLURM_MEM_PER_CPU...) would leak into our
    # step; the command line says all we want. SLURM_CONF says which cluster.
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


def _slurm_query(argv: List[str], what: str) -> str:
    from debug_stuck.bounded import run_command

    try:
        result = run_command(argv, SLURM_QUERY_SECONDS, env=_slurm_env())
    except FileNotFoundError:
        raise NotInspectable(f"{argv[0]} not found", "run this on a Slurm login or compute node") from None
    if result.timed_out:
        raise NotInspectable(
            f"{what}: {argv[0]} did not answer within {SLURM_QUERY_SECONDS:g} s", "is slurmctld reachable?"
        )
    if result.returncode != 0:
        raise NotInspectable(f"{what}: {last_line(result.stderr) or f'exit status {result.returncode}'}")
    return result.stdout


def slurm_job_nodes(jobid: str) -> List[str]:
    """The node names of a running job, in Slurm's order. Raises NotInspectable."""
    try:
        text = _slurm_query(["squeue", "-h", "-j", str(jobid), "-o", "%T|%N"], f"Slurm job {jobid}").strip()
    except NotInspectable as exc:
        if "invalid job id" not in exc.message.lower():
            raise
        text = ""  # squeue's word for a job that ended long ago or never was
    rows = [ln.split("|", 1) for ln in text.splitlines() if "|" in ln]
    if not rows:
        raise NotInspectable(f"Slurm job {jobid} was not found", "check the id with squeue --me")
    running = [r for r in rows if r[0] == "RUNNING"]
    if not running:
        state = ", ".join(sorted({r[0] for r in rows}))
        raise NotInspectable(f"Slurm job {jobid} is {state}, not RUNNING", "only a running job can be inspected")
    nodelists = [r[1] for r in running if r[1]]
    names: List[str] = []
    for nodelist in nodelists:
        hostnames = _slurm_query(["scontrol", "show", "hostnames", nodelist], "expanding the node list")
        names += [h.strip() for h in hostnames.splitlines() if h.strip()]
    return list(dict.fromkeys(names))


@dataclass
class _Streams:
    stdout: str
    stderr: str
    returncode: Optional[int]
    timed_out: bool


def _run_interruptible(argv: List[str], timeout: float, env: dict) -> _Streams:
    """Run argv in its own session; at the bound interrupt it as srun likes (two SIGINTs cancel the
    step on every node), then SIGKILL what is left. Output written before the bound is kept."""
    from debug_stuck.bounded import kill_process_group

    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return _Streams(out, err, proc.returncode, False)
    except subprocess.TimeoutExpired:
        pass
    for _ in range(2):
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.2)
    try:
        out, err = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=3)
        except subprocess.TimeoutExpired:  # unkillable (D state): give up on its output
            out, err = "", ""
    return _Streams(out or "", err or "", None, True)


def _split_labelled(text: str) -> Tuple[Dict[int, List[str]], List[str]]:
    by_task: Dict[int, List[str]] = {}
    other: List[str] = []
    for line in text.splitlines():
        m = SRUN_LABEL.match(line)
        if m:
            by_task.setdefault(int(m.group(1)), []).append(m.group(2))
        elif line.strip():
            other.append(line.strip())
    return by_task, other


def collect_slurm(
    jobid: str,
    timeout: float = DEFAULT_NODE_TIMEOUT,
    window: float = 1.0,
    native: bool = True,
    progress: Progressor = None,
) -> MergedSnapshot:
    """A snapshot from every node of a running Slurm job, through one `srun --overlap` step."""
    jobid = str(jobid).strip()
    if not JOB_ID.match(jobid):
        raise BadInput(f"--slurm-job {jobid!r} is not a Slurm job id", "give the number squeue shows, e.g. 123456")
    say = progress or (lambda msg: None)
    started = time.monotonic()
    expected = slurm_job_nodes(jobid)
    count = max(1, len(expected))
    argv = [
        "srun",
        "--overlap",
        f"--jobid={jobid}",
        f"--nodes={count}",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        "--label",
        "--kill-on-bad-exit=0",
        "--job-name=debug-stuck-snapshot",
        *remote_argv(snapshot_arguments(slurm_job=jobid, window=window, native=native)),
    ]
    say(f"collecting from {count} node(s) of Slurm job {jobid} (at most {timeout:g} s)")
    try:
        streams = _run_interruptible(argv, timeout, _slurm_env())
    except FileNotFoundError:
        raise NotInspectable("srun not found", "run this on a Slurm login or compute node") from None
    merged = MergedSnapshot("slurm", f"Slurm job {jobid}", [], timeout)
    stdout_by_task, _ = _split_labelled(streams.stdout)
    stderr_by_task, srun_errors = _split_labelled(streams.stderr)
    nodes: Dict[str, NodeSnapshot] = {name: NodeSnapshot(name) for name in expected}
    for task, fragments in sorted(stdout_by_task.items()):
        # srun cuts long lines into labelled pieces of about 1 KiB: the pieces joined are the line.
        text = "".join(fragments)
        fallback = expected[task] if task < len(expected) else f"task {task}"
        probe = NodeSnapshot(fallback)
        if not read_wire(probe, text):
            probe.error = probe.error or f"sent output that is not a snapshot: {text[:200]!r}"
        if probe.node not in nodes:
            probe.node = fallback  # task i runs on the i-th node of the job (one task per node)
        nodes[probe.node] = probe
    for i, name in enumerate(expected):
        node = nodes[name]
        if node.answered or node.error:
            continue
        said = " ".join(stderr_by_task.get(i, []))[-300:]
        node_said = [e for e in srun_errors if name in e]
        if streams.timed_out:
            node.timed_out = True
            node.error = f"did not answer within {timeout:g} s (a dead, wedged or overloaded node)"
        else:
            node.error = "no snapshot" + (f": {said or node_said[-1]}" if (said or node_said) else "")
    merged.nodes = list(nodes.values())
    wanted = [e for e in srun_errors if "error" in e.lower()]
    if wanted and not merged.answered():
        merged.errors.extend(wanted[-5:])
    merged.seconds = time.monotonic() - started
    return merged
