"""A rank that turns in one function of its own code while the other waits for it in a collective
(live.progress._waited_for): a loop that polls (a flag file's stat: system calls) is the culprit; one
that computes in Python, making no system call, is one rank's long pass or a loop that never ends, and
one window cannot tell which."""

from __future__ import annotations

import pytest

from debug_stuck.live.collect import Snapshot
from debug_stuck.live.progress import judge_progress
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

SCRIPT = "/job/prep.py"
OWN = [Frame("dedupe_shards", "prep.py", 9, path=SCRIPT), Frame("<module>", "prep.py", 30, path=SCRIPT)]
WAITS = [
    Frame("all_reduce", "torch/distributed/distributed_c10d.py", 2806),
    Frame("<module>", "prep.py", 31, path=SCRIPT),
]


def snapshot(system_percent) -> Snapshot:
    procs, stacks = [], {}
    for pid, rank, frames, cpu in ((10, 0, OWN, 99.0), (11, 1, WAITS, 0.0)):
        info = ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "prep.py"], role="rank", rank=rank)
        info.state, info.cpu_percent = ("R" if cpu else "S"), cpu
        info.cpu_system_percent = system_percent if rank == 0 else 0.0
        procs.append(info)
        thread = ThreadStack(pid, "MainThread", "active", frames)
        dump = StackDump(pid=pid, threads=[thread], tool="py-spy", seconds=0.1)
        stacks[pid] = StackSeries(pid, [dump, dump])
    return Snapshot(host="h", taken_at=0.0, window=1.0, processes=procs, stacks=stacks)


def test_a_rank_computing_in_its_own_code_without_system_calls_is_not_blamed():
    progress = judge_progress(snapshot(0.0), waiting_pids=[11])
    assert progress.hung is None and not progress.stuck_on, progress
    assert "turns in its own code at dedupe_shards (prep.py:9), making no system call" in progress.reasons[0]


@pytest.mark.parametrize("system_percent", [19.0, None])
def test_a_rank_polling_with_system_calls_or_unmeasured_is_the_one_stuck(system_percent):
    # `while not os.path.exists(flag): pass` spends 19% of its CPU in stat(); unmeasured: as before
    progress = judge_progress(snapshot(system_percent), waiting_pids=[11])
    assert progress.hung is True and progress.stuck_on == [10], progress
