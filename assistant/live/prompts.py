"""A wait for a line on standard input that is a debugger's prompt: said as the debugger, where it stopped."""

from __future__ import annotations

import re

from debug_stuck.live.jobfacts import frames_prove
from debug_stuck.live.parties import python_frames

DEBUGGER_FILES = re.compile(r"(^|/)(pdb|bdb|cmd)\.py$")


def stopped_in_debugger(hop, frames) -> None:
    """A prompt that is pdb's (frames.yaml facts: [debugger]) is said as the debugger, at the job's own
    line where it stopped (the line after its breakpoint()), not as the pipe or terminal it reads.
    `hop`: a live.chain.Hop, its detail rewritten."""
    if not frames_prove(frames, "debugger"):
        return
    site = next((f for f in python_frames(frames) if not DEBUGGER_FILES.search(f.file or "")), None)
    at = f" at {site.text()}" if site is not None else ""
    how = hop.detail.removeprefix("is blocked in ")
    hop.detail = f"is stopped in the debugger (pdb){at}, waiting for a command on its standard input ({how})"
