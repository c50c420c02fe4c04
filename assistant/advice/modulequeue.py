"""A multiprocessing queue the job's file makes at import, read by its main process while no other
process holds the queue's pipe (read from the source, never run). Python docs, multiprocessing,
"Programming guidelines": with the spawn and forkserver start methods a child imports the main module
afresh ("Safe importing of main module"), so a queue made at module level is another queue in each
child; "Explicitly pass resources to child processes" as arguments instead."""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, Optional

from debug_stuck.live.selflock import call_name, parse_source, source_of

QUEUE_GET = re.compile(r"(^|/)multiprocessing/queues\.py$")
STARTS_FRESH = re.compile(r"""(get_context|set_start_method)\(\s*["'](spawn|forkserver)["']""")


def module_queue(values: Dict[str, str], reader, end: dict) -> None:
    """`module_queue` (the name) and `module_queue_at` (file:line of its module-level creation) when
    the chain ends at a queue's get on a pipe no other process or thread holds (`pipe:no-thread`), and
    the line that gets names a queue the file assigns at module level from a `...Queue()` call, in a
    file that starts its processes with spawn or forkserver."""
    waits_on = end.get("waits_on") or {}
    if waits_on.get("kind") != "pipe" or waits_on.get("end") != "no-thread":
        return
    if not any(
        QUEUE_GET.search(f.get("file") or "") and f.get("function", "").endswith("get")
        for f in reader.python_frames(end)
    ):
        return
    own = reader.own_frame(end)
    path = (own or {}).get("path") or (own or {}).get("file")
    text = source_of(path, end.get("pid"))
    tree = parse_source(text)
    if tree is None or not STARTS_FRESH.search(text or ""):
        return
    name = _queue_got_at(tree, own.get("line"))
    made = _made_at_import(tree, name) if name else None
    if made is not None:
        values["module_queue"] = name
        values["module_queue_at"] = f"{os.path.basename(path)}:{made}"


def _queue_got_at(tree: ast.AST, line) -> Optional[str]:
    """The name whose `.get(...)` the line calls (`results.get()`), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node, "lineno", None) == line:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name):
                return func.value.id
    return None


def _made_at_import(tree: ast.AST, name: str) -> Optional[int]:
    """The line of a module-level `name = ....Queue(...)` (or SimpleQueue, JoinableQueue)."""
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            called = call_name(stmt.value) or ""
            if called.endswith("Queue") and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return stmt.lineno
    return None
