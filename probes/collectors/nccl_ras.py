"""Ask NCCL's RAS subsystem (NCCL 2.24+) which ranks and processes are missing or unresponsive.

Every NCCL process runs a RAS thread; `ncclras` (shipped with NCCL) asks the one on localhost
(port 28028) and prints the job's state as text: an Errors section (INCOMPLETE: processes that
gave no data, DEAD: processes unreachable for 60 s, `#<group>-<comm> (<hash>) INCOMPLETE`:
ranks missing from a communicator) and a Warnings section (TIMEOUT, `MISMATCH`: ranks that
launched fewer collectives or have another status; a count that does not move between two
queries means that communicator is stuck).

VERIFIED MOSTLY AGAINST TEXT: the parser is built on the sample output in NCCL's documentation and
on the printf formats of its RAS client (tests/fixtures/nccl_ras/README.md cites both). One real
`ncclras -v` run is recorded (NCCL 2.28.9, a healthy one-rank job on an H200): it parses, and
finds nothing. No real run with missing or dead ranks has been recorded (one GPU only), and NCCL
says the format varies between releases: treat what it finds as a lead, not a proof.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from debug_stuck.bounded import run_command

RAS_SECONDS = 10  # ncclras's own timeout (-t); the command gets a few seconds more
_PROCESS = re.compile(r"^Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpus>.+)$")
_RANK = re.compile(
    r"^Rank (?P<rank>\d+)(?: has (?P<what>.+?))? -- "
    r"(?:GPU (?P<gpu>\S+) managed by process (?P<pid>\d+) on node (?P<node>\S+)|\[process information not found\])$"
)
_COMM = re.compile(r"^#(?P<comm>\d+-\d+) \((?P<hash>[0-9a-f]+)\) (?P<kind>[A-Z,]+)$")
_MISSING_RANKS = re.compile(r"^The missing ranks?: (?P<ranks>.+)$")
_GROUP_COUNT = re.compile(r"^(?P<n>\d+) ranks? (?:have|has) (?P<what>.+)$")
_TIMEOUTS = re.compile(r"^Encountered (?P<n>\d+) communication timeouts?")
_TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")


@dataclass
class RasReport:
    communicators: List[Dict[str, Any]] = field(default_factory=list)  # the summary table's rows
    missing_processes: List[Dict[str, Any]] = field(default_factory=list)  # gave no data
    dead_processes: List[Dict[str, Any]] = field(default_factory=list)  # unreachable for good
    comm_issues: List[Dict[str, Any]] = field(default_factory=list)  # per communicator
    timeouts: int = 0
    error: Optional[str] = None  # "could not ask NCCL RAS: why"
    raw: str = ""

    @property
    def missing_ranks(self) -> List[int]:
        ranks = set()
        for issue in self.comm_issues:
            if "INCOMPLETE" in issue["kind"]:
                ranks.update(issue["missing_ranks"])
        return sorted(ranks)

    def findings(self) -> List[str]:
        lines = []
        if self.missing_processes:
            lines.append(f"NCCL RAS: no data from {_processes(self.missing_processes)}")
        if self.dead_processes:
            lines.append(f"NCCL RAS: considered dead (unreachable): {_processes(self.dead_processes)}")
        for issue in self.comm_issues:
            lines += _issue_lines(issue)
        if self.timeouts:
            lines.append(f"NCCL RAS: {self.timeouts} communication timeout(s) while gathering data")
        return lines

    def to_dict(self) -> dict:
        return {
            "error": self.error,
            "missing_ranks": self.missing_ranks,
            "missing_processes": self.missing_processes,
            "dead_processes": self.dead_processes,
            "comm_issues": self.comm_issues,
            "communicators": self.communicators,
            "timeouts": self.timeouts,
            "findings": self.findings(),
        }


def _processes(procs: List[Dict[str, Any]]) -> str:
    return "; ".join(f"process {p['pid']} on node {p['node']} (GPU {p['gpus']})" for p in procs)


def _issue_lines(issue: Dict[str, Any]) -> List[str]:
    name = f"communicator #{issue['comm']} ({issue['hash']})"
    lines = []
    if issue["missing_ranks"]:
        ranks = ", ".join(str(r) for r in issue["missing_ranks"])
        lines.append(f"NCCL RAS: {name} misses rank(s) {ranks}")
    unlisted = [g for g in issue["groups"] if not g["ranks"]]
    others = f"; {unlisted[0]['count']} others {_have(unlisted[0])}" if unlisted else ""
    for group in issue["groups"]:
        if group["ranks"]:
            ranks = ", ".join(str(r["rank"]) for r in group["ranks"])
            lines.append(f"NCCL RAS: {name}: rank(s) {ranks} {_have(group)}{others}")
    if "ERROR" in issue["kind"]:
        lines.append(f"NCCL RAS: {name} reports errors: " + "; ".join(issue["lines"][:3]))
    return lines


def _have(group: Dict[str, Any]) -> str:
    return f"{'has' if group['count'] == 1 else 'have'} {group['what']}"  # as NCCL words it


def parse_rank_list(text: str) -> List[int]:
    """ "21", "3, 5-6" -> [21], [3, 5, 6]."""
    ranks: List[int] = []
    for part in text.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            ranks.extend(range(int(low), int(high or low) + 1))
    return ranks


def parse_ras_output(text: str) -> RasReport:
    """What `ncclras` printed, as data. Lines it does not know are kept in their block's `lines`."""
    report = RasReport(raw=text)
    block: Optional[str] = None
    issue: Optional[Dict[str, Any]] = None
    for raw in text.splitlines():
        line = raw.strip()
        row = _TABLE_ROW.match(raw)
        if row:
            keys = ("group", "comms", "nodes_per_comm", "ranks_per_node", "ranks_per_comm", "ranks_in_group")
            values = [int(v) if v.isdigit() else v for v in row.groups()[:6]]
            report.communicators.append({**dict(zip(keys, values)), "status": row[7], "errors": row[8]})
            continue
        if not line or set(line) == {"="}:
            continue
        if not raw.startswith(" "):  # a block's head
            comm = _COMM.match(line)
            issue = None
            block = line.split()[0]
            if comm:
                issue = {**comm.groupdict(), "missing_ranks": [], "ranks": [], "groups": [], "lines": []}
                report.comm_issues.append(issue)
            continue
        _detail(report, block, issue, line)
    return report


