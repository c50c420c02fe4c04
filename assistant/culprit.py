"""Name the rank that holds the others up.

Ranks are grouped by their main-thread stack. The group(s) whose stacks match the collective
playbook's stack signals are waiting for a peer; a rank outside them is the culprit, and its
own stack says what it is doing instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from assistant.kb import Knowledge
from assistant.observe import StackGroup, describe_ranks

WAITING_CAUSE = "collective"
MIN_WAIT_WEIGHT = 0.4


@dataclass
class Culprit:
    pid: int
    rank: Optional[int]
    reason: str
    group: StackGroup
    waiting: List[StackGroup]

    def to_dict(self) -> dict:
        return {"pid": self.pid, "rank": self.rank, "reason": self.reason}


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
