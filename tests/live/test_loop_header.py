"""The loop a sleeping thread of the job's own code turns in, read from its source (live/loops.py)."""

from __future__ import annotations

import pytest

from debug_stuck.live.loops import LOOP_HEADER_CHARS, loop_header

SCRIPT = """\
import os, time
deadline = time.time() + 3600
while not os.path.exists(RES) and time.time() < deadline:  # the evaluator writes it
    time.sleep(30)


def wait_all(paths):
    for path in paths:
        while (not os.path.exists(path)
               or os.path.getsize(path) == 0):
            time.sleep(1)


async def drain(stream):
    async for chunk in stream:
        await asyncio.sleep(0.1)
while True: time.sleep(5)
"""


@pytest.mark.parametrize(
    "line, header",
    [
        (4, "while not os.path.exists(RES) and time.time() < deadline"),  # a module-level loop: no locals to read
        (11, "while not os.path.exists(path) or os.path.getsize(path) == 0"),  # the innermost loop, on one line
        (16, "async for chunk in stream"),
        (17, "while True"),  # its body on the same line
        (2, None),  # not in a loop
    ],
)
def test_the_innermost_loop_holding_the_line_is_named_as_written(line, header):
    assert loop_header(SCRIPT, line) == header


def test_an_outer_for_loop_is_named_when_the_line_is_its_own():
    source = "for step in range(10):\n    x = 1\n    while x:\n        x = 0\n    time.sleep(1)\n"
    assert loop_header(source, 5) == "for step in range(10)"


def test_a_long_condition_is_cut_and_a_broken_file_gives_nothing():
    condition = " and ".join(f"ready_{i}()" for i in range(40))
    header = loop_header(f"while not ({condition}):\n    time.sleep(1)\n", 2)
    assert len(header) == LOOP_HEADER_CHARS and header.endswith("...")
    assert loop_header("def broken(:\n    pass\n", 2) is None
    assert loop_header("\x00binary", 1) is None
