"""Known log lines are recognised as evidence for the right cause (issue: log evidence)."""

import pytest

from debug_stuck.core.classify import Observations, ObservedLine, match_signals

LINES = [
    (
        "[rank0]:[E1115 02:51:12.123 1234 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=88, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.",
        "collective",
        ["88", "BROADCAST"],
    ),
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.", "dataloader", ["4242"]),
    ("RuntimeError: DataLoader timed out after 120 seconds", "dataloader", ["120"]),
    (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "dataloader",
        [],
    ),
    (
        "MIOpen(HIP): Warning [SQLiteBase] Missing system database file: gfx90a68.kdb Performance may degrade.",
        "miopen-find",
        ["gfx90a68"],
    ),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda-sync", []),
    ("RuntimeError: HIP error: the operation cannot be performed in the present state", "cuda-sync", []),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.", "gpu-hardware", ["79"]),
    (
        "amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault; ring gfx timeout, signaled seq=1234, emitted seq=1236",
        None,
        [],
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.10 GiB is free.",
        "memory-pressure",
        [],
    ),
    ("Out of memory: Killed process 4242 (python) total-vm:123456kB", "memory-pressure", []),
    (
        "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 12345 vs 12300 "
        "PytorchStreamWriter failed writing file data/12: file write failed",
        "checkpoint-save",
        [],
    ),
    ("OSError: [Errno 28] No space left on device: '/ckpt/model.pt'", "checkpoint-save", []),
    ("nfs: server fileserver not responding, still trying", "io-stall", ["fileserver"]),
    ("INFO: task python:4242 blocked for more than 120 seconds.", "io-stall", []),
]


@pytest.mark.parametrize("line, cause, values", LINES, ids=[c or "amdgpu" for _, c, _ in LINES])
def test_line_is_evidence_for_its_cause(knowledge, line, cause, values):
    obs = Observations()
    obs.add("log", ObservedLine(line, file="train.log", line=1))
    matches = match_signals(knowledge, obs)
    causes = {m.signal.cause for m in matches}
    if cause is None:  # amdgpu ring timeout: hardware or ROCm, either is a right answer
        assert causes & {"gpu-hardware", "miopen-find", "cuda-sync"}, causes
        return
    assert cause in causes, causes
    best = max((m for m in matches if m.signal.cause == cause), key=lambda m: m.signal.weight)
    assert best.signal.weight >= 0.4
    for value in values:
        assert value in best.detail, best.detail


HEALTHY = [
    "step 100/1000 loss 2.31 lr 3e-4 grad_norm 1.02",
    "Epoch 3/50: 100%|##########| 500/500 [02:01<00:00, 4.12it/s]",
    "Saving model checkpoint to out/checkpoint-500",
    "INFO: validation mAP50 0.41",
    "NCCL INFO comm 0x5581 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init COMPLETE",
    "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.1it/s]",
]


def test_healthy_lines_carry_no_strong_evidence(knowledge):
    obs = Observations()
    for i, line in enumerate(HEALTHY, 1):
        obs.add("log", ObservedLine(line, file="train.log", line=i))
    strong = [(m.signal.cause, m.where.text) for m in match_signals(knowledge, obs) if m.signal.weight >= 0.4]
    assert strong == []


@pytest.mark.parametrize(
    "line, name",
    [
        ("Exception in thread prefetch:", "prefetch"),
        # a real log of the producer_died zoo job under PYTHONUNBUFFERED: CPython writes "Exception in
        # thread ", the name and ":" as three writes, and the main thread's print landed before them
        ("step 1 loss 0.000Exception in thread ", "?"),
        ("2026-11-29 01:12:03 ERROR Exception in thread Thread-3 (upload):", "Thread-3 (upload)"),
    ],
)
def test_a_dead_threads_header_counts_wherever_it_sits_on_its_line(knowledge, line, name):
    obs = Observations()
    obs.add("log", ObservedLine(line, file="train.log", line=1))
    found = [m for m in match_signals(knowledge, obs) if m.signal.cause == "thread-deadlock"]
    assert [m.detail for m in found] == [
        f"a thread of the job ended with an uncaught exception (thread {name}): whatever waits for it waits for ever"
    ], found
