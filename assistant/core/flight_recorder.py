"""Match Flight Recorder (FR) dumps across ranks and name the rank that holds the others up. Pure.

Input: one dump per rank (plain dicts, as read from pickle or JSON; see core/fr_format). Per
process group (PG), like torch's analyzer (torch/distributed/flight_recorder/components): only the
stretch of collectives every rank's ring buffer still holds is compared; collectives pair up by
`collective_seq_id`; the first one that is missing on a rank, or differs in op, sizes or dtypes,
or did not complete everywhere, is that PG's problem, and nothing after it is trusted. Where
torch's analyzer takes the first rank as the reference, a majority of ranks is taken here (the
lowest rank breaks a tie), so with three ranks the odd one out is the culprit whichever rank it is.

Of the problems of all PGs, the one whose collective was entered first is the primary: a rank
stuck in PG A makes its peers stall in PG B later, not the other way round.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from debug_stuck.core.fr_format import normalize_dump

DEFAULT_CAUSE = "collective"
_SIZE_FREE = ("all_to_all", "scatter", "gather")  # per-rank sizes may differ validly
_NO_EVENTS = ("gloo",)  # backends whose FR entries never leave "scheduled": retired means done


@dataclass
class Problem:
    kind: str  # missing | op-mismatch | size-mismatch | dtype-mismatch | state-mismatch | not-completed
    pg: str
    pg_desc: str
    seq: int
    culprits: List[int]
    sides: Dict[int, Dict[str, Any]]  # rank -> what it was doing (see _side)
    line: str
    entered_ns: int = 0

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "pg": self.pg,
            "pg_desc": self.pg_desc,
            "seq": self.seq,
            "culprits": list(self.culprits),
            "sides": {str(r): dict(s) for r, s in sorted(self.sides.items())},
            "line": self.line,
        }


@dataclass
class FrAnalysis:
    ranks: List[int]
    problems: List[Problem] = field(default_factory=list)
    culprits: List[int] = field(default_factory=list)
    cause: Optional[str] = None
    # never-joined | behind | different-op | different-size | different-dtype | not-completed | no-dump
    culprit_state: Optional[str] = None
    behind: Dict[str, List[int]] = field(default_factory=dict)  # pg -> ranks whose last enqueued seq is lower
    no_dump: List[int] = field(default_factory=list)
    rank_status: Dict[int, Dict[str, Dict[str, Any]]] = field(default_factory=dict)
    findings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @property
    def primary(self) -> Optional[Problem]:
        return self.problems[0] if self.problems else None

    def culprit_side(self) -> Dict[str, Any]:
        """The first culprit's side of the primary problem ({} when there is none)."""
        primary = self.primary
        if primary is None or not primary.culprits or primary.culprits[0] not in primary.sides:
            return {}
        return primary.sides[primary.culprits[0]]

    def to_dict(self) -> dict:
        """problems[0] is the primary problem; pg, seq, collective and call_site summarize it."""
        primary = self.primary
        waiting = [s for r, s in sorted(primary.sides.items()) if r not in primary.culprits] if primary else []
        waiting.sort(key=lambda s: not s.get("call_site"))
        return {
            "ranks": list(self.ranks),
            "culprits": list(self.culprits),
            "cause": self.cause,
            "culprit_state": self.culprit_state,
            "pg": primary.pg if primary else None,
            "pg_desc": primary.pg_desc if primary else None,
            "seq": primary.seq if primary else None,
            "collective": waiting[0].get("op") if waiting else None,
            "call_site": self.culprit_side().get("call_site"),
            "waiting_call_site": waiting[0].get("call_site") if waiting else None,
            "problems": [p.to_dict() for p in self.problems],
            "behind": {pg: list(r) for pg, r in self.behind.items()},
            "no_dump": list(self.no_dump),
            "rank_status": {str(r): s for r, s in sorted(self.rank_status.items())},
            "findings": list(self.findings),
            "notes": list(self.notes),
        }


