"""Name the rank that holds the others up.

Ranks are grouped by their main-thread stack. The group(s) whose stacks match the collective
playbook's stack signals are waiting for a peer; a rank outside them is the culprit, and its
own stack says what it is doing instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, List, Optional, Tuple

from debug_stuck.core.facts import parse_frame
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.libfacts import innermost_wait, match_frame
from debug_stuck.core.owncode import is_library_file
from debug_stuck.live.observe import StackGroup, describe_ranks

WAITING_CAUSE = "collective"
MIN_WAIT_WEIGHT = 0.4


@dataclass
class Culprit:
    pid: int
    rank: Optional[int]
    reason: str
    group: StackGroup
    waiting: List[StackGroup]

    @property
    def host(self) -> Optional[str]:
        """The node the culprit runs on; None on a single-node snapshot."""
        return self.group.hosts[0] if self.group.hosts else None

    def to_dict(self) -> dict:
        out = {"pid": self.pid, "rank": self.rank, "reason": self.reason}
        if self.host is not None:
            # every rank and node of the odd group: on many nodes one stuck group can span several
            out["host"] = self.host
            out["ranks"] = list(self.group.ranks)
            out["hosts"] = self.group.node_names()
        return out


def _waits_in_collective(knowledge: Knowledge, group: StackGroup) -> Optional[str]:
    book = knowledge.playbooks.get(WAITING_CAUSE)
    if book is None:
        return None
    for signal in book.signals:
        if signal.source != "stack" or signal.weight < MIN_WAIT_WEIGHT:
            continue
        for frame in group.frames:
            if signal.pattern.search(frame):
                return frame
    return _table_collective_frame(knowledge, group)


def _table_collective_frame(knowledge: Knowledge, group: StackGroup) -> Optional[str]:
    """The frame the group waits in when the frame table's innermost wait on its stack is a
    collective (jax's multihost_utils, Horovod, tf.distribute, Gloo's native waits...)."""
    found = _table_collective(knowledge, group)
    return group.frames[found[0]] if found else None


def _table_collective(knowledge: Knowledge, group: StackGroup):
    """(index, entry) of the group's innermost table wait when it is a collective, else None. A
    collective call every rank must make (an entry with its `call`, new_group) in a Python frame
    around a wait of another kind (the store and gloo's connection set-up inside new_group) is what
    that wait is for."""
    frames = [parse_frame(frame) for frame in group.frames]
    found = innermost_wait(knowledge.frames, frames)
    if found is None:
        return None
    collective = found[1].get("wait") == "collective"
    if collective and found[1].get("call"):
        return found
    for index in range(found[0] + 1, len(frames)):
        function, file = frames[index]
        # a collective wait without its call (gloo's buffer wait) takes it from any frame around it, an
        # irecv's RecvWork::wait; a wait of another kind only from a Python frame, new_group's
        entry = match_frame(knowledge.frames, function, file) if collective or (file or "").endswith(".py") else None
        if entry is not None and entry.get("wait") == "collective" and entry.get("call"):
            return index, entry
    return found if collective else None


def waits_in_collective(knowledge: Knowledge, group: StackGroup) -> Optional[str]:
    """The frame in which the group waits for its peers in a collective, or None."""
    return _waits_in_collective(knowledge, group)


COLLECTIVE_FILE = re.compile(r"torch/distributed/distributed_c10d\.py|torch/distributed/\w+\.py")


def collective_name(knowledge: Knowledge, group: StackGroup) -> Optional[str]:
    """The torch.distributed call a group waits in ("all_reduce", "barrier"...), from its frames;
    else the `call` the frame table gives the collective it waits in natively (DDP's gradient
    all-reduce inside backward has no torch.distributed frame)."""
    for frame in group.frames:
        name, _, where = frame.partition(" (")
        if COLLECTIVE_FILE.search(where) and not name.startswith("_"):
            return name.rsplit(".", 1)[-1]
    found = _table_collective(knowledge, group)
    return found[1].get("call") if found else None


@dataclass
class Mismatch:
    """Ranks waiting in different collectives: each side waits for the other for ever."""

    sides: List[Tuple[str, StackGroup]]  # (collective, group)
    odd: Optional[Culprit] = None  # the side the evidence singles out as the extra call, if any
    ops: str = "collective"  # or "p2p": every rank in a send or recv that no peer pairs

    def describe(self) -> str:
        if self.ops in ("p2p", "sites"):
            return "; ".join(f"{describe_ranks(g)} in {name} at {_job_site(g) or g.top}" for name, g in self.sides)
        return "; ".join(f"{describe_ranks(g)} in {name}" for name, g in self.sides)

    def why(self) -> str:
        """Why neither side can go on."""
        if self.ops == "sites":
            return (
                "a process group pairs its collectives in the order its ranks call them, so calls from "
                "different lines that never complete are in different process groups, or differ in size"
            )
        if self.ops != "p2p":
            return "each side waits for the other for ever"
        if all(name in P2P_RECV for name, _ in self.sides):
            return "every rank waits to receive and none sends, so no recv can complete"
        kinds = {"send" if name in P2P_SEND else "recv" if name in P2P_RECV else name for name, _ in self.sides}
        if kinds == {"send", "recv"}:
            return (
                "a send and a recv wait for each other yet do not meet: the send's dst, the recv's src or their "
                "tags differ (a recv takes only a send from its src with the same tag)"
            )
        return "no send meets its recv (a send returns only once its peer posts the matching recv)"

    def to_dict(self) -> dict:
        return {"sides": [{"collective": name, "ranks": g.ranks, "pids": g.pids} for name, g in self.sides]}

    def sides_dicts(self) -> List[dict]:
        """Each side: its collective, its ranks, and where the job calls it (the first frame outside
        torch.distributed), for the fix that names both call sites."""
        out = []
        for name, group in self.sides:
            side = {"collective": name, "who": describe_ranks(group), "pids": list(group.pids)}
            site = _job_site(group)
            if site:
                side["site"] = site
            out.append(side)
        return out


def find_mismatch(knowledge: Knowledge, groups: List[StackGroup], phase_at=None, left_loop=None) -> Optional[Mismatch]:
    """Every rank waits in a collective, but not in the same one. `phase_at(pid)` -> (phase, frame)
    or None tells a side inside a checkpoint save; `left_loop(pids)` -> (index, loop line, its line,
    the others' lines) or None, the side that has left the loop the others still run."""
    waiting = [g for g in groups if _waits_in_collective(knowledge, g)]
    if len(waiting) < 2 or len(waiting) != len(groups):
        return None
    sides = [(collective_name(knowledge, g) or "a collective", g) for g in waiting]
    if len({name for name, _ in sides}) < 2:
        return None
    if all(name in P2P_RECV + P2P_SEND for name, _ in sides):
        return None  # sends and recvs that do not pair: find_p2p_deadlock's, not calls of different collectives
    mismatch = Mismatch(sides)
    mismatch.odd = _odd_side(sides, phase_at, left_loop)
    return mismatch


# torch.distributed's blocking point-to-point calls (torch 2.13.0 distributed_c10d.py: send() and recv()
# wait on their Work; send_object_list and recv_object_list call them). Gloo's send waits for the
# peer's matching recv too (gloo/transport/tcp/pair.cc: a send is written once the peer says its recv
# is ready), so a rank in either waits for its peer.
P2P_RECV = ("recv", "irecv", "recv_object_list")
P2P_SEND = ("send", "isend", "send_object_list")


def find_p2p_deadlock(
    knowledge: Knowledge,
    groups: List[StackGroup],
    alone: Callable[[int, Optional[str]], Optional[StackGroup]],
    world_size: Optional[int] = None,
) -> Optional[Mismatch]:
    """Every rank of the job waits in a blocking send or recv: none can pair with another. Ranks in
    one call from different lines of the job share a group, so each is a side of its own (`alone`),
    with its own call site. Not when ranks are missing from the snapshot (another node's could send)."""
    if not groups or not all(_waits_in_collective(knowledge, g) for g in groups):
        return None
    names = {g.pids[0]: collective_name(knowledge, g) for g in groups}
    if not all(name in P2P_RECV + P2P_SEND for name in names.values()):
        return None
    pids = [
        (rank, pid, host) for g in groups for pid, rank, host in zip(g.pids, g.ranks, g.hosts or [None] * len(g.pids))
    ]
    if len(pids) < 2 or (world_size or 0) > len(pids):
        return None
    sides = []
    for _rank, pid, host in sorted(pids, key=lambda item: (item[0] is None, item[0] or 0, item[1])):
        group = alone(pid, host)
        if group is None or not _waits_in_collective(knowledge, group):
            return None
        sides.append((collective_name(knowledge, group) or "a point-to-point call", group))
    return Mismatch(sides, ops="p2p")


def find_site_mismatch(
    knowledge: Knowledge,
    groups: List[StackGroup],
    alone: Callable[[int, Optional[str]], Optional[StackGroup]],
    world_size: Optional[int] = None,
) -> Optional[Mismatch]:
    """Every rank of the job waits in the same collective, called from different lines of the job:
    rank 0 in `all_reduce(g, group=grad_pg)`, rank 1 in `all_reduce(m, group=metrics_pg)`. Within one
    process group such calls would pair and complete, so ranks that all wait in them are in different
    calls. One side per call site, each rank alone (ranks in one call from different lines share a
    stack group). Not when ranks are missing from the snapshot (another node's could complete them)."""
    if not groups or not all(_waits_in_collective(knowledge, g) for g in groups):
        return None
    names = {collective_name(knowledge, g) for g in groups}
    if len(names) != 1 or None in names or names & set(P2P_RECV + P2P_SEND):
        return None
    members = [
        (pid, rank, host) for g in groups for pid, rank, host in zip(g.pids, g.ranks, g.hosts or [None] * len(g.pids))
    ]
    if len(members) < 2 or (world_size or 0) > len(members):
        return None
    by_site: dict = {}
    for pid, rank, host in sorted(members, key=lambda m: (m[1] is None, m[1] or 0, m[0])):
        own = alone(pid, host)
        site = _job_site(own) if own is not None else None
        if site is None:
            return None
        side = by_site.setdefault(site, replace(own, pids=[], ranks=[], hosts=[]))
        side.pids.append(pid)
        side.ranks.append(rank)
        side.hosts.append(host)
    if len(by_site) < 2:
        return None
    name = names.pop()
    return Mismatch([(name, side) for side in by_site.values()], ops="sites")


def _odd_side(sides: List[Tuple[str, StackGroup]], phase_at, left_loop=None) -> Optional[Culprit]:
    """The side in the extra call, when the evidence singles one out: the only side of its size
    (the others agree), the only side whose collective the job's own code calls (frameworks call
    theirs on every rank; a rank-dependent branch or callback is the job's), or the only side
    inside a checkpoint save (saving on one rank is the usual rank-only path)."""
    sizes = sorted(len(g.pids) for _, g in sides)
    if len(sides) > 2 or sizes[0] < sizes[1]:
        smallest = [(n, g) for n, g in sides if len(g.pids) == sizes[0]]
        if len(smallest) == 1:
            name, group = smallest[0]
            return _odd(sides, group, f"the only {'rank' if len(group.pids) == 1 else 'ranks'} in {name}")
    callers = [(name, g, _caller(g)) for name, g in sides]
    own = [(n, g, c) for n, g, c in callers if c is not None and not is_library_file(_frame_file(c))]
    if len(own) == 1 and all(c is not None for _, _, c in callers):
        name, group, caller = own[0]
        why = f"its {name} is called from the job's own code at {caller}, the other side's from library code"
        return _odd(sides, group, why)
    saving = [(n, g, phase_at(g.pids[0])) for n, g in sides] if phase_at is not None else []
    saving = [(n, g, found[1]) for n, g, found in saving if found and found[0] == "checkpoint"]
    if len(saving) == 1:
        name, group, frame = saving[0]
        why = f"its {name} runs inside a checkpoint save ({frame}) that the other ranks never entered"
        return _odd(sides, group, why)
    left = left_loop([g.pids[0] for _, g in sides]) if left_loop is not None else None
    if left is not None:
        index, start, line, others = left
        name, group = sides[index]
        at = ", ".join(str(o) for o in others)
        rest = sum(len(g.pids) for i, (_, g) in enumerate(sides) if i != index)
        why = (
            f"it has left the loop that starts at line {start} (its {name} is at line {line}), which the "
            f"other {'ranks still run' if rest > 1 else 'rank still runs'} (line {at}): it stopped on its own"
        )
        return _odd(sides, group, why)
    return None


def _odd(sides, group: StackGroup, why: str) -> Culprit:
    others = [g for _, g in sides if g is not group]
    who = describe_ranks(group)
    if len(group.pids) == 1 and not who.startswith("pid"):
        who += f" (pid {group.pids[0]})"
    reason = f"{who} is the odd one out: {why}"
    return Culprit(group.pids[0], group.ranks[0], reason, group, others)


FRAME_TEXT = re.compile(r"\((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame_file(text: str) -> str:
    found = FRAME_TEXT.search(text)
    return found.group("file") if found else ""


def _caller(group: StackGroup) -> Optional[str]:
    """The first Python frame outside torch.distributed around the group's collective call."""
    return _callers(group)[0]


def _job_site(group: StackGroup) -> Optional[str]:
    """Where the job's own code calls the group's collective (the line to change, even when a wrapper
    such as accelerate's gather sits between), with the library frame that calls it ("via"): under
    a framework's loop the job's own line can be the same on both sides of a mismatch, and the
    library's call is what tells them apart. Else the direct caller."""
    first, own = _callers(group, for_site=True)
    if own and first and first != own:
        return f"{own} via {first}"
    return own or first


def _callers(group: StackGroup, for_site: bool = False) -> Tuple[Optional[str], Optional[str]]:
    """(the first Python frame outside torch.distributed, the first of the job's own code there).
    `for_site`: a collective with no torch.distributed frame (DDP's gradient all-reduce runs in
    native code under backward) is called from the stack's first Python frame on."""
    python = [t for t in group.frames if _frame_file(t).endswith(".py") or _frame_file(t).startswith("<frozen")]
    inside = for_site and not any(COLLECTIVE_FILE.search(_frame_file(t)) for t in python)
    first = callee = None
    for text in group.frames:
        file = _frame_file(text)
        if not (file.endswith(".py") or file.startswith("<frozen")):
            continue  # a native frame
        if COLLECTIVE_FILE.search(file):
            inside = True
            continue
        if not inside:
            continue
        first = first or text
        if not is_library_file(file):
            # for the job's site, the library call it made (just inside its own frame) says more
            # than the innermost one (accelerate's gather, not its _gpu_gather_one)
            return (callee or first) if for_site else first, text
        callee = text
    return first, None


def apart_from_waiters(
    knowledge: Knowledge,
    groups: List[StackGroup],
    alone: Callable[[int], Optional[StackGroup]],
    busy: Callable[[int], bool],
) -> List[StackGroup]:
    """Ranks that share a Python stack but not a wait: a rank busy on its CPU whose own frames (its
    native ones too) show no collective wait, grouped by its Python frames with ranks that wait in
    one, is a group of its own: a long backward pass on one rank while the others wait in DDP's
    gradient all-reduce at the end of the same backward (c10d::Reducer::finalize_backward) is the same
    Python call on every rank. A rank whose wait could not be read is not taken apart (busy only)."""
    out: List[StackGroup] = []
    for group in groups:
        own = [alone(pid) for pid in group.pids] if len(group.pids) > 1 else []
        if any(g is None for g in own):
            out.append(group)
            continue
        waiting = [g for g in own if _waits_in_collective(knowledge, g)]
        apart = [g for g in own if g not in waiting and busy(g.pids[0])]
        if not waiting or not apart:
            out.append(group)
            continue
        rest = [g for g in own if g not in apart]
        out.append(
            replace(
                rest[0],
                pids=[g.pids[0] for g in rest],
                ranks=[g.ranks[0] for g in rest],
                hosts=[h for g in rest for h in g.hosts],
                frames=waiting[0].frames,
            )
        )
        out.extend(replace(g, apart=True) for g in apart)
    return sorted(out, key=lambda g: (-len(g.pids), g.pids[0]))


def find_culprit(knowledge: Knowledge, groups: List[StackGroup]) -> Optional[Culprit]:
    if len(groups) < 2:
        return None
    waiting, odd = [], []
    for group in groups:
        (waiting if _waits_in_collective(knowledge, group) else odd).append(group)
    if not waiting or not odd:
        return None
    suspect = min(odd, key=lambda g: (len(g.pids), g.pids[0]))
    wait_frame = _waits_in_collective(knowledge, waiting[0])
    waiters = " and ".join(describe_ranks(g) for g in waiting)
    verb = "waits" if len(waiting) == 1 and len(waiting[0].pids) == 1 else "wait"
    reason = f"{waiters} {verb} in {wait_frame}; {describe_ranks(suspect)} is elsewhere: {suspect.top}"
    return Culprit(suspect.pids[0], suspect.ranks[0], reason, suspect, waiting)


def stuck_rank(knowledge: Knowledge, groups: List[StackGroup], pid: int, why: str) -> Optional[Culprit]:
    """The rank the progress judgement found the job stuck on, when the stacks alone named none (a
    rank stopped inside the very collective the others wait in looks like them)."""
    own = next((g for g in groups if pid in g.pids), None)
    if own is None:
        return None
    i = own.pids.index(pid)
    alone = replace(own, pids=[pid], ranks=[own.ranks[i]], hosts=own.hosts[i : i + 1])
    rest = replace(
        own,
        pids=[p for j, p in enumerate(own.pids) if j != i],
        ranks=[r for j, r in enumerate(own.ranks) if j != i],
        hosts=[h for j, h in enumerate(own.hosts) if j != i],
    )
    waiting = [g for g in (rest if g is own else g for g in groups) if g.pids and _waits_in_collective(knowledge, g)]
    if not waiting:
        return None
    return Culprit(pid, own.ranks[i], why, alone, waiting)
