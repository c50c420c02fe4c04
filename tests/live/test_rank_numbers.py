"""Rank numbers that no process's /proc environment holds whole: Lightning's script launcher sets
LOCAL_RANK, NODE_RANK and WORLD_SIZE for the children it re-runs, and nothing for the process that
started them (lightning 2.6 fabric/strategies/launchers/subprocess_script.py). The live job is in
tests/pipeline/test_framework_hangs.py (lightning_rank0_save); these are the rule's edges."""

from __future__ import annotations

import pytest

from debug_stuck.live.collect import Snapshot, _ranks_of_a_script_relauncher
from debug_stuck.probes.collectors.procs import ProcInfo


def job(children_env: list[dict]) -> Snapshot:
    script = ProcInfo(pid=100, ppid=1, name="python", cmdline=["python", "train.py"], role="rank")
    procs = [script]
    for i, env in enumerate(children_env, start=1):
        child = ProcInfo(pid=100 + i, ppid=100, name="python", cmdline=["/venv/bin/python", "/w/train.py"], role="rank")
        child.env = dict(env)
        child.local_rank = int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None
        procs.append(child)
    return Snapshot(host="h", taken_at=0.0, window=1.0, processes=procs)


def numbers(snap: Snapshot) -> dict:
    return {p.pid: (p.rank, p.local_rank) for p in snap.processes}


@pytest.mark.parametrize(
    "node, expected",
    [
        ("0", {100: (0, 0), 101: (1, 1), 102: (2, 2)}),
        ("1", {100: (3, 0), 101: (4, 1), 102: (5, 2)}),  # 3 processes a node: NODE_RANK x 3 + LOCAL_RANK
    ],
)
def test_the_script_is_local_rank_0_of_the_children_it_re_ran(node, expected):
    snap = job([{"LOCAL_RANK": "1", "NODE_RANK": node}, {"LOCAL_RANK": "2", "NODE_RANK": node}])
    _ranks_of_a_script_relauncher(snap)
    assert numbers(snap) == expected
    assert any("Lightning's script launcher" in note for note in snap.notes)


def test_without_a_node_index_only_the_local_ranks_are_known():
    snap = job([{"LOCAL_RANK": "1"}])
    _ranks_of_a_script_relauncher(snap)
    assert numbers(snap) == {100: (None, 0), 101: (None, 1)}


@pytest.mark.parametrize(
    "children",
    [
        [{"LOCAL_RANK": "0", "NODE_RANK": "0"}, {"LOCAL_RANK": "1", "NODE_RANK": "0"}],  # local rank 0 is a child
        [{"LOCAL_RANK": "2", "NODE_RANK": "0"}],  # not 1..n-1
        [{"NODE_RANK": "0"}],  # no local rank at all
    ],
    ids=["a-child-is-local-rank-0", "a-gap", "no-local-rank"],
)
def test_children_that_are_not_local_ranks_1_to_n_give_the_parent_no_number(children):
    snap = job(children)
    before = numbers(snap)
    _ranks_of_a_script_relauncher(snap)
    assert numbers(snap) == before and snap.notes == []
