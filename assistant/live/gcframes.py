"""Frames that show CPython's garbage collector at work: its native functions (gcmodule.c, gc.c in
3.13+, the free-threaded build's gc_free_threading.c), or the `collect (gc)` frame put on a sample at
a line of the job's own code that calls gc.collect() (live.collect._gc_calls)."""

from __future__ import annotations

import re

GC_FRAME = re.compile(
    r"^(gc_collect\w*|collect(_with_callback|_generations)?|_PyGC_\w+|gc\.collect"
    r"|subtract_refs|move_unreachable|visit_reachable)$"
)
GC_FILE = re.compile(r"gcmodule\.c|gc_free_threading\.c|(^|/)gc\.c$")


def frames_in_gc(frames) -> bool:
    """True when these frames show the garbage collector at work."""
    for frame in frames:
        if GC_FRAME.match(frame.bare_name) or (frame.native and GC_FILE.search(frame.file or "")):
            return True
        if not frame.native and frame.bare_name == "collect" and "gc" in (frame.file or ""):
            return True
    return False
