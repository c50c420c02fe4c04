"""A single process whose main thread moves only within one function of its own code and the
standard library under it (live.progress._busy_poll): with a share of its CPU in system calls
and no byte read or written, a busy poll on a flag file, not progress; computing (no system calls) or
reading its data (bytes read), it moves forward."""

from __future__ import annotations

import pytest

from debug_stuck.live.collect import Snapshot
from debug_stuck.live.progress import judge_progress
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

SCRIPT = "/job/proj/train.py"
SHARDS = "/job/proj/datasets/shards.py"
POLL = [Frame("wait_for_shard", "datasets/shards.py", 6, path=SHARDS), Frame("<module>", "train.py", 15, path=SCRIPT)]
IN_STAT = [Frame("exists", "genericpath.py", 19), *POLL]  # a sample that fell inside os.path.exists
COUNTING = [Frame("wait_for_shard", "datasets/shards.py", 7, path=SHARDS), POLL[1]]


def snapshot(system_percent, read_bytes=0, faults=0) -> Snapshot:
    info = ProcInfo(pid=10, ppid=1, name="python", cmdline=["python", SCRIPT], role="rank")
    info.state, info.cpu_percent, info.cpu_system_percent = "R", 99.0, system_percent
    info.io_read_bytes, info.io_write_bytes, info.minor_faults = read_bytes, 0, faults
    dumps = [
        StackDump(pid=10, threads=[ThreadStack(10, "MainThread", "active", frames)], tool="py-spy", seconds=0.1)
        for frames in (POLL, IN_STAT, COUNTING)
    ]
    return Snapshot(host="h", taken_at=0.0, window=1.0, processes=[info], stacks={10: StackSeries(10, dumps)})


def test_samples_that_differ_only_inside_a_poll_of_its_own_are_a_busy_poll():
    progress = judge_progress(snapshot(21.0))
    assert progress.hung is True and progress.stuck_on == [10], progress
    assert progress.reasons == [
        "pid 10 (rank) polls in a loop of its own code at wait_for_shard (datasets/shards.py:7), flat out: a share "
        "of its CPU in system calls, not a byte read or written, for the whole window"
    ], progress


@pytest.mark.parametrize(
    "system_percent, read_bytes, faults",
    # computing; reading its data; filling memory (18% system time, all page faults: measured on a loop
    # that fills dicts of lists, 40,000 minor faults a second); not measured
    [(0.0, 0, 0), (21.0, 1 << 20, 0), (18.0, 0, 40_000), (None, 0, 0), (21.0, 0, None)],
)
def test_a_loop_that_computes_reads_fills_memory_or_was_not_measured_still_moves(system_percent, read_bytes, faults):
    progress = judge_progress(snapshot(system_percent, read_bytes, faults))
    assert progress.hung is False and "main thread moved between samples" in progress.reasons[0], progress
