"""A loop waiting for a multiprocessing.Process to end, `while p.is_alive()`, in a process that has no
child left: something else reaped the child, so is_alive() stays True for ever.

CPython 3.11 Lib/multiprocessing/popen_fork.py, Popen.poll: `pid, sts = os.waitpid(self.pid, flag)`
in a `try` whose `except OSError: return None` keeps the exit code unknown once another waitpid took
the child's status (ECHILD); Process.is_alive() is then True and join() returns at once with exitcode
None. The usual thief is a SIGCHLD handler that reaps with os.waitpid(-1, WNOHANG) (or os.wait()),
meant for fire-and-forget helpers. Read from the source and the process tree, nothing is run.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from debug_stuck.live.selflock import call_name, named_calls
from debug_stuck.live.syncwaits import own_source

IS_ALIVE = re.compile(r"\b([A-Za-z_][\w.]*)\.is_alive\(\)")
REAPS_ANY = ("wait", "wait3")  # os.wait() and os.wait3() take any child; waitpid and wait4 only with -1


def _name(node) -> str:
    return getattr(node, "attr", None) or getattr(node, "id", None) or ""


def _is_process(tree: ast.AST, variable: str) -> bool:
    """The file assigns `variable` from a call to a class named ...Process (mp.Process, ctx.Process)."""
    short = variable.rsplit(".", 1)[-1]
    return any(
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and (call_name(node.value) or "").endswith("Process")
        and any(_name(target) == short for target in node.targets)
        for node in ast.walk(tree)
    )


def _reaps_any(function: ast.AST) -> bool:
    for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
        name = call_name(call)
        if name in REAPS_ANY:
            return True
        first = call.args[0] if call.args else None
        if name in ("waitpid", "wait4") and isinstance(first, ast.UnaryOp) and isinstance(first.op, ast.USub):
            return getattr(first.operand, "value", None) == 1  # waitpid(-1, ...): any child
    return False


def sigchld_reaper(tree: ast.AST) -> Optional[ast.FunctionDef]:
    """The function the file installs as its SIGCHLD handler when it reaps any child."""
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for call in named_calls(tree, ("signal",)):
        if len(call.args) == 2 and _name(call.args[0]) == "SIGCHLD":
            handler = functions.get(_name(call.args[1]))
            if handler is not None and _reaps_any(handler):
                return handler
    return None


def reaped_elsewhere(job, hop, wait: dict) -> bool:
    """Mark hop (end `child-reaped`, `polled` the call) when it loops on `p.is_alive()` for a Process
    the file makes, and its process has no child left but a library's helpers: the child has ended and
    another wait took its status. `reaper` names the file's SIGCHLD handler that reaps any child."""
    from debug_stuck.probes.collectors.procs import is_library_helper

    found = IS_ALIVE.search(str(wait.get("loop") or ""))
    thread = job.thread(hop.pid, hop.tid)
    if found is None or thread is None or "end" in hop.facts:
        return False
    if any(not is_library_helper(job.procs[c].cmdline) for c in job.children(hop.pid)):
        return False
    frame, tree = own_source(thread.frames, hop.pid)
    if tree is None or not _is_process(tree, found.group(1)):
        return False
    polled = found.group(0)
    hop.facts.update(end="child-reaped", polled=polled)
    hop.detail += f"; the process it polls has ended, yet {polled} stays True: another wait took its exit status"
    reaper = sigchld_reaper(tree)
    if reaper is not None:
        hop.facts["reaper"] = f"{reaper.name} ({frame.file.rsplit('/', 1)[-1]}:{reaper.lineno})"
        hop.detail += f" (the SIGCHLD handler {hop.facts['reaper']} reaps any child)"
    return True
