"""A file one process polls for that the process waiting for it creates only further down its own
code (read from the source, never run): DataLoader workers whose worker_init_fn polls for a marker
the main process writes after the first batch, a rank that polls for a file rank 0 writes after the
barrier it waits in. Each waits for the other: the creation comes after the wait."""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, List, Optional

from debug_stuck.live.loops import enclosing_function
from debug_stuck.live.selflock import call_name, parse_source, scope_nodes, source_of

# the poll loop's condition as the chain quotes it: `while not os.path.exists(READY)`, `while not
# marker.exists()`
POLLED = re.compile(
    r"`while not (?:os\.path\.(?:exists|isfile|isdir)\((?P<arg>[\w.]+)\)|(?P<obj>[\w.]+)\.(?:exists|is_file)\(\))`"
)
WRITE_MODES = re.compile(r"[wax]")
CREATES = ("touch", "write_text", "write_bytes", "mkdir")
PUBLISHES = ("rename", "replace", "move", "copy", "copyfile", "copy2", "symlink", "link")


def made_after_wait(values: Dict[str, str], reader, chain: List[dict]) -> None:
    """`marker`, `made_at` and `waited_at` when the chain ends at a loop polling for a file and the
    first process of the chain creates that file below the line where it waits."""
    if len(chain) < 2:
        return
    found = POLLED.search((chain[-1].get("waits_on") or {}).get("detail") or "")
    if found is None:
        return
    marker = found.group("arg") or found.group("obj")
    first = chain[0]
    own = reader.own_frame(first)
    path = (own or {}).get("path") or (own or {}).get("file")
    line = (own or {}).get("line")
    tree = parse_source(source_of(path, first.get("pid")))
    if tree is None or not isinstance(line, int):
        return
    made = _created_below(tree, marker, line)
    if made is not None:
        name = os.path.basename(path)
        values.update(marker=marker, made_at=f"{name}:{made}", waited_at=f"{name}:{line}")


def _created_below(tree: ast.AST, marker: str, line: int) -> Optional[int]:
    """The first line below `line`, in the code around it, that creates or publishes `marker`."""
    scope = enclosing_function(tree, line) or tree
    lines = sorted(node.lineno for node in scope_nodes(scope) if isinstance(node, ast.Call) and _creates(node, marker))
    return next((n for n in lines if n > line), None)


def _creates(call: ast.Call, marker: str) -> bool:
    func, name = call.func, call_name(call)
    args = [ast.unparse(a) for a in call.args]
    if name == "open" and args[:1] == [marker]:
        mode = args[1] if len(args) > 1 else next((ast.unparse(k.value) for k in call.keywords if k.arg == "mode"), "")
        return bool(WRITE_MODES.search(mode))
    if name in CREATES and isinstance(func, ast.Attribute):
        return marker in ast.unparse(func.value)
    if name in PUBLISHES or name in ("makedirs", "mknod"):
        return marker in args[-1:] or (name in ("makedirs", "mknod") and args[:1] == [marker])
    return False
