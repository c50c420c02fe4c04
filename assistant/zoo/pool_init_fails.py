"""Hang: a ``multiprocessing.Pool`` whose initializer raises in every worker (``python pool_init_fails.py``).

``Pool(2, initializer=load_vocab, initargs=(path,))`` with a vocabulary file that does not exist:
each worker raises FileNotFoundError as it starts, multiprocessing prints "Process
ForkPoolWorker-N:" and its traceback, and the pool starts another worker in its place, for ever.
``pool.map`` never gets a result; the log grows only with the same traceback (the twelfth hunt's
j17, called "progressing: the log grew").

READY (``{"pid"}``) once the main thread has slept in the map's wait for a few samples and 2 s
have passed (a few dozen workers have died).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import _common

VOCAB = {}


def load_vocab(path: str) -> None:
    with open(path) as f:
        VOCAB.update((word.strip(), i) for i, word in enumerate(f))


def tokenize(doc: str) -> list:
    return [VOCAB.get(word, 0) for word in doc.split()]


if __name__ == "__main__":
    docs = ["the cat sat on the mat"] * 1000
    missing = str(_common.workdir() / "vocab.txt")
    print("tokenizing 1000 docs with 2 workers", flush=True)
    started = time.monotonic()
    waits = _common._main_sleeps_in("wait")
    _common.ready_when(lambda: time.monotonic() - started > 2.0 and waits(), lambda: {"pid": os.getpid()})
    with mp.Pool(2, initializer=load_vocab, initargs=(missing,)) as pool:
        ids = pool.map(tokenize, docs)
    print("tokenized", len(ids), flush=True)
