"""Diagnose a job that runs on many nodes: a snapshot from every node, merged, classified once.

Each node runs `debug-stuck snapshot` (the live-evidence collectors, no classification) and sends
its evidence back as one line of compact JSON (assistant.snapshot_io). Two transports, both the
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

import dataclasses
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from assistant.answers import Answer
from assistant.classify import Observations, classify
from assistant.collect import Snapshot
from assistant.errors import BadInput, NotInspectable
from assistant.kb import Knowledge
from assistant.observe import Progress, StackGroup, compress_numbers, describe_ranks, group_ranks, judge_progress
from assistant.report import Evidence, Report
from assistant.snapshot_io import WireError, check_wire, kernel_interesting, snapshot_from_wire

DEFAULT_NODE_TIMEOUT = 30.0
SSH_CONNECT_TIMEOUT = 5
MAX_SSH_SESSIONS = 128  # ssh clients at once; all share one deadline
# `python -m REMOTE_MODULE snapshot ...` on each node (the same interpreter path when it exists
# there), else `debug-stuck snapshot ...` from the node's PATH.
REMOTE_MODULE = "assistant"
_REMOTE_LAUNCH = 'p="$1"; m="$2"; shift 2; if [ -x "$p" ]; then exec "$p" -m "$m" "$@"; fi; exec debug-stuck "$@"'
JOB_ID = re.compile(r"^[0-9]+([_+.][0-9A-Za-z]+)*$")
MAX_LISTED = 40  # notes and kernel lines gathered from many nodes are capped at this many
SRUN_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
SLURM_QUERY_SECONDS = 10.0


Progressor = Optional[Callable[[str], None]]


# --- what the nodes sent --------------------------------------------------------------------------


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
    return ["sh", "-c", _REMOTE_LAUNCH, "debug-stuck", sys.executable, REMOTE_MODULE, *snapshot_args]


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


def _read_wire(node: NodeSnapshot, text: str) -> bool:
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


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# --- the node side: which processes belong to the job ---------------------------------------------


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def find_job_processes(jobid: str) -> List[int]:
    """The roots of the Slurm job's Python process trees on this node (by SLURM_JOB_ID in environ)."""
    import psutil

    from probes.bounded import CallTimedOut, call_with_timeout

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
    from assistant.collect import collect
    from assistant.snapshot_io import snapshot_to_wire

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


# --- Slurm -----------------------------------------------------------------------------------------


def _slurm_env() -> dict:
    # Options of an enclosing allocation (SLURM_NTASKS, SLURM_MEM_PER_CPU...) would leak into our
    # step; the command line says all we want. SLURM_CONF says which cluster.
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


def _slurm_query(argv: List[str], what: str) -> str:
    from probes.bounded import run_command

    try:
        result = run_command(argv, SLURM_QUERY_SECONDS, env=_slurm_env())
    except FileNotFoundError:
        raise NotInspectable(f"{argv[0]} not found", "run this on a Slurm login or compute node") from None
    if result.timed_out:
        raise NotInspectable(
            f"{what}: {argv[0]} did not answer within {SLURM_QUERY_SECONDS:g} s", "is slurmctld reachable?"
        )
    if result.returncode != 0:
        raise NotInspectable(f"{what}: {_last_line(result.stderr) or f'exit status {result.returncode}'}")
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
    from probes.bounded import kill_process_group

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
        if not _read_wire(probe, text):
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


# --- ssh -------------------------------------------------------------------------------------------


def parse_host(spec: str) -> Tuple[str, Optional[int]]:
    """A --hosts entry (host, user@host, host:2222, [::1]:2222) as (host, port)."""
    spec = spec.strip()
    if not spec:
        raise BadInput("an empty host in --hosts", "give host names separated by commas, e.g. --hosts node1,node2")
    m = re.match(r"^\[([^\]]+)\](?::(\d+))?$", spec) or re.match(r"^([^:\s]+)(?::(\d+))?$", spec)
    if not m or (m.group(2) is not None and not 0 < int(m.group(2)) < 65536):
        raise BadInput(f"--hosts: {spec!r} is not a host", "give host, user@host or host:port")
    return m.group(1), int(m.group(2)) if m.group(2) else None


def parse_hosts(text: str) -> List[str]:
    hosts = [h.strip() for h in text.split(",")]
    for h in hosts:
        parse_host(h)
    return list(dict.fromkeys(hosts))


