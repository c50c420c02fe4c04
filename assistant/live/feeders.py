"""A thread of the job's own code that sleeps, and whose code hands items over, may be what a queue's
get waits for: a producer that paces itself (a rate limit, a polling interval) hands over its next item
when it wakes. Read from the job's source (as the job sees it), never run."""

from __future__ import annotations

import ast
from typing import Optional

from debug_stuck.live.loops import is_library, job_roots
from debug_stuck.live.parties import python_frames
from debug_stuck.live.selflock import enclosing_function, parse_source, source_of

# The calls by which one thread hands another what it waits for on a threading or queue primitive
# (CPython 3.11.7 Lib/queue.py Queue.put and put_nowait notify `not_empty`; Lib/threading.py
# Event.set, Condition.notify and notify_all, Semaphore.release).
HANDOVER_CALLS = frozenset({"put", "put_nowait", "set", "notify", "notify_all", "release"})


def hands_over(pid: int, frames) -> Optional[str]:
    """The first frame of the job's own code on this stack whose function calls put(), set() or
    notify() on something ("prefetcher (train.py:34)"), or None."""
    roots = job_roots([frames])
    sources: dict = {}
    for frame in python_frames(frames):
        if is_library(frame, roots) or not frame.line:
            continue
        path = frame.path or frame.file
        if path not in sources:
            sources[path] = parse_source(source_of(path, pid))
        tree = sources[path]
        scope = enclosing_function(tree, frame.line) if tree is not None else None
        if scope is not None and any(_hands_over(node) for node in ast.walk(scope)):
            return frame.text()
    return None


def _hands_over(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HANDOVER_CALLS
