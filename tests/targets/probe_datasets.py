"""Factories for test_probe_dataloader: real torch Datasets that are fast, slow, hang or crash.

Each function is what a user gives as `--factory probe_datasets:NAME`. The FIFO one reads the
path of a FIFO (made by the test, never written to) from PROBE_DATASETS_FIFO.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Squares(Dataset):
    def __init__(self, n: int = 64, delay: float = 0.0):
        self.n = n
        self.delay = delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.delay:
            time.sleep(self.delay)
        return torch.tensor([float(i * i)])


class HangsInWorker(Squares):
    """Fine in the main process; blocks for ever inside a DataLoader worker."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if get_worker_info() is not None:
            threading.Event().wait()
        return super().__getitem__(i)


class CrashesInWorker(Squares):
    """Fine in the main process; a worker dies of SIGSEGV on its first sample."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().__getitem__(i)


class ExitsInWorker(Squares):
    """A worker ends on its first sample: exit code 3, or SIGKILL (as the OOM killer does)."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how

    def __getitem__(self, i: int) -> torch.Tensor:
        if get_worker_info() is not None:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return super().__getitem__(i)


class FifoInWorker(Squares):
    """Fine in the main process; a worker's open() of a FIFO nobody writes blocks in the kernel."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if get_worker_info() is not None:
            with open(os.environ["PROBE_DATASETS_FIFO"], "rb") as fh:
                fh.read()
        return super().__getitem__(i)


class StuckSample(Squares):
    """Sample 1 never comes back, in a worker or not: a decoder in an endless wait."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 1:
            threading.Event().wait()
        return super().__getitem__(i)


class FifoSamples(Squares):
    """Sample 1 opens a FIFO that nobody writes: open() blocks in the kernel (wait_for_partner)."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 1:
            with open(os.environ["PROBE_DATASETS_FIFO"], "rb") as fh:
                fh.read()
        return super().__getitem__(i)


def fast() -> DataLoader:
    return DataLoader(Squares(), batch_size=8, num_workers=1)


def slow() -> Dataset:
    return Squares(delay=0.4)


def very_slow() -> Dataset:
    """2 s a sample: slower than a short probe limit, but it never hangs."""
    return Squares(delay=2.0)


def hangs_in_worker() -> Dataset:
    return HangsInWorker()


def crashes_in_worker() -> Dataset:
    return CrashesInWorker()


def exits_3_in_worker() -> Dataset:
    return ExitsInWorker("exit")


def killed_in_worker() -> Dataset:
    return ExitsInWorker("kill")


def fifo_in_worker() -> Dataset:
    return FifoInWorker()


def stuck_sample() -> Dataset:
    return StuckSample()


def fifo_samples() -> Dataset:
    return FifoSamples()


def not_a_dataset() -> int:
    return 42
