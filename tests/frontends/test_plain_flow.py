"""`debug-stuck --plain`: the step numbers never go back unless the user does, the question counter
never contradicts itself, and a question gone back to selects the answer given before."""

from __future__ import annotations

import re
import shutil

import pytest

pytest.importorskip("questionary")

from prompt_driving import ENTER, UP, drive, drive_lines  # noqa: E402

from conftest import example_request as load_example  # noqa: E402
from debug_stuck.frontends.session.core import Session  # noqa: E402

ESC = "\x1b"  # never followed by "[" or "O" here: that would read as an arrow key's sequence


def dead_job_session(knowledge, tmp_path) -> Session:
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []  # whatever runs on this machine: the menu is PID / describe
    return session


def steps_of(printed: str) -> list:
    return [(int(n), int(total)) for n, total in re.findall(r"^Step (\d+) of (\d+)", printed, re.M)]


# -- 8c: step numbers and the question counter ---------------------------------------------------
@pytest.mark.timeout(120)
def test_a_probe_is_part_of_the_step_that_offers_it(knowledge, tmp_path):
    log = tmp_path / "train.log"
    shutil.copyfile(load_example(knowledge, "nanochat-collective").logs[0], log)
    session = dead_job_session(knowledge, tmp_path)
    keys = [
        UP + ENTER,  # not running any more / describe it
        str(log) + ENTER,
        ENTER,  # phase: mid-run, from the log
        "2" + ENTER,  # step: random
        # errors: 1 hardware, 2 network, 3 none, 4 unknown, 5 run a probe (gpu-health), 6 back
        "5" + ENTER,
        "2" + ENTER,  # which probe: 1 gpu-health, 2 none
        ENTER,  # errors again: none
        "2" + ENTER,  # gpu: busy
        ENTER,  # progress: stopped
        "1" + ENTER,  # power: low
        "1" + ENTER,  # what next: run a probe
        ESC,  # which probe: none after all
        "q",
    ]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    steps = steps_of(printed)
    assert len({total for _, total in steps}) == 1, steps  # one count, from first to last
    numbers = [n for n, _ in steps]
    assert numbers == sorted(numbers), numbers  # never back: the user did not go back
    assert numbers[-1] == steps[0][1], numbers  # the last step is the count's last
    assert printed.count(": a probe\n") == 2, printed  # both probe menus were shown


@pytest.mark.timeout(60)
def test_the_question_counter_never_contradicts_itself(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [
        UP + ENTER,  # not running any more / describe it
        ENTER,  # no log
        "3" + ENTER,  # phase: unknown
        "3" + ENTER,  # stuck at: the model
        ENTER,  # step: the same step
        ENTER,  # gpu: idle
        "q",
    ]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    counters = re.findall(r"question (\d+)( of (\d+))?", printed)
    assert [int(n) for n, _, _ in counters] == list(range(1, len(counters) + 1)), counters
    totals = {total for _, _, total in counters if total}
    # A total is said only where it holds: the same from the first question to the last one, and
    # the number of questions asked.
    assert totals <= {str(len(counters))}, counters


# -- 8d: back to a question selects the answer given before --------------------------------------
@pytest.mark.timeout(60)
def test_escape_back_selects_the_answer_given_before(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [
        UP + ENTER,  # not running any more / describe it
        ENTER,  # no log
        "3" + ENTER,  # phase: unknown (the list starts at "start")
        "3" + ENTER,  # stuck at: the model
        ESC,  # at question 3: back to question 2
        ESC,  # back to question 1
        ENTER,  # phase: what is selected (the answer given before)
        ENTER,  # stuck at: likewise
        "q",  # at question 3
    ]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    answers = {key: answer.value for key, answer in session.triage.answers.items()}
    assert answers == {"phase": "unknown", "stuck_at": "model"}, printed
    assert session.triage.order == ["phase", "stuck_at"]


@pytest.mark.timeout(60)
def test_the_back_option_selects_the_answer_given_before_too(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    # phase: unknown; at question 2 (stuck at: 1-5 the places, 6 unknown, 7 a probe, 8 back) the
    # back option; Enter at question 1 again
    keys = [UP + ENTER, ENTER, "3" + ENTER, "8" + ENTER, ENTER, "q"]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert session.triage.answers["phase"].value == "unknown", printed


@pytest.mark.timeout(60)
def test_the_numbered_prompts_go_back_with_b_and_select_the_answer_given_before(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    code, printed = drive_lines(session, "2\n\n3\nb\n\nq\n")  # describe, no log, unknown, back, Enter
    assert code == 0, printed
    assert session.triage.answers["phase"].value == "unknown", printed
    assert "Pick 1-4 (Enter: 3, b back, q quits):" in printed  # the earlier answer is the default
