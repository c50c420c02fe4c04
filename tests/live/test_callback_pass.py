"""A builtin's pass over data that calls the job's own function for each item (live/loops.py): a
frozen line there is work that ends with its input, unlike a frozen line that turns in a loop of its
own or sits in one builtin call (a regex) with no function of the job handed to it."""

from __future__ import annotations

import pytest

from debug_stuck.live.loops import call_with_callback, calls_nothing_outside_loops

SOURCE = """\
import functools, re

def by_length(i, j):
    return (LENGTHS[i] > LENGTHS[j]) - (LENGTHS[i] < LENGTHS[j])

def bucket(order):
    return sorted(order, key=functools.cmp_to_key(by_length))

def clean(rows):
    return [r for r in map(lambda r: r.strip(), rows)]

class Fixer:
    def fix(self, m):
        return m.group(0).lower()

    def run(self, text):
        return re.sub(r"[A-Z]+", self.fix, text)

def validate(token):
    return PATTERN.match(token) is not None

def wait(flag):
    while True:
        n = flag + 1

def poll(path):
    while not done(path):
        pass

def done(path):
    return os.path.exists(path)

def start():
    threading.Thread(target=bucket(ORDER)).start()
"""


@pytest.mark.parametrize(
    "line, callee, expected",
    [
        (7, None, ("sorted(order, key=functools.cmp_to_key(by_length))", "by_length")),
        (7, "by_length", ("sorted(order, key=functools.cmp_to_key(by_length))", "by_length")),
        (10, "<lambda>", ("map(lambda r: r.strip(), rows)", "<lambda>")),
        (17, "fix", ('re.sub(r"[A-Z]+", self.fix, text)', "fix")),
    ],
)
def test_a_call_that_hands_a_function_of_the_job_to_a_routine_is_named(line, callee, expected):
    assert call_with_callback(SOURCE, line, callee) == expected


@pytest.mark.parametrize("line, callee", [(20, None), (28, None), (7, "clean"), (35, None), (24, None)])
def test_a_call_that_hands_over_no_function_or_calls_it_itself_is_not_a_pass(line, callee):
    # a regex on one token; a `while` calling done() itself; another function; a function's result
    # handed over (bucket(ORDER) is called, not passed); a line in a `while`
    assert call_with_callback(SOURCE, line, callee) is None


def test_only_a_line_that_calls_nothing_and_turns_in_no_loop_of_its_function_is_called_again_and_again():
    assert calls_nothing_outside_loops(SOURCE, 4, "by_length")
    assert not calls_nothing_outside_loops(SOURCE, 20, "validate")  # calls PATTERN.match: can stick
    assert not calls_nothing_outside_loops(SOURCE, 24, "wait")  # in a `while` of its own
    assert not calls_nothing_outside_loops(SOURCE, 31, "done")  # calls os.path.exists
    assert not calls_nothing_outside_loops(SOURCE, 4, "bucket")  # not that function's line
    assert not calls_nothing_outside_loops("def f(:\n", 1, "f")
    assert call_with_callback("def f(:\n", 1) is None
