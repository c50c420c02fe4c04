"""The chain's fact lines for the classifier (live.chain.Hop.fact_line): a child the trainer forked that
runs no DataLoader is no DataLoader worker to the playbooks either (a SIGSTOPped evaluation child was
'DataLoader workers stalled, deadlocked or dead' at 93%)."""

from __future__ import annotations

from debug_stuck.live.hop import Hop
from debug_stuck.probes.collectors.stacks import Frame

LOADER = [Frame("__getitem__", "data.py", 9), Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 308)]
EVALUATOR = [Frame("evaluate", "train.py", 40), Frame("<module>", "train.py", 60)]


def hop(frames, dataloader_job=True) -> Hop:
    return Hop(pid=2, role="dataloader-worker", rank=None, tid=2, thread="MainThread", where=None,
               kind="process", frames=frames, dataloader_job=dataloader_job, terminal=True)  # fmt: skip


def test_a_forked_child_in_the_dataloaders_loop_is_a_dataloader_worker():
    assert " role=dataloader-worker " in hop(LOADER).fact_line()


def test_a_forked_child_that_runs_something_else_is_a_worker_process():
    assert " role=worker-process " in hop(EVALUATOR).fact_line()
    # a stopped or dead child has no frames: the job as a whole says whether it has a DataLoader
    assert " role=worker-process " in hop([], dataloader_job=False).fact_line()
    assert " role=dataloader-worker " in hop([], dataloader_job=True).fact_line()
