"""The pipeline's first stage: everything it reads. The job's processes on this machine or on every
node (one snapshot each), the tails of its logs, and the targeted probes asked for. All I/O of a
diagnosis happens here, bounded; what comes out is data for the pure stages after it."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import List, Optional

from debug_stuck.core.logtext import LogTail
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.errors import BadInput
from debug_stuck.live.nodes import DEFAULT_NODE_TIMEOUT, MergedSnapshot, NodeSnapshot

MAX_NODE_TIMEOUT = 3600.0


@dataclass
class Gathered:
    nodes: Optional[MergedSnapshot] = None  # a live job: one node (this machine) or many
    local: bool = False  # the one node is this machine, read in this process
    tails: List[LogTail] = field(default_factory=list)
    torch: Optional[object] = None  # debug_stuck.live.torch_evidence.TorchEvidence
    probe_results: list = field(default_factory=list)  # ProbeResult, run here or run before
    errors: List[str] = field(default_factory=list)

    @property
    def snapshot(self):
        """This machine's snapshot, for a local diagnosis."""
        if self.local and self.nodes is not None and self.nodes.nodes:
            return self.nodes.nodes[0].snapshot
        return None


def gather(request: DiagnoseRequest) -> Gathered:
    out = Gathered()
    probes = plan_probes(request)  # a probe that may not run is said before anything is collected
    log_paths = [(path, None) for path in request.logs]
    found: set = set()  # logs the job itself writes (not given with --log)
    if request.many_nodes:
        out.nodes = _collect_nodes(request)
    elif request.live:
        from debug_stuck.live.collect import collect

        started = time.monotonic()
        snap = collect(
            request.pids,
            auto=request.auto,
            extra_logs=request.logs,
            window=request.window,
            samples=request.samples,
            native=request.native,
            progress=request.progress,
        )
        node = NodeSnapshot(snap.host or socket.gethostname(), snapshot=snap)
        out.nodes = MergedSnapshot("local", "this machine", [node], timeout=0.0)
        out.nodes.seconds = time.monotonic() - started
        out.local = True
        out.errors.extend(snap.errors)
        log_paths = [(lg.path, lg.read_path) for lg in snap.logs if lg.text_log]
        found = {lg.path for lg in snap.logs if lg.role != "log"}
    out.tails = [_read_tail(path, read_path, request.log_bytes) for path, read_path in log_paths]
    # a file the job writes through its stdout that is not text (a child's `gzip > ckpt.tar.gz`) is
    # its output, not its log: it counts as progress (it grew), never as a log that could not be read
    out.tails = [t for t in out.tails if not (t.path in found and t.encoding == "binary")]
    if request.torch_evidence or out.local:
        from debug_stuck.live.torch_evidence import gather_torch_evidence

        snap = out.snapshot
        hooked = list(getattr(snap, "fr_dumps", []) or []) if snap is not None else []
        out.torch = gather_torch_evidence(request.flight_recorder, request.debug_server, snap, hooked)
        out.errors.extend(out.torch.errors)
    out.errors.extend(tail.error for tail in out.tails if tail.error)
    for _, ctx in probes:
        _fit_to_this_machine(ctx, request, out)
    out.probe_results = run_probes(request, probes)
    return out


def _fit_to_this_machine(ctx, request: DiagnoseRequest, out: Gathered) -> None:
    """A probe runs on this machine: it gets the job's processes that live here and a judge of the
    kernel lines that belong to them. With many nodes, the PIDs given are other machines' (or found
    on each node): only this machine's own processes of the job are passed, none when it is not one
    of the nodes."""
    from debug_stuck.live.kernel_scope import scope_of
    from debug_stuck.probes.collectors.kernel_scope import judge_with

    snap = out.snapshot
    if snap is None and request.many_nodes and out.nodes is not None:
        here = socket.gethostname()
        snap = next((n.snapshot for n in out.nodes.nodes if n.snapshot is not None and n.snapshot.host == here), None)
        ctx.pids = [p.pid for p in snap.processes] if snap is not None else []
        if snap is None:
            out.errors.append(
                f"probes run on this machine ({here}), which is not one of the job's nodes:"
                " they saw none of its processes"
            )
    if snap is None:
        return
    ctx.kernel_judge = judge_with(scope_of(snap))


def _read_tail(path: str, read_path: Optional[str], max_bytes: Optional[int]) -> LogTail:
    from debug_stuck.probes.collectors.logtail import read_log_tail

    if max_bytes:
        return read_log_tail(path, max_bytes=max_bytes, read_path=read_path)
    return read_log_tail(path, read_path=read_path)


def _collect_nodes(request: DiagnoseRequest) -> MergedSnapshot:
    """A snapshot from every node of the job: over ssh (--hosts), or one Slurm step on each node."""
    from debug_stuck.live.slurm import collect_slurm
    from debug_stuck.live.ssh import collect_hosts

    timeout = DEFAULT_NODE_TIMEOUT if request.node_timeout is None else request.node_timeout
    if timeout <= 0 or timeout > MAX_NODE_TIMEOUT:
        raise BadInput(
            f"--node-timeout {timeout:g} is out of range", f"give seconds between 1 and {MAX_NODE_TIMEOUT:g}"
        )
    pids = list(dict.fromkeys(request.pids))
    if request.hosts:
        return collect_hosts(
            request.hosts,
            pids or "auto",
            timeout,
            window=request.window,
            native=request.native,
            ssh_options=request.ssh_options,
            slurm_job=request.slurm_job,
            progress=request.progress,
        )
    if pids or request.auto:
        raise BadInput("--slurm-job finds the job's processes on every node by itself", "leave out --pid and --auto")
    return collect_slurm(
        request.slurm_job, timeout, window=request.window, native=request.native, progress=request.progress
    )


def plan_probes(request: DiagnoseRequest) -> list:
    """(spec, context) of each probe asked for and not already run; BadInput for an unknown probe or
    one that runs the user's code without consent."""
    if not request.probes:
        return []
    from debug_stuck.probes.targeted.base import ProbeContext, ProbeUsageError
    from debug_stuck.probes.targeted.registry import given_inputs, probe_spec

    done = {data.get("name") for data in request.probe_results}
    runs = []
    for name in request.probes:
        if name in done:
            continue
        try:
            spec = probe_spec(name)
        except ProbeUsageError as exc:
            raise BadInput(str(exc)) from None
        ctx = ProbeContext(timeout=spec.timeout, allow_exec=request.allow_exec, pids=list(request.pids))
        if spec.runs_user_code_with(given_inputs(ctx)) and not request.allow_exec:
            raise BadInput(f"probe {name!r} runs your code", "add --allow-exec to consent, or leave that probe out")
        runs.append((spec, ctx))
    return runs


def run_probes(request: DiagnoseRequest, runs: list) -> list:
    """The probes planned, run on this machine, after the results of those that already ran
    (request.probe_results), which are weighed the same way."""
    if not runs and not request.probe_results:
        return []
    from debug_stuck.probes.targeted.base import ProbeResult
    from debug_stuck.probes.targeted.registry import run_probe

    results = [ProbeResult.from_dict(data) for data in request.probe_results]
    for spec, ctx in runs:
        if request.progress:
            request.progress(f"running probe {spec.name}")
        results.append(run_probe(spec.name, ctx))
    return results
