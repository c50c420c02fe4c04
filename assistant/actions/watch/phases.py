"""A stalled stack in one line, for the `stall` event (the cause it points at comes from the
pipeline: debug_stuck.pipeline.quick_cause)."""

from __future__ import annotations


def describe_stack(thread, depth: int = 3) -> str:
    frames = [f for f in thread.frames if not f.native][:depth] or thread.frames[:depth]
    return " <- ".join(f.text() for f in frames) or "(no frames)"
