"""A thread the job's code makes and never starts, read from the source of the file a waiting thread
runs (never run): `uploader = threading.Thread(target=loop.run_forever)` with no `uploader.start()`
anywhere in that file. A wait that no thread is left to end (`no-thread`) may be that thread's."""

from __future__ import annotations

import ast
import os
from typing import Dict, List, Tuple

from debug_stuck.live.selflock import call_name, named_calls, parse_source, source_of


def never_started(values: Dict[str, str], reader, end: dict) -> None:
    """`never_started` (the name) and `never_started_at` (file:line) when the chain ends with no thread
    left (`no-thread`) and the waiting thread's own file makes exactly one Thread it never starts."""
    if (end.get("waits_on") or {}).get("end") != "no-thread":
        return
    own = reader.own_frame(end)
    path = (own or {}).get("path") or (own or {}).get("file")
    tree = parse_source(source_of(path, end.get("pid")))
    if tree is None:
        return
    found = _unstarted(tree)
    if len(found) == 1:
        values["never_started"], line = found[0]
        values["never_started_at"] = f"{os.path.basename(path)}:{line}"


def _unstarted(tree: ast.AST) -> List[Tuple[str, int]]:
    """(name, line) of each `name = ...Thread(...)` whose `name.start()` the file never calls."""
    made = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
            target = node.targets[0]
            if call_name(node.value) == "Thread" and isinstance(target, (ast.Name, ast.Attribute)):
                made.append((ast.unparse(target), node.lineno))
    started = {
        ast.unparse(call.func.value) for call in named_calls(tree, ("start",)) if isinstance(call.func, ast.Attribute)
    }
    return [(name, line) for name, line in made if name not in started]
