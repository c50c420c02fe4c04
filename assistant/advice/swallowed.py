"""A collective inside a `try` whose `except` goes on: the rank that meets an error there (a bad
sample, an out-of-memory) skips that step's collectives alone, and from then on the ranks call
different collectives (torch docs: every process of the group must call each collective)."""

from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional, Tuple

LOOPS = (ast.For, ast.AsyncFor, ast.While)


def swallowing_try(tree: Optional[ast.AST], line: int) -> Optional[Tuple[int, int]]:
    """(the try's line, its except's line) for the innermost try, inside a loop, whose body holds
    `line` and one of whose handlers never raises: the loop goes on past the error."""
    if tree is None:
        return None
    found: Optional[Tuple[int, int]] = None

    def visit(node: ast.AST, in_loop: bool) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                visit(child, False)
                continue
            if isinstance(child, ast.Try) and in_loop and _holds(child.body, line):
                handler = next((h for h in child.handlers if not _raises(h)), None)
                if handler is not None:
                    found = (child.lineno, handler.lineno)  # deeper ones, visited later, are innermost
            visit(child, in_loop or isinstance(child, LOOPS))

    visit(tree, False)
    return found


def _holds(body: List[ast.stmt], line: int) -> bool:
    return any(stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno) for stmt in body)


def _raises(handler: ast.ExceptHandler) -> bool:
    return any(isinstance(node, ast.Raise) for node in ast.walk(handler))


def skipped_step(finding: dict, reader) -> str:
    """The sentence for the first frame of the job's own code, on a mismatch side's threads, that
    sits in such a try (`reader`: advice.remedy's, which knows the job's processes and own code)."""
    from debug_stuck.live.selflock import parse_source, source_of

    sites = [
        (side.get("who"), frame.get("path") or frame.get("file"), frame["line"], pid)
        for side in finding.get("sides") or []
        for pid in side.get("pids") or []
        for thread in (reader.processes.get(pid) or {}).get("threads") or []
        for frame in thread.get("frames") or []
        if not frame.get("native") and reader.is_own(frame) and isinstance(frame.get("line"), int)
    ]
    trees: Dict[str, Optional[ast.AST]] = {}  # each file read and parsed once, whatever its frames
    for who, path, line, pid in sites:
        if path not in trees:
            trees[path] = parse_source(source_of(path, pid))
        found = swallowing_try(trees[path], line)
        if found is None:
            continue
        name = os.path.basename(path)
        return (
            f"{who} is at {name}:{line}, inside the try at {name}:{found[0]} whose except at line {found[1]} "
            "goes on without raising: a rank that meets an error there (a bad sample, an out-of-memory) "
            "skips that step's collectives alone while the others run them, and from then on the ranks "
            "call different collectives. Let the error stop every rank, or decide the skip on all ranks "
            "together (below)."
        )
    return ""
