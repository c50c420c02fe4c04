"""PyTorch's own evidence of a collective hang: the Flight Recorder's dumps (given with
--flight-recorder, written where the job's environment says, or requested through the hook), every
rank's stacks and FR tables from torch's debug server, and NCCL RAS. Read bounded and read-only;
what could not be had is said, with why."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set

DEBUG_SERVER_PORT = 25999  # torch.distributed.debug.start_debug_server's default
RAS_DEFAULT_PORT = 28028  # NCCL 2.24+ RAS, unless NCCL_RAS_ADDR says otherwise


@dataclass
class TorchEvidence:
    fr: Optional[object] = None  # debug_stuck.core.flight_recorder.FrAnalysis
    fr_sources: List[str] = field(default_factory=list)  # the dump files read
    debug_server: Optional[object] = None  # debug_stuck.probes.collectors.debug_server.DebugServerRead
    ras: Optional[object] = None  # debug_stuck.probes.collectors.nccl_ras.RasReport
    errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return self.fr is not None or self.debug_server is not None or self.ras is not None


def job_dump_files(snapshot) -> List[str]:
    """The FR dump files the job's environment points at, written during its lifetime, read through
    the job's own root (a container's /tmp is not ours)."""
    from debug_stuck.probes.collectors.flight_recorder import dump_locations

    if snapshot is None:
        return []
    started = min((p.create_time for p in snapshot.processes if p.create_time), default=None)
    found: List[str] = []
    for info in snapshot.processes:
        if info.role != "rank" or not info.env:
            continue
        where = dump_locations(info.env, info.rank)
        prefix = where.get("prefix")
        if not where.get("enabled") or not prefix or not prefix.startswith("/"):
            continue
        # every rank of this node writes <prefix><rank>: all of them, seen from the job's own root
        root = f"/proc/{info.pid}/root"
        seen_from = root if os.path.isdir(root) else ""
        folder, stem = os.path.split(prefix)
        try:
            names = sorted(os.listdir(seen_from + folder))[:256]
        except OSError:
            continue
        for name in names:
            if not name.startswith(stem):
                continue
            path = os.path.join(seen_from + folder, name)
            try:
                fresh = started is None or os.stat(path).st_mtime >= started - 1
            except OSError:
                continue
            if fresh:  # a dump of an earlier run is not this job's
                found.append(path)
    return list(dict.fromkeys(found))


def listening_ports(snapshot) -> Dict[int, Set[str]]:
    """{TCP port: the roles of the job's processes that listen on it}, for its ranks and launcher
    (torch's debug server, NCCL's RAS): one bounded look at each one's sockets."""
    import psutil

    from debug_stuck.bounded import call_or

    ports: Dict[int, Set[str]] = {}
    for info in snapshot.processes if snapshot is not None else []:
        if info.role not in ("rank", "launcher"):
            continue
        conns = call_or([], lambda pid=info.pid: psutil.Process(pid).net_connections(kind="tcp"), 2.0, "sockets",
                        (psutil.Error, OSError))  # fmt: skip
        for conn in conns or []:
            if conn.status == psutil.CONN_LISTEN and conn.laddr:
                ports.setdefault(conn.laddr.port, set()).add(info.role)
    return ports


def ras_port(snapshot) -> int:
    """The port NCCL's RAS threads listen on for this job: NCCL_RAS_ADDR's, else 28028 (NCCL 2.24+
    docs/env.rst NCCL_RAS_ADDR; troubleshooting/ras.rst: the RAS threads of all processes of the job
    listen on localhost, port 28028)."""
    for info in snapshot.processes if snapshot is not None else []:
        addr = (info.env or {}).get("NCCL_RAS_ADDR", "")
        port = addr.rpartition(":")[2]
        if port.isdigit():
            return int(port)
    return RAS_DEFAULT_PORT


def uses_nccl(snapshot) -> bool:
    """A rank of the job has NCCL loaded (its library in the process's memory maps)."""
    from debug_stuck.bounded import call_or
    from debug_stuck.probes.collectors.procs import maps_mention

    if snapshot is None:
        return False
    ranks = [p for p in snapshot.processes if p.role == "rank" and p.loads_torch][:4]
    return any(call_or(False, lambda pid=p.pid: maps_mention(pid, "libnccl"), 2.0, "maps", (OSError,)) for p in ranks)


def gather_torch_evidence(
    sources: Sequence[str], debug_server: Optional[str], snapshot=None, hook_dumps: Sequence[str] = ()
) -> TorchEvidence:
    out = TorchEvidence()
    started = time.monotonic()
    dumps: Dict[int, dict] = {}
    from debug_stuck.bounded import call_or

    # the dump folder may be on the very mount that hangs: a bounded look, or none
    own = call_or([], lambda: job_dump_files(snapshot), 3.0, "the job's Flight Recorder dumps")
    files = list(sources) + list(own or []) + list(hook_dumps)
    if files:
        from debug_stuck.probes.collectors.flight_recorder import read_flight_recorder

        read = read_flight_recorder(files)
        dumps.update(read.by_rank())
        out.errors += [f"flight recorder: {e}" for e in read.errors]
        out.fr_sources = [d.path for d in read.dumps]
    address = debug_server
    ports = None  # the job's listening ports, read once for the debug server and RAS
    if address is None:
        ports = listening_ports(snapshot)
        if DEBUG_SERVER_PORT in ports:
            address = f"127.0.0.1:{DEBUG_SERVER_PORT}"
    if address:
        from debug_stuck.probes.collectors.debug_server import parse_address, read_debug_server

        host, port = parse_address(address)
        server = read_debug_server(host, port)
        out.debug_server = server
        out.errors += server.errors
        for rank, dump in {**server.fr, **server.fr_nccl}.items():
            dumps.setdefault(rank, dump)
    if dumps:
        from debug_stuck.core.flight_recorder import analyze

        out.fr = analyze(dumps)
    # a rank that only loaded libnccl (any CUDA build of torch does) runs no RAS thread: NCCL starts
    # it with the process's first communicator, and then a rank of the job listens on its port
    if uses_nccl(snapshot):
        ports = listening_ports(snapshot) if ports is None else ports
        if "rank" in ports.get(ras_port(snapshot), ()):
            from debug_stuck.probes.collectors.nccl_ras import query_ras

            ras = query_ras()
            out.ras = ras
            if ras.error:
                out.notes.append(ras.error)
    if out.any:
        out.notes.append(f"PyTorch's own evidence read in {time.monotonic() - started:.1f} s")
    return out


def observe_torch_evidence(torch: TorchEvidence, obs) -> None:
    """What PyTorch recorded, as observations: the Flight Recorder's conclusion and findings
    (`flight-recorder` lines the playbooks weigh), every rank's stacks from the debug server."""
    from debug_stuck.core.classify import ObservedLine

    fr = torch.fr
    if fr is not None:
        culprits = ",".join(map(str, fr.culprits)) or "-"
        head = f"fr cause={fr.cause or '-'} state={fr.culprit_state or '-'} culprits={culprits}"
        quote = fr.findings[0] if fr.findings else head
        obs.add("flight-recorder", ObservedLine(head, quote=quote))
        for finding in fr.findings:
            obs.add("flight-recorder", ObservedLine(f"fr finding {finding}", quote=finding))
    if torch.ras is not None and not torch.ras.error:
        for finding in torch.ras.findings():
            obs.add("flight-recorder", ObservedLine(f"ras {finding}", quote=finding))
    server = torch.debug_server
    if server is not None:
        for rank, threads in sorted(server.stacks.items()):
            for thread in threads:
                who = f"rank {rank} thread {thread.get('name') or thread.get('ident') or '?'} (debug server)"
                for frame in thread.get("frames") or []:
                    text = f"{frame.get('function')} ({frame.get('file')}:{frame.get('line')})"
                    obs.add("stack", ObservedLine(text, subject=who))


def fill_torch_evidence(report, torch: TorchEvidence) -> None:
    """The Flight Recorder's analysis in the report, its culprit named where the live stacks named
    none, and its finding leading the verdict when nothing live did."""
    report.notes.extend(torch.notes)
    fr = torch.fr
    if fr is None:
        return
    report.flight_recorder = dict(fr.to_dict(), sources=list(torch.fr_sources))
    if fr.culprits and report.culprit is None:
        data = fr.to_dict()
        report.culprit = {
            "rank": fr.culprits[0],
            "ranks": list(fr.culprits),
            "source": "flight-recorder",
            "state": fr.culprit_state,
            "collective": data.get("collective"),
            "seq": data.get("seq"),
            "pg": data.get("pg"),
            "call_site": data.get("call_site"),
            "cause": report.verdict.cause,
        }
    if fr.findings and report.verdict.finding is None:
        report.verdict.finding = {"kind": "flight-recorder", "text": fr.findings[0]}
    if fr.problems and report.verdict.hung is None:
        # a collective that did not complete on every rank, as recorded: the job was stuck there
        report.verdict.hung = True
