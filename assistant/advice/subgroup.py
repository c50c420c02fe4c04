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

from debug_stuck.live.selflock import named_calls, parse_source, source_of

GROUP_CALLS = ("new_group", "new_subgroups", "new_subgroups_by_enumeration")


def conditional_new_group(values: Dict[str, str], report, reader) -> None:
    """`subgroup_at` ("train.py:11, inside `if rank in (0, 1):`") and `subgroup_wait` (who waits where)
    when ranks of the job wait in new_group at one line of its code and an earlier new_group call of
    that file sits under an `if`. Either every rank waits there, or some do while the others have
    gone on past it (their own new_group there met a group of the same name: which end a run reaches
    is a race); then the `if` must test the rank, as a config flag holds on every rank alike."""
    ranks = [p for p in getattr(report, "processes", None) or [] if p.get("role") == "rank"]
    waiting, others = [], []
    for proc in ranks:
        thread = next((t for t in proc.get("threads") or [] if t.get("tid") == proc.get("pid")), None)
        frames = [f for f in (thread or {}).get("frames") or [] if not f.get("native")]
        own = next((f for f in frames if reader.is_own(f)), None)
        if own is None or not isinstance(own.get("line"), int):
            return
        site = (own.get("path") or own.get("file"), own["line"], proc)
        in_group = any(f.get("function", "").rsplit(".", 1)[-1] in GROUP_CALLS for f in frames)
        (waiting if in_group else others).append(site)
    if len(ranks) < 2 or not waiting or len({(path, line) for path, line, _ in waiting}) != 1:
        return
    path, line, proc = waiting[0]
    if any(other_path != path for other_path, _, _ in others):
        return
    tree = parse_source(source_of(path, proc.get("pid")))
    name = os.path.basename(path)
    ahead = ", ".join(sorted({f"{name}:{other_line}" for _, other_line, _ in others}))
    skipped = _rank_guard(tree, line) if others else None
    if skipped is not None:  # the call they wait in is one the other ranks do not make
        values["subgroup_at"] = f"{name}:{line}, inside `{skipped}`"
        values["subgroup_wait"] = (
            f"{_who(p for _, _, p in waiting)} waits in new_group at {name}:{line}, inside `{skipped}`, "
            f"while {_who(p for _, _, p in others)} skipped it (at {ahead})"
        )
        return
    found = _guarded_call_before(tree, line)
    if found is None or (others and not _names_rank(found[1])):
        return
    values["subgroup_at"] = f"{name}:{found[0]}, inside `{found[1]}`"
    earlier = f"and the job's code calls new_group earlier at {values['subgroup_at']}"
    if not others:
        values["subgroup_wait"] = f"Every rank waits in new_group at {name}:{line}, {earlier}"
        return
    values["subgroup_wait"] = (
        f"{_who(p for _, _, p in waiting)} waits in new_group at {name}:{line}, while "
        f"{_who(p for _, _, p in others)} went on past it (at {ahead}), {earlier}"
    )


def _rank_guard(tree: Optional[ast.AST], line: int) -> Optional[str]:
    """The innermost `if` (as written) whose body holds `line` and whose test names the rank."""
    guard = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and node.body[0].lineno <= line <= (node.body[-1].end_lineno or line):
            if _names_rank(ast.unparse(node.test)) and (guard is None or node.lineno > guard[0]):
                guard = (node.lineno, f"if {ast.unparse(node.test)}:")
    return guard[1] if guard else None


def _who(procs) -> str:
    return ", ".join(
        f"rank {p['rank']} (pid {p.get('pid')})" if p.get("rank") is not None else f"pid {p.get('pid')}"
        for p in sorted(procs, key=lambda p: (p.get("rank") is None, p.get("rank") or 0, p.get("pid") or 0))
    )


def _names_rank(test: str) -> bool:
    """Whether an `if` as written tests the rank (`rank == 0`, `dist.get_rank() in (0, 1)`)."""
    return "rank" in test.lower()


def _guarded_call_before(tree: Optional[ast.AST], line: int):
    """(line, the `if` test as written) of the last group-creating call before `line` under an if."""
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        # an `if` around the earlier call, not around the line every rank waits at
        if not isinstance(node, ast.If) or node.lineno >= line or (node.end_lineno or node.lineno) >= line:
            continue
        for call in named_calls(node, GROUP_CALLS):
            if call.lineno < line:
                # the last such call, under the innermost `if` around it
                if found is None or (call.lineno, node.lineno) > found[2:]:
                    found = (call.lineno, f"if {ast.unparse(node.test)}:", call.lineno, node.lineno)
    return found[:2] if found else None
