"""Diagnose a job that runs on many nodes: a snapshot from every node, merged, classified once.

Each node runs `debug-stuck snapshot` (the live-evidence collectors, no classification) and sends
its evidence back as one line of compact JSON (debug_stuck.live.wire). Two transports, both the
engines clusters already run:

- Slurm: one extra job step inside the running job, `srun --overlap --jobid J --ntasks-per-node 1`,
  so it runs beside the job's own steps even when they hold every CPU. Each node finds the job's
  processes by SLURM_JOB_ID in their environment.
- ssh: `ssh -o BatchMode=yes host ...` per host, in parallel.

Everything is bounded by one node timeout: at the limit the transport is killed and the nodes
that answered are kept. A node that does not answer, refuses, or has nothing to show is itself
evidence (a dead or wedged node): it is named in the report's errors and in the evidence.

Ranks are global (RANK from each process's environment, SLURM_PROCID for ranks srun started
itself); the node of a process is the Slurm node name, or the host name over ssh. Stack groups
span all ranks of all nodes, and the culprit is named with its rank and node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Union

from debug_stuck.interpreter import isolated_python_module
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.wire import WireError, check_wire, kernel_interesting, snapshot_from_wire

DEFAULT_NODE_TIMEOUT = 30.0
# `python -m debug_stuck snapshot ...` on each node (the same interpreter path when it exists
# there, never importing from the remote directory: see debug_stuck.interpreter), else
# `debug-stuck snapshot ...` from the node's PATH.
REMOTE_MODULE = "debug_stuck"
_REMOTE_LAUNCH = 'p="$1"; c="$2"; shift 2; if [ -x "$p" ]; then exec "$p" -c "$c" "$@"; fi; exec debug-stuck "$@"'

Progressor = Optional[Callable[[str], None]]


@dataclass
class NodeSnapshot:
    """One node's answer: a snapshot, or why there is none."""

    node: str  # the Slurm node name, or the host as given (its host name once it answered)
    snapshot: Optional[Snapshot] = None
    error: Optional[str] = None
    timed_out: bool = False
    node_id: Optional[str] = None
    wire_bytes: int = 0
    kernel_lines: Optional[List[str]] = None  # the kernel lines that matter, as the node flagged them

    @property
    def answered(self) -> bool:
        return self.snapshot is not None


@dataclass
class MergedSnapshot:
    transport: str  # "slurm" | "ssh" | "synthetic"
    target: str  # "Slurm job 123" / "hosts a,b"
    nodes: List[NodeSnapshot]
    timeout: float
    seconds: float = 0.0
    errors: List[str] = field(default_factory=list)  # transport-level failures (srun's own errors)

    def answered(self) -> List[NodeSnapshot]:
        return [n for n in self.nodes if n.answered]

    def missing(self) -> List[NodeSnapshot]:
        return [n for n in self.nodes if not n.answered]


# --- the remote command ---------------------------------------------------------------------------


def snapshot_arguments(
    targets: Union[Sequence[int], str, None] = "auto",
    slurm_job: Optional[str] = None,
    window: float = 1.0,
    native: bool = True,
) -> List[str]:
    args = ["snapshot", "--format", "json", "--window", f"{window:g}"]
    if slurm_job:
        args += ["--slurm-job", str(slurm_job)]
    elif targets == "auto" or targets is True or not targets:
        args.append("--auto")
    else:
        for pid in targets:
            args += ["--pid", str(int(pid))]
    if not native:
        args.append("--no-native")
    return args


def remote_argv(snapshot_args: Sequence[str]) -> List[str]:
    """sh -c: the same interpreter as ours when the node has it, else `debug-stuck` from PATH."""
    python, _, code = isolated_python_module(REMOTE_MODULE)
    return ["sh", "-c", _REMOTE_LAUNCH, "debug-stuck", python, code, *snapshot_args]


def parse_wire_objects(text: str) -> List[dict]:
    """Every JSON object in text (one per line normally; srun may cut long lines, they are joined)."""
    decoder = json.JSONDecoder()
    out, i = [], 0
    while True:
        start = text.find("{", i)
        if start < 0:
            return out
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        if isinstance(value, dict):
            out.append(value)
        i = end


def node_from_wire(data: dict, name: Optional[str] = None, wire_bytes: int = 0) -> NodeSnapshot:
    """A NodeSnapshot from one node's decoded JSON line (a snapshot or an error record)."""
    node = NodeSnapshot(name or str(data.get("node") or data.get("host") or "?"))
    try:
        check_wire(data)
    except WireError as exc:
        node.error = str(exc)
        return node
    _accept_wire(node, data, wire_bytes)
    return node


def _accept_wire(node: NodeSnapshot, data: dict, wire_bytes: int) -> None:
    node.node_id = data.get("node_id") or node.node_id
    if isinstance(data.get("node"), str) and data["node"]:
        node.node = data["node"]  # the node's own name (Slurm node name, else host name)
    if "error" in data and "processes" not in data:
        node.error = f"snapshot failed: {data['error']}"
        return
    try:
        node.snapshot = snapshot_from_wire(data)
    except WireError as exc:
        node.error = str(exc)
        return
    node.kernel_lines = kernel_interesting(data)
    node.wire_bytes = wire_bytes
    node.error = None


def read_wire(node: NodeSnapshot, text: str) -> bool:
    """Fill node from the first snapshot (or error record) in text; False when there is none."""
    for data in parse_wire_objects(text):
        try:
            check_wire(data)
        except WireError as exc:
            node.error = str(exc)
            continue
        _accept_wire(node, data, len(text))
        return True
    return False


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