def ssh_argv(spec: str, remote: Sequence[str], timeout: float, ssh_options: Iterable[str] = ()) -> List[str]:
    host, port = parse_host(spec)
    connect = max(1, math.ceil(min(SSH_CONNECT_TIMEOUT, timeout)))
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect}"]
    for option in ssh_options:
        argv += ["-o", option]
    if port is not None:
        argv += ["-p", str(port)]
    # ssh hands the remote shell one string: quote every word.
    return argv + [host, " ".join(shlex.quote(a) for a in remote)]


def _collect_one_host(
    spec: str, remote: List[str], deadline: float, limit: float, ssh_options: Sequence[str]
) -> NodeSnapshot:
    from probes.bounded import run_command

    node = NodeSnapshot(spec)
    timeout = deadline - time.monotonic()
    if timeout < 1.0:
        # More hosts than ssh sessions at once, and the time ran out before this one's turn.
        node.timed_out = True
        node.error = "not reached before the node timeout (too many hosts for the time given)"
        return node
    try:
        result = run_command(ssh_argv(spec, remote, timeout, ssh_options), timeout)
    except FileNotFoundError:
        node.error = "ssh not found on this machine"
        return node
    if result.timed_out:
        node.timed_out = True
        node.error = f"did not answer within {limit:g} s (a dead, wedged or overloaded node)"
        return node
    if _read_wire(node, result.stdout):
        return node
    why = _last_line(result.stderr) or f"exit status {result.returncode}"
    if result.returncode == 255 and "timed out" in why:
        # TCP accepted, then silence: as wedged as a node that never answers at all
        node.timed_out = True
        node.error = f"did not answer (a dead, wedged or overloaded node): ssh: {why}"
    elif result.returncode == 255:
        node.error = f"ssh failed: {why}"
    else:
        node.error = f"snapshot failed: {why}"
    return node


def collect_hosts(
    hosts: Sequence[str],
    pids_or_auto: Union[Sequence[int], str, bool, None] = "auto",
    timeout: float = DEFAULT_NODE_TIMEOUT,
    window: float = 1.0,
    native: bool = True,
    ssh_options: Sequence[str] = (),
    slurm_job: Optional[str] = None,
    progress: Progressor = None,
) -> MergedSnapshot:
    """A snapshot from every host over ssh, in parallel, each bounded by `timeout`."""
    hosts = [h.strip() for h in hosts if h.strip()]
    if not hosts:
        raise BadInput("no hosts given", "give --hosts node1,node2 (host or host:port)")
    for spec in hosts:
        parse_host(spec)
    say = progress or (lambda msg: None)
    started = time.monotonic()
    remote = remote_argv(snapshot_arguments(pids_or_auto, slurm_job, window, native))
    say(f"collecting from {len(hosts)} host(s) over ssh (at most {timeout:g} s)")
    deadline = started + timeout
    with ThreadPoolExecutor(max_workers=min(MAX_SSH_SESSIONS, len(hosts)), thread_name_prefix="ssh") as pool:
        nodes = list(pool.map(lambda h: _collect_one_host(h, remote, deadline, timeout, ssh_options), hosts))
    seen: Dict[str, int] = {}
    for node in nodes:  # two aliases of one machine must not merge into one node
        seen[node.node] = seen.get(node.node, 0) + 1
    for node, spec in zip(nodes, hosts):
        if seen[node.node] > 1 and node.node != spec:
            node.node = f"{node.node} ({spec})"
    merged = MergedSnapshot("ssh", "hosts " + ",".join(hosts), nodes, timeout)
    merged.seconds = time.monotonic() - started
    return merged


# --- merge and classify -----------------------------------------------------------------------------