def _detail(report: RasReport, block: Optional[str], issue: Optional[Dict[str, Any]], line: str) -> None:
    if issue is not None:
        _comm_detail(issue, line)
        return
    process = _PROCESS.match(line)
    if process and block in ("INCOMPLETE", "DEAD"):
        entry = {"pid": int(process["pid"]), "node": process["node"], "gpus": process["gpus"]}
        (report.missing_processes if block == "INCOMPLETE" else report.dead_processes).append(entry)
    timeouts = _TIMEOUTS.match(line)
    if timeouts:
        report.timeouts += int(timeouts["n"])


def _comm_detail(issue: Dict[str, Any], line: str) -> None:
    missing = _MISSING_RANKS.match(line)
    rank = _RANK.match(line)
    count = _GROUP_COUNT.match(line)
    if missing:
        issue["missing_ranks"] += parse_rank_list(missing["ranks"])
    elif rank:
        entry = {
            "rank": int(rank["rank"]),
            "gpu": rank["gpu"],
            "pid": int(rank["pid"]) if rank["pid"] else None,
            "node": rank["node"],
        }
        if rank["what"]:
            entry["what"] = rank["what"]
        issue["ranks"].append(entry)
        if "INCOMPLETE" in issue["kind"] and not issue["groups"]:
            issue["missing_ranks"].append(entry["rank"])  # NCCL >= 2.25 lists missing ranks one a line
        elif issue["groups"]:
            issue["groups"][-1]["ranks"].append(entry)
    elif count:
        issue["groups"].append({"count": int(count["n"]), "what": count["what"], "ranks": []})
    else:
        issue["lines"].append(line)


def query_ras(host: Optional[str] = None, port: Optional[int] = None, seconds: int = RAS_SECONDS) -> RasReport:
    """Run `ncclras -v` (bounded) and parse what it prints; `error` says why when it could not."""
    exe = shutil.which("ncclras")
    if exe is None:
        return RasReport(error="could not ask NCCL RAS: ncclras is not on the PATH (it comes with NCCL 2.24+)")
    argv = [exe, "-v", "-t", str(int(seconds))]
    if host:
        argv += ["-h", host]
    if port:
        argv += ["-p", str(int(port))]
    try:
        result = run_command(argv, timeout=seconds + 5)
    except OSError as exc:
        return RasReport(error=f"could not ask NCCL RAS: {exe} did not start: {exc.strerror or exc}")
    if result.timed_out:
        return RasReport(error=f"could not ask NCCL RAS: ncclras did not finish within {seconds + 5} s")
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        return RasReport(error=f"could not ask NCCL RAS: ncclras exited with {result.returncode}: {last[0][:200]}")
    return parse_ras_output(result.stdout)