_STATE = {
    "missing": "behind",
    "op-mismatch": "different-op",
    "size-mismatch": "different-size",
    "dtype-mismatch": "different-dtype",
    "state-mismatch": "not-completed",
}


# --- frames -------------------------------------------------------------------------------------


def _outside_torch(path: str) -> bool:
    path = path.replace("\\", "/")
    return "/torch/" not in path and not path.startswith("torch/")


def _outside_packages(path: str) -> bool:
    return "/site-packages/" not in path and "/dist-packages/" not in path


def call_site(frames: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The user's frame of an entry: the innermost one outside torch/ and site-packages (else
    outside torch/ alone: the user's code may be an installed package)."""
    for keep in (lambda p: _outside_torch(p) and _outside_packages(p), _outside_torch):
        for frame in frames:
            if frame.get("filename") and keep(frame["filename"]):
                return {"file": frame["filename"], "line": frame.get("line", 0), "function": frame.get("name", "")}
    return None


def site_text(site: Optional[Dict[str, Any]]) -> str:
    if not site:
        return "an unknown call site"
    name = site["file"].replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}:{site['line']} ({site['function']})" if site.get("function") else f"{name}:{site['line']}"


# --- per rank and PG ----------------------------------------------------------------------------


def _done(entry: Dict[str, Any], status: Optional[Dict[str, int]]) -> bool:
    if entry["state"] == "completed":
        return True
    if status and not entry["is_p2p"] and entry["collective_seq_id"] <= status.get("last_completed_collective", -1):
        return True
    return entry["retired"] and entry["profiling_name"].split(":", 1)[0] in _NO_EVENTS


def _pg_label(name: str, desc: str) -> str:
    return f"pg {name} ({desc})" if desc and desc != "undefined" else f"pg {name}"


