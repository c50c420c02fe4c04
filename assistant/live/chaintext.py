"""The chain as one sentence: the end of the wait first, then who waits for it."""

from __future__ import annotations

from typing import Optional

from debug_stuck.core.libfacts import DECORATOR_WRAPPERS, called_function, unwrap_call
from debug_stuck.live.chain import PLUMBING, PLUMBING_FILES, Chain
from debug_stuck.live.hop import Hop
from debug_stuck.live.loops import is_library, job_roots
from debug_stuck.live.parties import python_frames


def chain_sentence(chain: Chain) -> str:
    """The end of the wait first, then who waits for it: "rank 0 (pid 5452) is blocked in open() of
    ckpt.pt, a FIFO with no reader, inside save; rank 1 (pid 5453) waits for it in barrier"."""
    hops = chain.hops
    if not hops:
        return ""
    end = hops[-1]
    if end.kind == "cycle" and len(hops) > 2:
        links = "; ".join(f"{h.who} {h.detail}" for h in hops[:-1])
        return f"Deadlock: {links}; each waits for the other, nothing can move"
    text = f"{end.who}{_relation(hops[-2], end) if len(hops) > 1 else ''} {end.detail}"
    inside = _inside_text(end)
    if inside and end.kind not in ("lock-cycle", "process", "futex", "thread", "pool") and "(pdb)" not in end.detail:
        text += f", inside {inside}"
    if len(hops) > 1:
        first = hops[0]
        how = _waiting_in(first)
        verb = "wait" if first.group and ("," in first.group or " and " in first.group) else "waits"
        who = first.who
        if first.pid == end.pid and first.host == end.host:
            who = "its main thread" if first.tid == first.pid else f"its thread {first.thread!r}"
        gil = first.facts.get("gil") == "wait" and len(hops) == 2
        text += f"; {who} {verb} for {'the GIL' if gil else 'it'} in {how}"
        if len(hops) > 2:
            text += " (through " + ", ".join(h.who for h in hops[1:-1]) + ")"
    return text[:1].upper() + text[1:]


def _waiting_in(hop: Hop) -> str:
    """The function a waiting thread is in, above the threading and queue plumbing: "result",
    "all_reduce", "_try_get_data"."""
    py = python_frames(hop.frames)
    caller = next((f for f in py if not PLUMBING_FILES.search(f.file or "")), None)
    if caller is not None:
        return caller.bare_name
    return hop.inside[0] if hop.inside else hop.kind


def _relation(before: Hop, hop: Hop) -> str:
    """What the next hop is to the one before it: ", which holds the lock on X," and so on."""
    if before.kind == "lock":
        return f", which holds the lock on {before.object},"
    if before.kind in ("pipe", "fifo"):
        side = "writer" if before.op in ("read", "open") else "reader"
        return f", the {side} of that {before.kind},"
    if before.facts.get("dead_child"):  # parties.dead_child_of_poll: no connection to it
        return f", its child that was to {'send' if before.kind == 'signal' else 'make'} it,"
    if before.kind == "socket":
        return ", the other end of that connection,"
    if before.kind == "child":
        return f", the child of pid {before.pid},"
    if before.kind == "thread" and before.facts.get("gil") == "wait":
        return ", which holds the GIL (Python's global interpreter lock),"
    if before.kind == "thread" and before.facts.get("end") == "queue-flush":
        return ", its queue's feeder thread,"
    if before.kind == "thread" and before.detail.startswith("waits for thread"):
        return ", the thread it joins,"
    if before.kind == "thread" and before.facts.get("event_loop"):
        return ", the thread that runs that event loop,"
    if before.kind == "thread" and before.detail.startswith("waits for a result from a pool worker"):
        return ", the pool's worker thread,"
    return ""


def _inside_text(hop: Hop) -> Optional[str]:
    """What the thread was doing, in the job's own terms: the library call its code made (save,
    urlopen, all_reduce), else its own innermost function (__getitem__, fifo_read)."""
    py = python_frames(hop.frames)
    if hop.where and hop.kind in ("cpu", "sleep", "device"):
        named = next((i for i, f in enumerate(py) if f.text() == hop.where), 0)
        py = py[named + 1 :]  # the frame named already, and what it calls
    roots = job_roots([py])
    user = next((i for i, f in enumerate(py) if not is_library(f, roots)), None)
    if user is None:
        return None
    callee = unwrap_call([f.bare_name for f in py], user - 1) if user > 0 else -1
    if callee >= 0 and py[callee].bare_name not in PLUMBING and py[callee].bare_name not in DECORATOR_WRAPPERS:
        return called_function(py[callee].function)
    for frame in py[user:]:
        name = frame.bare_name
        private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
        if name not in PLUMBING and not private:
            return name
    return None
