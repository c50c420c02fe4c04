"""Target for test_flight_recorder: a gloo job on 127.0.0.1 whose ranks hang in a collective, each
rank dumping its Flight Recorder first, as NCCL does at a watchdog timeout.

    TORCH_FR_BUFFER_SIZE=2000 python fr_gloo_job.py SCENARIO OUT_DIR PORT [WORLD]

The ranks are forked (one process group: the test kills it whole) and the parent only waits, so
a rank that gloo aborts does not take the others down. Each
rank writes OUT_DIR/nccl_trace_rank_<rank> (the pickle of _dump_fr_trace(), the bytes NCCL writes
to TORCH_FR_DUMP_TEMP_FILE) and OUT_DIR/json/nccl_trace_rank_<rank>.json (_dump_fr_trace_json()),
renamed into place once whole, then hangs for ever. The collective that hangs is issued with
async_op=True so that its entry is in the dump before the rank blocks in work.wait().

Scenarios (the lines the test expects as call sites carry a `# site:` comment):
- other_collective: rank 0 enters all_reduce #3 while rank 1 enters broadcast #3.
- never_reaches (3 ranks): ranks 0 and 2 enter all_reduce #3; rank 1 never calls it.
- size_mismatch: rank 1 enters all_reduce #2 with 8 elements, rank 0 with 4. Gloo aborts a rank that
  receives more than it expects, so rank 1 enqueues only once rank 0 has dumped.
- second_group: a second process group "tp" of ranks 0 and 1; rank 0 enters all_reduce #2 on
  it, rank 1 never does (the default group is healthy).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def dump(rank: int, out: str, pending: int) -> None:
    os.makedirs(os.path.join(out, "json"), exist_ok=True)
    _write(os.path.join(out, "json", f"nccl_trace_rank_{rank}.json"), settled_trace_json(pending))
    _write(os.path.join(out, f"nccl_trace_rank_{rank}"), _dump_fr_trace())


def hang(work, rank: int, out: str) -> None:
    dump(rank, out, pending=0 if work is None else 1)
    if work is not None:
        try:
            work.wait()
        except Exception:  # a peer in another collective may break gloo's transport: hang anyway
            pass
    threading.Event().wait()


def wait_for(path: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.02)


def stuck_elsewhere(rank: int, out: str) -> None:
    hang(None, rank, out)


def run(rank: int, scenario: str, out: str, port: int, world: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(4)
    dist.all_reduce(t)
    if scenario == "other_collective":
        dist.broadcast(t, 0)
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)  # site:other_collective:0
        else:
            work = dist.broadcast(t, 0, async_op=True)  # site:other_collective:1
        hang(work, rank, out)
    elif scenario == "never_reaches":
        dist.broadcast(t, 0)  # site:never_reaches:last
        if rank == 1:
            stuck_elsewhere(rank, out)
        work = dist.all_reduce(t, async_op=True)  # site:never_reaches:waiting
        hang(work, rank, out)
    elif scenario == "size_mismatch":
        size = 8 if rank == 1 else 4
        if rank == 1:
            wait_for(os.path.join(out, "nccl_trace_rank_0"))
        work = dist.all_reduce(torch.ones(size), async_op=True)  # site:size_mismatch
        hang(work, rank, out)
    elif scenario == "second_group":
        tp = dist.new_group([0, 1], group_desc="tp")
        dist.all_reduce(t, group=tp)
        dist.all_reduce(t)
        if rank == 1:
            stuck_elsewhere(rank, out)
        work = dist.all_reduce(t, group=tp, async_op=True)  # site:second_group
        hang(work, rank, out)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def main() -> None:
    scenario, out, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    world = int(sys.argv[4]) if len(sys.argv) > 4 else (3 if scenario == "never_reaches" else 2)
    for rank in range(world):
        if os.fork() == 0:
            try:
                run(rank, scenario, out, port, world)
            finally:
                os._exit(1)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            threading.Event().wait()


# Below everything else, so that the call sites above keep the line numbers the recorded dumps in
# tests/fixtures/flight_recorder/ carry.
def settled_trace_json(pending: int, seconds: float = 10.0) -> bytes:
    """This rank's Flight Recorder trace (JSON) once it counts every collective the rank enqueued as
    completed, but the `pending` ones: gloo records completion asynchronously, so a blocking
    collective can return before its process group's status says so, and a dump taken then shows
    the rank still inside a collective it has left."""
    import json

    deadline = time.monotonic() + seconds
    while True:
        trace = _dump_fr_trace_json()
        groups = json.loads(trace).get("pg_status") or {}
        behind = sum(
            int(g["last_enqueued_collective"]) - max(int(g["last_completed_collective"]), 0) for g in groups.values()
        )
        if behind <= pending or time.monotonic() > deadline:
            return trace
        time.sleep(0.02)


if __name__ == "__main__":
    main()
