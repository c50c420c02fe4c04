"""Hang: DataLoader workers forked after the tokenizers library's thread pool ran in the parent.

``TOKENIZERS_PARALLELISM=true`` is set explicitly (as a user silencing the library's fork warning
would), so the forked workers keep tokenizers' parallel mode. The parent encodes a batch first
(``encode_batch`` runs on rayon's thread pool, which starts its threads); then
``DataLoader(num_workers=2)`` forks its workers, and each one's ``__getitem__`` calls
``encode_batch``: rayon hands the job to pool threads that do not exist in the child, and waits for
them for ever (a ``LockLatch`` on a futex; the tokenizer is built in code, no download).

py-spy --native, worker MainThread::

    syscall (libc.so.6)
    _RNvMNtNtNtNtCs..._3std3sys4sync7condvar5futexNtB2_7Condvar4wait (tokenizers/tokenizers.abi3.so)
    _RNvMs3_NtCs..._10rayon_core5latchNtB5_9LockLatch14wait_and_reset (tokenizers/tokenizers.abi3.so)
    Texts.__getitem__ (tokenizers_fork.py)
    _MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py)
    _worker_loop (torch/utils/data/_utils/worker.py)
    ...

READY (``{"pid", "workers"}``): written by a helper thread of the main process once both workers
have entered ``__getitem__`` and sleep steadily, and the main thread sleeps in ``_try_get_data``.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "true"  # before tokenizers reads it

import _common  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

WORDS = [f"w{i}" for i in range(5000)]
TEXTS = [" ".join(WORDS[(i * 7) % 4000 : (i * 7) % 4000 + 200]) for i in range(2000)]


def build_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate([*WORDS, "[UNK]"])}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


TOKENIZER = build_tokenizer()


class Texts(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int):
        _common.write_marker(f"encoding-{os.getpid()}")
        return torch.tensor(TOKENIZER.encode_batch(TEXTS[:64])[0].ids[:8])


def main() -> None:
    torch.set_num_threads(1)
    print(f"parent encoded {len(TOKENIZER.encode_batch(TEXTS))} texts", flush=True)  # starts rayon's pool
    loader = torch.utils.data.DataLoader(Texts(), batch_size=4, num_workers=2)
    batches = iter(loader)  # forks the workers before the helper thread exists
    workers = [w.pid for w in batches._workers]
    waits = _common._main_sleeps_in("_try_get_data")

    def hung() -> bool:
        entered = all((_common.workdir() / f"encoding-{pid}").exists() for pid in workers)
        return entered and all(_common.sleeping_steadily(pid) for pid in workers) and waits()

    _common.ready_when(hung, lambda: {"pid": os.getpid(), "workers": workers})
    for step, batch in enumerate(batches):
        print(f"step {step}: {batch.shape}", flush=True)


if __name__ == "__main__":
    main()
