"""Not hung: a builtin sort that calls the job's comparator for each pair, log silent (undecided).

``python sort_callback.py``: bucketing 1.5 million samples by length before the first epoch, with a
comparator written in Python (``sorted(order, key=functools.cmp_to_key(by_length))``), ten seconds
a sort at 100% CPU. Nearly every sample catches the main thread in ``by_length`` at its one line,
which calls nothing and sits in no loop: frozen there, as a spin on a flag would be, but each sample
is another of the millions of calls the builtin sort makes (the ninth hunt's s01_sort_cmp, called
hung on one call in three).

READY (``{"pid", "line"}``): written when the sorting begins; ``line`` is the comparator's line.
"""

from __future__ import annotations

import functools
import inspect
import random

import _common

LENGTHS: list = []


def by_length(i: int, j: int) -> int:
    return (LENGTHS[i] > LENGTHS[j]) - (LENGTHS[i] < LENGTHS[j])


def bucket(order: list) -> list:
    return sorted(order, key=functools.cmp_to_key(by_length))


def main() -> None:
    random.seed(0)
    LENGTHS.extend(random.randint(1, 4096) for _ in range(1_500_000))
    order = list(range(len(LENGTHS)))
    random.shuffle(order)
    print(f"bucketing {len(order)} samples by length", flush=True)
    _common.mark_ready(line=inspect.getsourcelines(by_length)[1] + 1)
    for _ in range(10**6):
        bucket(order)


if __name__ == "__main__":
    main()
