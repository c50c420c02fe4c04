"""The negative control: a small CPU training job that keeps making progress (not hung).

An MLP regression trained with plain SGD on batches from ``DataLoader(num_workers=2)`` (synthetic data,
generated in the workers). One step every ~0.2 s (the compute takes milliseconds; the rest is a
sleep, so the job stays light on a 2-core machine). Each step prints ``step N loss X`` (flushed)
to the log; every 20 steps it saves ``<workdir>/ckpt.pt`` (``torch.save`` to a temporary file, then
``os.replace``) and prints ``saved checkpoint step N``.

py-spy, MainThread mostly idle in ``sleep``/``_try_get_data``, and different from one dump to the
next; the workers idle in ``get (multiprocessing/queues.py)`` under ``_worker_loop``.

READY (``{"pid", "steps"}``): after 5 steps.
"""

from __future__ import annotations

import os
import time

import _common
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEP_SECONDS = 0.2


class SyntheticRegression(Dataset):
    def __len__(self):
        return 10**7

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        x = torch.randn(32, generator=g)
        return x, x.sum(dim=0, keepdim=True) * 0.1


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    root = _common.workdir()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    lr = 0.01
    loader = DataLoader(SyntheticRegression(), batch_size=16, num_workers=2)
    step = 0
    for x, y in loader:
        started = time.monotonic()
        loss = nn.functional.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():  # plain SGD by hand: torch.optim costs ~2 s of imports (dynamo)
            for p in model.parameters():
                p -= lr * p.grad
        step += 1
        print(f"step {step} loss {loss.item():.5f}", flush=True)
        if step % 20 == 0:
            tmp = root / "ckpt.pt.tmp"
            torch.save({"step": step, "model": model.state_dict(), "lr": lr}, tmp)
            os.replace(tmp, root / "ckpt.pt")
            print(f"saved checkpoint step {step}", flush=True)
        if step == 5:
            _common.mark_ready(steps=step)
        time.sleep(max(0.0, STEP_SECONDS - (time.monotonic() - started)))


if __name__ == "__main__":
    main()
