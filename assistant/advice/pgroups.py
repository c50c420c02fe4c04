"""The process groups of a collective that every rank waits in from a different line, as the job's
source writes them (read, never run): rank 0 in `dist.all_reduce(g, group=grad_pg)` and rank 1 in
`dist.all_reduce(m, group=metrics_pg)` wait for ever: each process group pairs its own collectives
in the order its ranks call them, and each rank waits in the group whose other member waits in the
other one (torch 2.13.0 distributed_c10d.py, new_group's docstring: "When using multiple process
groups ... the user must ensure a globally consistent execution order of collectives across
ranks")."""

from __future__ import annotations

import ast
from typing import Optional

from debug_stuck.advice.p2ptags import side_call

# Where `group` sits among the positional parameters (torch 2.13.0 distributed_c10d.py signatures).
GROUP_POSITION = {
    "all_reduce": 2,
    "broadcast": 2,
    "all_gather": 2,
    "all_gather_into_tensor": 2,
    "all_gather_object": 2,
    "broadcast_object_list": 2,
    "all_to_all": 2,
    "reduce": 3,
    "gather": 3,
    "scatter": 3,
    "reduce_scatter": 3,
    "reduce_scatter_tensor": 3,
    "gather_object": 3,
    "scatter_object_list": 3,
    "all_to_all_single": 4,
    "barrier": 0,
    "monitored_barrier": 0,
}
DEFAULT_GROUP = "the default group"  # group=None: the world (torch docs, "If None, the default process group")


def group_argument(call: ast.Call, name: str) -> Optional[str]:
    """The `group` a collective call passes, as written; DEFAULT_GROUP when it passes none; None when
    it cannot be told (a collective this table does not know, or *args)."""
    for keyword in call.keywords:
        if keyword.arg == "group":
            return ast.unparse(keyword.value)
        if keyword.arg is None:
            return None  # **kwargs
    position = GROUP_POSITION.get(name)
    if position is None or any(isinstance(arg, ast.Starred) for arg in call.args):
        return None
    if len(call.args) > position:
        text = ast.unparse(call.args[position])
        return DEFAULT_GROUP if text == "None" else text
    return DEFAULT_GROUP


def group_order(finding: dict, reader) -> str:
    """A sentence naming each side's process group when the sides of a same-collective mismatch
    (finding ops "sites") pass groups that differ as written; empty otherwise."""
    sides = finding.get("sides") or []
    if finding.get("ops") != "sites" or len(sides) < 2:
        return ""
    parts, groups = [], set()
    for side in sides:
        name = side.get("collective") or ""
        found = side_call(side, reader, (name,))
        group = group_argument(found[0], name) if found else None
        if group is None:
            return ""
        groups.add(group)
        where = f"group={group}" if group != DEFAULT_GROUP else DEFAULT_GROUP
        parts.append(f"{side.get('who')} calls {name} on {where} ({found[1]}:{found[0].lineno})")
    return "; ".join(parts) if len(groups) == len(sides) else ""
