"""A new_group that every rank waits in, after an earlier new_group the job's code runs on some ranks
only (read from the source, never run). torch docs, torch.distributed.new_group: "This function
requires that all processes in the main group (i.e. all processes that are part of the distributed
job) enter this function, even if they are not going to be members of the group"; the groups are
named by how many each rank has created, so after one made by some ranks only, every later group has
another name on the others, and they wait for each other in the store for ever."""

from __future__ import annotations

import ast
import os
from typing import Dict, Optional

GROUP_CALLS = ("new_group", "new_subgroups", "new_subgroups_by_enumeration")


def conditional_new_group(values: Dict[str, str], report, reader) -> None:
    """`subgroup_at` ("train.py:11, inside `if rank in (0, 1):`") and `subgroup_wait` (where the ranks
    wait) when every rank of the job waits in new_group at one line of its code, and an earlier
    new_group call of that file sits under an `if`."""
    ranks = [p for p in getattr(report, "processes", None) or [] if p.get("role") == "rank"]
    sites = set()
    for proc in ranks:
        thread = next((t for t in proc.get("threads") or [] if t.get("tid") == proc.get("pid")), None)
        frames = [f for f in (thread or {}).get("frames") or [] if not f.get("native")]
        if not any(f.get("function", "").rsplit(".", 1)[-1] in GROUP_CALLS for f in frames):
            return
        own = next((f for f in frames if reader.is_own(f)), None)
        if own is None or not isinstance(own.get("line"), int):
            return
        sites.add((own.get("path") or own.get("file"), own["line"], proc.get("pid")))
    if len(ranks) < 2 or len({(path, line) for path, line, _ in sites}) != 1:
        return
    path, line, pid = next(iter(sites))
    from debug_stuck.live.selflock import parse_source, source_of

    found = _guarded_call_before(parse_source(source_of(path, pid)), line)
    if found is not None:
        name = os.path.basename(path)
        values["subgroup_at"] = f"{name}:{found[0]}, inside `{found[1]}`"
        values["subgroup_wait"] = f"{name}:{line}"


def _guarded_call_before(tree: Optional[ast.AST], line: int):
    """(line, the `if` test as written) of the last group-creating call before `line` under an if."""
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        # an `if` around the earlier call, not around the line every rank waits at
        if not isinstance(node, ast.If) or node.lineno >= line or (node.end_lineno or node.lineno) >= line:
            continue
        for call in ast.walk(node):
            func = getattr(call, "func", None)
            name = getattr(func, "attr", None) or getattr(func, "id", None)
            if isinstance(call, ast.Call) and name in GROUP_CALLS and call.lineno < line:
                # the last such call, under the innermost `if` around it
                if found is None or (call.lineno, node.lineno) > found[2:]:
                    found = (call.lineno, f"if {ast.unparse(node.test)}:", call.lineno, node.lineno)
    return found[:2] if found else None
