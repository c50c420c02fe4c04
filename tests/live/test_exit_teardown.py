"""A process whose script has returned is exiting, not hung: CPython's Py_FinalizeEx tears the
interpreter down (module teardown, a final garbage collection over everything still alive), which
takes seconds for a large heap. The eighth live hunt caught a healthy rank there and the tool said
HUNG (gc-pause). The snapshot is a real one (tests/fixtures/stacks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from debug_stuck.core.classify import Observations
from debug_stuck.live.assess import analyze
from debug_stuck.live.progress import past_its_script
from debug_stuck.live.wire import snapshot_from_wire

SNAPSHOT = Path(__file__).parents[1] / "fixtures" / "stacks" / "exit-teardown-gc-snapshot.json"


def recorded():
    snap = snapshot_from_wire(json.loads(SNAPSHOT.read_text()))
    (rank,) = [p for p in snap.processes if p.role == "rank"]
    return snap, rank


def test_a_process_tearing_down_after_its_script_returned_is_not_called_hung(knowledge):
    snap, rank = recorded()
    assert past_its_script(snap.stacks[rank.pid], rank.pid)
    progress = analyze(knowledge, snap, Observations()).progress
    assert progress.hung is None and progress.undecided_computing, progress
    assert "has no Python frame left" in progress.reasons[0]
    assert f"ps -o etime,time -p {rank.pid}" in progress.reasons[0]


def test_a_main_thread_without_python_frames_that_waits_at_exit_stays_hung(knowledge):
    # the same stacks asleep: a native teardown that waits (a C++ destructor joining a thread) never ends
    snap, rank = recorded()
    rank.state, rank.cpu_percent, rank.cpu_demand = "S", 0.0, 0.0
    progress = analyze(knowledge, snap, Observations()).progress
    assert progress.hung is True, progress


def test_a_main_thread_waiting_for_the_gil_is_not_the_teardown(knowledge):
    # another thread keeps the GIL (and the CPU): the main thread is not the one at work
    snap, rank = recorded()
    for dump in snap.stacks[rank.pid].dumps:
        for thread in dump.threads:
            thread.holds_gil = False
    assert not past_its_script(snap.stacks[rank.pid], rank.pid)
    progress = analyze(knowledge, snap, Observations()).progress
    assert "has no Python frame left" not in " ".join(progress.reasons)
