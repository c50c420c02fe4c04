"""Every rank in the same collective call, and still waiting: none of them is missing, so what differs
is what they passed. torch.distributed's collectives complete when every rank of the group calls
them with matching arguments (torch docs, torch.distributed: "src (int): Source rank", the same on
every rank; tensors of matching sizes): a broadcast whose ranks pass different src values (the usual
slip is src=local_rank or src=rank) leaves each rank waiting for a root that sends in another call."""

from __future__ import annotations

from typing import Dict, List


def same_call(values: Dict[str, str], report, reader, end: dict) -> None:
    """Set `same_call` (the call and the ranks in it) when the job's every rank waits in one stack
    group whose wait is a collective, with the world size seen whole."""
    groups: List[dict] = getattr(report, "stack_groups", None) or []
    ranks = [p for p in getattr(report, "processes", None) or [] if p.get("role") == "rank"]
    if len(groups) != 1 or len(ranks) < 2 or groups[0].get("count") != len(ranks):
        return
    sizes = {p.get("world_size") for p in ranks}
    if sizes != {len(ranks)}:
        return  # ranks of other nodes, or an unknown world: one could be missing
    entry = reader.library_wait(end)
    if not entry or entry.get("wait") != "collective":
        return
    call = str(groups[0].get("top") or "").split(" (", 1)[0] or "collective"
    values["same_call"] = call
    values["same_call_ranks"] = ", ".join(str(p.get("rank")) for p in sorted(ranks, key=lambda p: p.get("rank") or 0))