def _ranks_text(ranks: List[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in sorted(ranks))


@dataclass
class _Group:
    name: str
    desc: str = ""
    pg_ids: set = field(default_factory=set)
    members: set = field(default_factory=set)
    per_rank: Dict[int, List[Dict[str, Any]]] = field(default_factory=dict)  # collectives, by seq


class _Job:
    def __init__(self, dumps: Mapping[int, Dict[str, Any]]):
        self.dumps = {int(r): normalize_dump(d) for r, d in dumps.items()}
        self.ranks = sorted(self.dumps)
        self.groups: Dict[str, _Group] = {}
        for rank, dump in self.dumps.items():
            for entry in dump["entries"]:
                group = self.groups.setdefault(entry["pg_name"], _Group(entry["pg_name"]))
                group.desc = group.desc or entry["pg_desc"]
                group.pg_ids.add(entry["pg_id"])
                if not entry["is_p2p"]:
                    group.per_rank.setdefault(rank, []).append(entry)
        for group in self.groups.values():
            for entries in group.per_rank.values():
                entries.sort(key=lambda e: (e["collective_seq_id"], e["record_id"]))
            group.members = self._members(group)

    def status(self, rank: int, group: _Group) -> Optional[Dict[str, int]]:
        statuses = self.dumps[rank]["pg_status"]
        for pg_id in group.pg_ids:
            if pg_id in statuses:
                return statuses[pg_id]
        return None

    def _members(self, group: _Group) -> set:
        configured = set()
        for dump in self.dumps.values():
            configured.update(dump["pg_config"].get(group.name, {}).get("ranks", []))
        if configured:
            return configured
        if group.desc == "default_pg":
            return set(self.ranks)
        seen = set(group.per_rank)
        seen.update(r for r in self.ranks if self.status(r, group) is not None)
        return seen

    def last_enqueued(self, rank: int, group: _Group) -> Optional[int]:
        status = self.status(rank, group)
        if status and "last_enqueued_collective" in status:
            return max(status["last_enqueued_collective"], 0)
        entries = group.per_rank.get(rank)
        if entries:
            return entries[-1]["collective_seq_id"]
        return 0 if not self.dumps[rank]["entries"] or status is not None else None

    def side(self, rank: int, group: _Group, entry: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """What `rank` was doing at a collective: its own entry there, or (absent) its last one."""
        status = self.status(rank, group)
        if entry is None:
            entries = group.per_rank.get(rank) or []
            last = entries[-1] if entries else None
            return {
                "present": False,
                "last_seq": self.last_enqueued(rank, group),
                "last_op": last["profiling_name"] if last else None,
                "call_site": call_site(last["frames"]) if last else None,
                "entries": len(self.dumps[rank]["entries"]),
            }
        return {
            "present": True,
            "op": entry["profiling_name"],
            "seq": entry["collective_seq_id"],
            "state": entry["state"],
            "done": _done(entry, status),
            "input_sizes": entry["input_sizes"],
            "output_sizes": entry["output_sizes"],
            "dtypes": sorted(set(entry["input_dtypes"]) | set(entry["output_dtypes"])),
            "call_site": call_site(entry["frames"]),
        }


# --- matching -----------------------------------------------------------------------------------


def _reference(present: Dict[int, Dict[str, Any]], key) -> Tuple[Any, List[int]]:
    """The value most ranks share (the lowest rank breaks a tie) and the ranks that differ."""
    counts = Counter(key(e) for e in present.values())
    best = max(counts.values())
    winners = {value for value, n in counts.items() if n == best}
    value = next(key(present[r]) for r in sorted(present) if key(present[r]) in winners)
    return value, sorted(r for r, e in present.items() if key(e) != value)


def _op(entry: Dict[str, Any]) -> str:
    return entry["profiling_name"].split(":", 1)[-1].split(" ")[0]


def _checks(op: str):
    sized = not any(op.startswith(free) for free in _SIZE_FREE) and not op.endswith("_v")
    yield "op-mismatch", lambda e: e["profiling_name"]
    if sized:
        yield "size-mismatch", lambda e: (repr(e["input_sizes"]), repr(e["output_sizes"]))
    yield "dtype-mismatch", lambda e: (tuple(sorted(set(e["input_dtypes"]))), tuple(sorted(set(e["output_dtypes"]))))


def _window(job: _Job, group: _Group) -> Tuple[int, int]:
    firsts = [entries[0]["collective_seq_id"] for entries in group.per_rank.values() if entries]
    lasts = [entries[-1]["collective_seq_id"] for entries in group.per_rank.values() if entries]
    return (max(firsts), max(lasts)) if firsts else (0, -1)


def _pg_problem(job: _Job, group: _Group) -> Optional[Problem]:
    dumped = sorted(group.members & set(job.ranks))
    by_seq = {r: {e["collective_seq_id"]: e for e in group.per_rank.get(r, [])} for r in dumped}
    start, end = _window(job, group)
    for seq in range(start, end + 1):
        present = {r: by_seq[r][seq] for r in dumped if seq in by_seq[r]}
        if not present:
            continue
        missing = [
            r for r in dumped if r not in present and (last := job.last_enqueued(r, group)) is not None and last < seq
        ]
        if missing:
            return _problem(job, group, "missing", seq, missing, present)
        for kind, key in _checks(_op(next(iter(present.values())))):
            _, odd = _reference(present, key)
            if odd:
                return _problem(job, group, kind, seq, odd, present)
        # Within one process group collectives finish in order: a rank that already entered a later
        # one got past this one, whatever its entry says yet (gloo marks completion asynchronously).
        done = {
            r: _done(e, job.status(r, group)) or any(later > seq for later in by_seq[r]) for r, e in present.items()
        }
        if not all(done.values()):
            stuck = [r for r, ok in done.items() if not ok]
            kind = "state-mismatch" if len(stuck) < len(done) else "not-completed"
            return _problem(job, group, kind, seq, stuck if kind == "state-mismatch" else [], present)
    return None


def _problem(job: _Job, group: _Group, kind: str, seq: int, culprits: List[int], present) -> Problem:
    sides = {r: job.side(r, group, present.get(r)) for r in sorted(group.members & set(job.ranks))}
    entered = min(e["time_created_ns"] or 0 for e in present.values())
    problem = Problem(kind, group.name, group.desc, seq, culprits, sides, "", entered)
    problem.line = _line(problem, present)
    return problem


def _line(p: Problem, present: Dict[int, Dict[str, Any]]) -> str:
    where = _pg_label(p.pg, p.pg_desc)
    others = sorted(r for r in present if r not in p.culprits)
    with_site = [r for r in others if p.sides[r].get("call_site")]  # a JSON dump has no frames
    ref = p.sides[(with_site or others)[0]] if others else next(iter(p.sides.values()))
    ref_text, ref_site = f"{ref.get('op')} #{p.seq}", site_text(ref["call_site"])
    if p.kind == "missing":
        verb = "waits" if len(others) == 1 else "wait"
        parts = [f"{_ranks_text(others)} {verb} in {ref_text} on {where} at {ref_site}"]
        parts += [_absent_text(r, p.sides[r]) for r in p.culprits]
        return "; ".join(parts)
    if p.kind == "op-mismatch":
        sides = [(r, p.sides[r]) for r in p.culprits]
        odd = ", ".join(f"rank {r} is in {s['op']} at {site_text(s['call_site'])}" for r, s in sides)
        return f"collective #{p.seq} on {where} differs: {odd}; {_ranks_text(others)} in {ref.get('op')} at {ref_site}"
    if p.kind in ("size-mismatch", "dtype-mismatch"):
        what, key = ("sizes", "input_sizes") if p.kind == "size-mismatch" else ("dtypes", "dtypes")
        odd = ", ".join(f"rank {r} has {p.sides[r][key]}" for r in p.culprits)
        odd_site = site_text(p.sides[p.culprits[0]]["call_site"])
        return f"{what} differ in {ref_text} on {where}: {odd}, {_ranks_text(others)} {ref[key]} (at {odd_site})"
    if p.kind == "state-mismatch":
        done = _ranks_text([r for r, s in p.sides.items() if s.get("done")])
        return f"{ref_text} on {where} completed on {done}, not on {_ranks_text(p.culprits)} (at {ref_site})"
    return f"every rank is in {ref_text} on {where} at {ref_site}, the calls match, and it completed on none"


def _absent_text(rank: int, side: Dict[str, Any]) -> str:
    if not side["entries"]:
        return f"rank {rank} issued no collective at all"
    if side["last_op"]:
        last = f"{side['last_op']} #{side['last_seq']}"
        return f"rank {rank} never reached it: its last was {last} at {site_text(side['call_site'])}"
    return f"rank {rank} never reached it (its last on this pg: #{side['last_seq']})"


# --- the whole job ------------------------------------------------------------------------------


def analyze(dumps: Mapping[int, Dict[str, Any]]) -> FrAnalysis:
    """Match the dumps ({rank: dump}) and say who holds the others up, as far as FR can tell."""
    job = _Job(dumps)
    result = FrAnalysis(ranks=job.ranks)
    for rank in job.ranks:
        result.notes += [f"rank {rank}: {n}" for n in job.dumps[rank]["notes"]]
        result.rank_status[rank] = _rank_status(job, rank)
    versions = {job.dumps[r]["version"] for r in job.ranks}
    if len(versions) > 1:
        result.notes.append(f"the ranks wrote different format versions: {', '.join(sorted(versions))}")
    no_dump = set()
    for group in job.groups.values():
        no_dump |= group.members - set(job.ranks)
        behind = _behind(job, group)
        if behind:
            result.behind[group.name] = behind
        problem = _pg_problem(job, group)
        if problem:
            result.problems.append(problem)
    result.problems.sort(key=lambda p: (p.entered_ns or 0, p.pg))
    result.no_dump = sorted(no_dump)
    _conclude(job, result)
    return result


MAX_P2P_LINES = 4


def _pending_p2p(job: _Job) -> List[str]:
    """Sends and receives not completed (NCCL records them; gloo's FR does not): listed as they
    are, not matched, since p2p_seq_id counts per rank and pairs need not line up."""
    lines = []
    for rank in job.ranks:
        statuses = job.dumps[rank]["pg_status"]
        for entry in job.dumps[rank]["entries"]:
            if not entry["is_p2p"] or _done(entry, statuses.get(entry["pg_id"])):
                continue
            where = _pg_label(entry["pg_name"], entry["pg_desc"])
            lines.append(
                f"rank {rank} has {entry['profiling_name']} (p2p #{entry['p2p_seq_id']}) pending on {where} "
                f"at {site_text(call_site(entry['frames']))}"
            )
            break  # its first pending one: the others queue behind it
    if len(lines) > MAX_P2P_LINES:
        lines = lines[:MAX_P2P_LINES] + [f"... and {len(lines) - MAX_P2P_LINES} more ranks with pending p2p ops"]
    return lines


def _behind(job: _Job, group: _Group) -> List[int]:
    lasts = {r: job.last_enqueued(r, group) for r in sorted(group.members & set(job.ranks))}
    known = {r: n for r, n in lasts.items() if n is not None}
    if len(known) < 2:
        return []
    top = max(known.values())
    return [r for r, n in known.items() if n < top]


def _rank_status(job: _Job, rank: int) -> Dict[str, Dict[str, Any]]:
    out = {}
    for group in job.groups.values():
        if rank not in group.members:
            continue
        status = job.status(rank, group) or {}
        entries = group.per_rank.get(rank) or []
        last = entries[-1] if entries else None
        out[group.name] = {
            "pg_desc": group.desc,
            "last_enqueued": job.last_enqueued(rank, group),
            "last_started": status.get("last_started_collective"),
            "last_completed": status.get("last_completed_collective"),
            "last_op": last["profiling_name"] if last else None,
            "last_done": _done(last, status or None) if last else None,
            "call_site": call_site(last["frames"]) if last else None,
        }
    return out


def _conclude(job: _Job, result: FrAnalysis) -> None:
    primary = result.primary
    if primary is not None:
        result.findings.append(primary.line)
        result.culprits = list(primary.culprits)
        result.culprit_state = _STATE.get(primary.kind)
        never = [r for r in primary.culprits if not job.dumps[r]["entries"]]
        if never and primary.kind == "missing":
            result.culprit_state = "never-joined"
        if primary.kind == "not-completed" and result.no_dump:
            result.culprits, result.culprit_state = list(result.no_dump), "no-dump"
        result.cause = DEFAULT_CAUSE
        backend = next((s.get("op") or "" for s in primary.sides.values() if s.get("op")), "").split(":")[0]
        if result.culprit_state == "never-joined" and backend.startswith("nccl"):
            result.cause = "nccl-init"  # NCCL builds its communicator at the first collective
    for other in result.problems[1:]:
        result.findings.append(other.line)
    for name, ranks in result.behind.items():
        group = job.groups[name]
        lasts = [job.last_enqueued(r, group) for r in ranks]
        top = max(n for r in group.members & set(job.ranks) if (n := job.last_enqueued(r, group)) is not None)
        seqs = ", ".join(f"#{n}" for n in lasts)
        result.findings.append(
            f"{_ranks_text(ranks)} behind on {_pg_label(name, group.desc)}: last enqueued {seqs}, the others #{top}"
        )
    for rank in result.no_dump:
        result.findings.append(f"no dump from rank {rank}: its side is unknown")
    result.findings += _pending_p2p(job)
    if primary is None and job.ranks:
        result.findings.append(f"every collective in the dumps of {_ranks_text(job.ranks)} matches and completed")
