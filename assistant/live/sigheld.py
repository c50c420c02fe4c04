"""A child the job waits for to end, with the signal sent to stop it pending and blocked.

`server.terminate(); server.wait()` sends SIGTERM and waits. When the child blocks SIGTERM the signal
stays pending (/proc/PID/status SigPnd/ShdPnd and SigBlk, proc(5)) and is never delivered, so the
child runs on and the wait never returns. The mask is most often its parent's: signal(7), "A child
created via fork(2) inherits a copy of its parent's signal mask; the signal mask is preserved across
execve(2)" (a trainer that calls pthread_sigmask(SIG_BLOCK, {SIGTERM}) to protect its setup passes it
to every helper it starts). Read from /proc and the job's source, nothing is run.
"""

from __future__ import annotations

import ast
from typing import Optional

from debug_stuck.live.endless import parent_waits_for_end
from debug_stuck.live.selflock import named_calls
from debug_stuck.live.syncwaits import own_source

# the signals that ask a process to end (signal(7): default action Term or Core)
STOPPING = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def _sigmask_call(tree: ast.AST) -> Optional[int]:
    """The line of the one pthread_sigmask(SIG_BLOCK or SIG_SETMASK, ...) call of the file, else None."""
    lines = [
        call.lineno
        for call in named_calls(tree, ("pthread_sigmask",))
        if call.args
        and getattr(call.args[0], "attr", getattr(call.args[0], "id", None)) in ("SIG_BLOCK", "SIG_SETMASK")
    ]
    return lines[0] if len(lines) == 1 else None


def _blocked_at(job, pid: int) -> Optional[str]:
    """file:line of the pthread_sigmask call in the file of pid's own code (its thread that waits)."""
    for thread in job.threads(pid):
        frame, tree = own_source(thread.frames, pid)
        line = _sigmask_call(tree) if tree is not None else None
        if line is not None:
            return f"{frame.file}:{line}"
    return None


def ignores_its_stop(job, hop) -> bool:
    """Mark hop (end `signal-blocked`, `kind` process) when its process is a child the parent waits for
    to end and a stopping signal is pending while blocked in it: `held_signals` names them; `mask_from` the
    parent when it blocks them too (the child inherited its mask), `mask_at` the job's
    pthread_sigmask line."""
    info = job.procs.get(hop.pid)
    held = [name for name in getattr(info, "signals_held", None) or () if name in STOPPING]
    if not held or info.ppid not in job.procs or not parent_waits_for_end(job, info.ppid, hop.pid):
        return False
    parent = job.procs[info.ppid]
    inherited = all(name in (parent.signals_blocked or ()) for name in held)
    names = " and ".join(held)
    hop.kind, hop.object = "process", str(hop.pid)
    hop.facts.pop("fd", None)  # what its own thread waits on (a socket, say) is not what holds the job
    hop.facts.update(end="signal-blocked", held_signals=names, state=info.state)
    hop.evidence.append(f"/proc/{hop.pid}/status: {names} pending and blocked (SigPnd/ShdPnd, SigBlk)")
    hop.detail = f"has {names} blocked: the {names} sent to stop it is pending and never delivered"
    if inherited:
        hop.facts["mask_from"] = str(info.ppid)
        hop.detail += f" (its parent pid {info.ppid} blocks {names} too: a child inherits the signal mask)"
    site = _blocked_at(job, info.ppid) if inherited else None
    if site is not None:
        hop.facts["mask_at"] = site
    return True
