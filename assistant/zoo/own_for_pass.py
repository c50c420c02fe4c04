"""Not hung: a pure-Python pass over data in the job's own `for` loops, log silent (undecided).

``python own_for_pass.py``: a BPE-style vocabulary pass, as a tokenizer-training script runs before
its first step: for each round, count the character pairs of every word of a synthetic corpus
(``pairs[a + b] += 1``), minutes of silence at 100% CPU. Most samples catch the main thread on that
one line, under CPython's own C (a str hash): frozen on a line of the job's own code, as a spin
on a flag would be; but the line is in the body of a ``for`` loop over the data.

READY (``{"pid"}``): written when the counting begins.
"""

from __future__ import annotations

import collections
import random

import _common


def main() -> None:
    random.seed(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(random.choice(letters) for _ in range(random.randint(2, 9))) for _ in range(200_000)]
    print("building vocabulary...", flush=True)
    pairs: collections.Counter = collections.Counter()
    _common.mark_ready()
    for _ in range(10**9):
        pairs.clear()
        for word in words:
            for a, b in zip(word, word[1:]):
                pairs[a + b] += 1  # the busiest line: most samples stop here


if __name__ == "__main__":
    main()
