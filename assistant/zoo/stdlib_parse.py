"""Not hung: the standard library parsing a large document, log silent (no cause; undecided).

``python stdlib_parse.py``: ``json.loads`` of a 72 MB annotation-like document (a million records,
about two seconds each time), again and again, from the job's own line, as a detection job loading
its annotation file does at start ("loading annotations into memory..." and tens of seconds of
silence). The main thread stays inside the C scanner under ``JSONDecoder.raw_decode`` (state R, 100%
CPU), and the parser's allocations set off garbage collections under it. Its innermost Python frame
is the standard library's, so it reads like a spin on the job's own line unless the parser is known
as a routine whose time grows with its input (frames.yaml ``computes``).

py-spy, MainThread active::

    raw_decode (json/decoder.py)
    decode (json/decoder.py)
    loads (json/__init__.py)
    main (stdlib_parse.py)

READY (``{"pid"}``): written just before the first parse.
"""

from __future__ import annotations

import json

import _common

RECORD = '{"id": 123456, "bbox": [1.5, 2.25, 3.125, 4.0625], "name": "caf\\u00e9"}'
RECORDS = 1_000_000


def main() -> None:
    text = "[" + ",".join([RECORD] * RECORDS) + "]"
    print("loading annotations into memory...", flush=True)
    _common.mark_ready()
    while True:
        json.loads(text)  # seconds in the C scanner each time


if __name__ == "__main__":
    main()
