"""Name the rank that holds the others up.

Ranks are grouped by their main-thread stack. The group(s) whose stacks match the collective
playbook's stack signals are waiting for a peer; a rank outside them is the culprit, and its
own stack says what it is doing instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from debug_stuck.core.knowledge import Knowledge
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
    return None


def waits_in_collective(knowledge: Knowledge, group: StackGroup) -> Optional[str]:
    """The frame in which the group waits for its peers in a collective, or None."""
    return _waits_in_collective(knowledge, group)


COLLECTIVE_FILE = re.compile(r"torch/distributed/distributed_c10d\.py|torch/distributed/\w+\.py")


def collective_name(group: StackGroup) -> Optional[str]:
    """The torch.distributed call a group waits in ("all_reduce", "barrier"...), from its frames."""
    for frame in group.frames:
        name, _, where = frame.partition(" (")
        if COLLECTIVE_FILE.search(where) and not name.startswith("_"):
            return name.rsplit(".", 1)[-1]
    return None


@dataclass
class Mismatch:
    """Ranks waiting in different collectives: each side waits for the other for ever."""

    sides: List[Tuple[str, StackGroup]]  # (collective, group)

    def describe(self) -> str:
        return "; ".join(f"{describe_ranks(g)} in {name}" for name, g in self.sides)

    def to_dict(self) -> dict:
        return {"sides": [{"collective": name, "ranks": g.ranks, "pids": g.pids} for name, g in self.sides]}


def find_mismatch(knowledge: Knowledge, groups: List[StackGroup]) -> Optional[Mismatch]:
    """Every rank waits in a collective, but not in the same one."""
    waiting = [g for g in groups if _waits_in_collective(knowledge, g)]
    if len(waiting) < 2 or len(waiting) != len(groups):
        return None
    sides = [(collective_name(g) or "a collective", g) for g in waiting]
    if len({name for name, _ in sides}) < 2:
        return None
    return Mismatch(sides)


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
