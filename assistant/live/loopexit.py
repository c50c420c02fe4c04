"""Which side of a collective mismatch has left the loop the other sides still run.

Ranks that decide on their own to stop a training loop (a local early-stopping rule, a data
iterator that runs out on one rank) leave it while the others go on to the next step's collective:
each side then waits in a different collective for ever (torch docs, torch.distributed: every
collective must be called by all processes of the group). Read from the source of the job's own
frame on each side: one side's line is past the end of a loop that holds every other side's line,
in the same function.
"""

from __future__ import annotations

from typing import List, Optional

from debug_stuck.live.loops import loops_around, own_frame_index
from debug_stuck.live.parties import JobView
from debug_stuck.live.selflock import frame_source, parse_source


def _own_frame(job: JobView, pid: int):
    threads = job.threads(pid)
    main = next((t for t in threads if t.tid == pid), threads[0] if threads else None)
    index = own_frame_index(main.frames) if main is not None else None
    return main.frames[index] if index is not None else None


def left_loop_side(job: JobView, side_pids: List[int]) -> Optional[tuple]:
    """(the index of the side that left the loop, the loop's first line, its own line, the others'
    lines) or None."""
    frames = [_own_frame(job, pid) for pid in side_pids]
    if any(f is None for f in frames) or len({(f.file, f.bare_name) for f in frames}) != 1:
        return None
    tree = parse_source(frame_source(frames[0], side_pids[0]))
    if tree is None:
        return None
    found = []
    for index, frame in enumerate(frames):
        others = [f.line for i, f in enumerate(frames) if i != index]
        for loop in loops_around(tree, others[0]):
            end = loop.end_lineno or loop.lineno
            if all(loop.lineno <= line <= end for line in others) and (frame.line or 0) > end:
                found.append((index, loop.lineno, frame.line, others))
                break
    return found[0] if len(found) == 1 else None
