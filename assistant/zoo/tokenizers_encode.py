"""Not hung: a fast tokenizer encodes a large batch on the main thread (no cause; undecided).

``python tokenizers_encode.py``. ``encode_batch`` hands the batch to rayon's thread pool and the
main thread waits on a ``LockLatch`` (a futex) until the pool's threads finish: the Python stack is
frozen, the main thread sleeps, and the process burns one core per pool thread. The pool's
threads are native, so py-spy does not list them. A long encode of a corpus looks like that; so
would a pool job that never ends. The work is made long and small in memory: WordPiece tries
every prefix of a word it cannot match (tokenizers' WordPiece::tokenize, O(n^2) in the word's
length), here 2000 texts of one 100 000-character word each, about 0.4 s of CPU per text.

py-spy --native, MainThread::

    syscall (libc.so.6)
    _RNvMs3_..._10rayon_core5latchNtB5_9LockLatch14wait_and_reset (tokenizers/tokenizers.abi3.so)
    ...
    encode (tokenizers_encode.py)

READY (``{"pid"}``): once the main thread has slept steadily inside ``encode``.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "true"  # before tokenizers reads it

import _common  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

WORD = "z" * 100_000
TEXTS = [WORD] * 2000


def encode(tokenizer: Tokenizer) -> int:
    return len(tokenizer.encode_batch(TEXTS))


def main() -> None:
    tokenizer = Tokenizer(models.WordPiece({"a": 0, "[UNK]": 1}, unk_token="[UNK]", max_input_chars_per_word=10**6))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    _common.ready_when(_common._main_sleeps_in("encode"), lambda: {"pid": os.getpid()})
    print(f"encoding {len(TEXTS)} texts", flush=True)
    print(f"encoded {encode(tokenizer)} texts", flush=True)


if __name__ == "__main__":
    main()
