"""Hang: DDP with uneven inputs: the rank with fewer batches leaves the loop and waits in a barrier
while the other still all-reduces gradients in backward (CPU, gloo, 2 ranks).

Run under the launcher, as the spawner does::

    python -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 \\
        --master_port=<free port> assistant/zoo/ddp_uneven.py

Each rank reads its own shard with no padding sampler (as a hand-written split does): rank 0 gets
40 samples (5 batches of 8), rank 1 gets 24 (3 batches). Each rank prints its progress as
``[rankN]: epoch 0 step i/len(loader)``. After its last batch rank 1 calls ``dist.barrier()``;
rank 0's fourth ``backward`` waits for rank 1's gradients in DDP's reducer for ever. The PyTorch
docs name this case (DistributedDataParallel.join: "uneven inputs").

READY (``{"pid": rank 0, "rank0_pid", "rank1_pid"}``): written by rank 0 once rank 0 has sat in
``backward`` past rank 1's last batch and rank 1 in ``barrier``, each for 5 consecutive samples.
"""

from __future__ import annotations

import _common
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

BATCH = 8
progress = {"step": 0}  # the loop's step, read by the watch thread


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    samples = 40 if rank == 0 else 24  # the bug: shards of unequal length, no padding or drop_last
    loader = DataLoader(TensorDataset(torch.randn(samples, 8), torch.randn(samples, 1)), batch_size=BATCH)
    rank1_batches = 24 // BATCH
    _common.announce_rank_wait(
        rank, "backward" if rank == 0 else "barrier", lambda: rank == 1 or progress["step"] >= rank1_batches
    )
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (inputs, targets) in enumerate(loader):
        progress["step"] = step
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"[rank{rank}]: epoch 0 step {step}/{len(loader)} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    print(f"[rank{rank}]: epoch 0 done", flush=True)


if __name__ == "__main__":
    main()