def _int(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _place(node: NodeSnapshot) -> None:
    """Name each process's node, and give srun-started ranks their global rank."""
    snap = node.snapshot
    by_pid = {p.pid: p for p in snap.processes}
    for info in snap.processes:
        info.host = node.node
        if info.role == "rank" and info.rank is None:
            info.rank = _int(info.env.get("SLURM_PROCID"))
    for info in snap.processes:
        parent = by_pid.get(info.ppid)
        if info.role == "dataloader-worker" and info.rank is None and parent is not None:
            info.rank = parent.rank


def merge_groups(groups: Iterable[StackGroup]) -> List[StackGroup]:
    """Stack groups of every node joined by stack signature; members ordered by rank."""
    merged: Dict[tuple, StackGroup] = {}
    for g in groups:
        into = merged.get(g.signature)
        if into is None:
            merged[g.signature] = StackGroup(g.signature, g.top, list(g.pids), list(g.ranks), g.frames, list(g.hosts))
            continue
        into.pids += g.pids
        into.ranks += g.ranks
        into.hosts += g.hosts
    out = []
    for g in merged.values():
        rank_order = [(r is None, r if r is not None else 0) for r in g.ranks]
        order = sorted(range(len(g.pids)), key=lambda i: (rank_order[i], g.hosts[i] or "", g.pids[i]))
        g.pids = [g.pids[i] for i in order]
        g.ranks = [g.ranks[i] for i in order]
        g.hosts = [g.hosts[i] for i in order]
        out.append(g)

    def first(g: StackGroup) -> int:
        known = [r for r in g.ranks if r is not None]
        return min(known) if known else g.pids[0]

    return sorted(out, key=lambda g: (-len(g.pids), first(g)))


def _combine_observations(parts: List[Observations]) -> Observations:
    """One set of observations for the whole job; a line seen on many ranks is kept once (the
    classifier then reads a few hundred distinct lines, not one copy per rank)."""
    out = Observations()
    seen = set()
    for obs in parts:
        for source, lines in obs.lines.items():
            for line in lines:
                key = (source, line.text, line.file, line.line)
                if key in seen:
                    continue
                seen.add(key)
                out.add(source, line)
        for key, answer in obs.derived.items():
            current = out.derived.get(key)
            stronger = (
                current is None
                or (key in ("gpu", "cpu") and answer.value == "busy" and current.value != "busy")
                or (key == "platform" and current.value == "cpu" and answer.value != "cpu")
            )
            if stronger:
                out.derived[key] = answer
                out.derived_why[key] = obs.derived_why.get(key, "")
        out.findings.extend(obs.findings)
        out.last_steps.extend(obs.last_steps)
    return out


def _combine_progress(per_node: List[Tuple[str, Progress]]) -> Progress:
    moving = [(name, p) for name, p in per_node if p.hung is False]
    if moving:
        return Progress(False, [f"{name}: {reason}" for name, p in moving for reason in p.reasons])
    hung = [(name, p) for name, p in per_node if p.hung]
    if hung:
        what = hung[0][1].reasons[0] if hung[0][1].reasons else "nothing moved"
        where = f", on all {len(per_node)} nodes that answered" if len(per_node) > 1 else ""
        return Progress(True, [what + where])
    return Progress(None, ["too little was sampled to tell"])


def _capped(items: List[str], what: str) -> List[str]:
    if len(items) <= MAX_LISTED:
        return items
    return items[:MAX_LISTED] + [f"... {len(items) - MAX_LISTED} more {what}"]


def groups_line(groups: List[StackGroup], limit: int = 6) -> str:
    """One line for the groups: ranks 0-61,63 (8 nodes) in all_reduce / rank 62 (node-7) in __getitem__."""
    parts = [f"{describe_ranks(g)} in {g.where}" for g in groups[:limit]]
    if len(groups) > limit:
        parts.append(f"{len(groups) - limit} more groups")
    return " / ".join(parts)


def diagnose_merged(
    merged: MergedSnapshot,
    knowledge: Knowledge,
    answers: Optional[Dict[str, Answer]] = None,
    logs: Sequence[str] = (),
) -> Report:
    """Classify the whole job from every node's snapshot; what is missing is said, not hidden."""
    from assistant.culprit import find_culprit, waits_in_collective
    from assistant.diagnose import fill_report, observe_log
    from assistant.live import _descendants, apply_culprit, apply_progress, process_entries
    from assistant.observe import observe

    answers = dict(answers or {})
    answered = merged.answered()
    node_obs: Dict[str, Observations] = {}
    node_snaps: Dict[str, Snapshot] = {}
    groups: List[StackGroup] = []
    progress: List[Tuple[str, Progress]] = []
    kernel: List[str] = []
    for node in answered:
        _place(node)
        snap = node.snapshot
        flagged = node.kernel_lines
        if flagged is None:
            flagged = snap.kernel.interesting() if snap.kernel is not None else []
        kernel += [f"{node.node}: {line}" for line in flagged]
        if snap.kernel is not None:
            # observe() reads only the lines that matter: hand it those, not the whole tail again
            snap = dataclasses.replace(snap, kernel=dataclasses.replace(snap.kernel, lines=list(flagged)))
        obs = Observations()
        observe(snap, obs)
        node_obs[node.node] = obs
        node_snaps[node.node] = node.snapshot
        groups += group_ranks(node.snapshot)
        progress.append((node.node, judge_progress(node.snapshot)))
    combined = _combine_observations(list(node_obs.values()))
    if len(merged.nodes) > 1:
        combined.offer_answer(Answer("nodes", str(len(merged.nodes)), "evidence"), f"{merged.target}")
    tails = [observe_log(knowledge.tree, path, combined) for path in logs]

    report = Report()
    result = classify(knowledge, answers, combined)
    fill_report(report, knowledge, result, tails)
    for tail in tails:
        if tail.error:
            report.errors.append(tail.error)

    report.processes = [entry for node in answered for entry in process_entries(node.snapshot)]
    report.gpus = [
        dict(d.to_dict(), host=node.node) for node in answered if node.snapshot.gpus for d in node.snapshot.gpus.devices
    ]
    if not report.gpus:
        report.gpu_note = next(
            (n.snapshot.gpus.note for n in answered if n.snapshot.gpus is not None and n.snapshot.gpus.note), None
        )
    report.kernel = kernel[-50:]
    notes = [f"{node.node}: {note}" for node in answered for note in node.snapshot.notes]
    errors = [f"{node.node}: {error}" for node in answered for error in node.snapshot.errors]

    merged_groups = merge_groups(groups)
    report.stack_groups = [dict(g.to_dict(), label=describe_ranks(g)) for g in merged_groups]
    overall = _combine_progress(progress)
    report.verdict.hung = overall.hung
    culprit = find_culprit(knowledge, merged_groups)
    if culprit is not None and culprit.host in node_snaps:
        own = node_obs[culprit.host].only(_descendants(node_snaps[culprit.host], culprit.pid))
        apply_culprit(report, knowledge, culprit, own)
    apply_progress(report, overall)

    # The nodes that did not answer: evidence in their own right.
    missing = merged.missing()
    seen_ranks = {p.rank for n in answered for p in n.snapshot.processes if p.role == "rank" and p.rank is not None}
    sizes = [p.world_size for n in answered for p in n.snapshot.processes if p.world_size]
    unseen = sorted(set(range(max(sizes))) - seen_ranks) if sizes and max(sizes) <= 1 << 20 else []
    for node in missing:
        errors.append(f"{node.node}: {node.error}")
    if missing:
        names = ", ".join(n.node for n in missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        what = f"{len(missing)} of {len(merged.nodes)} nodes gave no snapshot: {names}"
        if unseen:
            what += f"; ranks {compress_numbers(unseen)} were not seen"
        evidence = Evidence("process", what + " (a dead or wedged node is a suspect of its own)")
        if report.diagnoses:
            report.diagnoses[0].evidence.append(evidence)
        notes.insert(0, what)
        waiting = merged_groups and all(waits_in_collective(knowledge, g) for g in merged_groups)
        if culprit is None and answered and waiting:
            report.verdict.summary = (
                f"Every rank that answered waits in a collective; {names} did not answer"
                + (f" (ranks {compress_numbers(unseen)} unseen)" if unseen else "")
                + ": look there first, the rank that holds the others up is probably on it. "
                + report.verdict.summary
            )
    if not answered:
        report.verdict.hung = None
        report.verdict.cause = None
        report.verdict.confidence = 0.0
        report.verdict.summary = f"No node of {merged.target} gave a snapshot; see the errors for why."
    head = f"{merged.target}: {len(answered)} of {len(merged.nodes)} node(s) answered in {merged.seconds:.1f} s"
    if merged_groups:
        head += f"; stack groups: {groups_line(merged_groups)}"
    report.notes = [head] + _capped(notes, "notes")
    report.errors = list(merged.errors) + _capped(errors, "errors") + report.errors
    return report


__all__ = [
    "DEFAULT_NODE_TIMEOUT",
    "MergedSnapshot",
    "NodeSnapshot",
    "collect_hosts",
    "collect_slurm",
    "diagnose_merged",
    "find_job_processes",
    "merge_groups",
    "node_from_wire",
    "parse_hosts",
    "take_snapshot",
]
