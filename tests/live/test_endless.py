"""Commands that never end on their own (live.endless, skills/data/programs.yaml `endless`), read from
the command line alone: the flags that bound them, or that make them follow, as their manuals say."""

from __future__ import annotations

import pytest

from debug_stuck.live.endless import endless_entry


@pytest.mark.parametrize(
    "argv",
    [
        ["top", "-b", "-d", "1"],
        ["/usr/bin/top", "-b"],
        ["tail", "-f", "train.log"],
        ["tail", "-fn", "100", "train.log"],
        ["tail", "--follow=name", "train.log"],
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv", "-l", "1"],
        ["ping", "10.0.0.2"],
        ["vmstat", "1"],
        ["watch", "-n", "5", "nvidia-smi"],
        ["dmesg", "-w"],
    ],
)
def test_commands_that_run_until_stopped(argv):
    assert endless_entry(argv) is not None, argv


@pytest.mark.parametrize(
    "argv",
    [
        ["top", "-b", "-n", "1"],
        ["top", "-bn1"],
        ["top", "-b", "--iterations=3"],
        ["tail", "-n", "100", "train.log"],
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv"],
        ["ping", "-c", "3", "10.0.0.2"],
        ["vmstat", "1", "5"],
        ["vmstat"],
        ["dmesg"],
        ["python", "-u", "train.py"],
        [],
    ],
)
def test_commands_that_end_by_themselves(argv):
    assert endless_entry(argv) is None, argv
