"""The plain prompts: every key does what it says. Each test drives `debug-stuck --plain`
through prompt_toolkit pipe input (as tests/test_prompts.py does) and reads what it printed."""

from __future__ import annotations

import io
import re

import pytest
from zoo.fixtures import zoo  # noqa: F401

pytest.importorskip("questionary")

from prompt_driving import ENTER, UP, drive  # noqa: E402
from prompt_toolkit.input import create_pipe_input  # noqa: E402
from prompt_toolkit.output import DummyOutput  # noqa: E402

from debug_stuck.frontends.prompts import PlainSession  # noqa: E402
from debug_stuck.frontends.session.core import Session  # noqa: E402

ESC = "\x1b"  # never followed by "[" or "O" here: that would read as an arrow key's sequence
CTRL_C = "\x03"

# The hung zoo job (future_result) up to the "what next" menu: job, the six questions.
TO_THE_MENU = [
    ENTER,  # step 1: the job (listed first)
    "2" + ENTER,  # phase: mid-run
    "2" + ENTER,  # step: random
    ENTER,  # errors: the usual answer (none)
    ENTER,  # gpu: suggested
    ENTER,  # event: the usual answer (none)
    ENTER,  # cpu: suggested by the live evidence
]
# The menu then: 1 probe, 2 copy, 3 save, 4 stop, 5 resume, 6 show the report, 7 quit.
RUN_ENV_PROBE = ["1" + ENTER, ENTER]  # run a probe; the first offered (env)


def dead_job_session(knowledge, tmp_path) -> Session:
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []  # whatever runs on this machine: the menu is PID / describe
    return session


def hung_job_session(knowledge, zoo, tmp_path):  # noqa: F811
    job = zoo("future_result")
    return job, Session(knowledge, pids=[job.proc.pid], save_dir=str(tmp_path))


# -- 1. the steps are numbered in the order they are shown ---------------------------------------
@pytest.mark.timeout(180)
def test_steps_are_numbered_in_the_order_they_are_shown(knowledge, zoo, tmp_path):  # noqa: F811
    _, session = hung_job_session(knowledge, zoo, tmp_path)
    code, printed = drive(session, "".join(TO_THE_MENU) + CTRL_C)
    assert code == 130, printed
    steps = [int(n) for n in re.findall(r"^Step (\d) of 5", printed, re.M)]
    first_seen = list(dict.fromkeys(steps))
    assert first_seen == sorted(first_seen), printed
    assert first_seen[:3] == [1, 2, 3]  # the job, its live evidence, then the questions it pre-fills
    assert printed.index("Step 2 of 5: reading the live evidence") < printed.index("Step 3 of 5: question 1\n")


# -- 2. a probe after the diagnosis: its result and what changed, not the whole report -----------
@pytest.mark.timeout(180)
def test_a_probe_after_the_diagnosis_says_what_changed_not_the_whole_report(knowledge, zoo, tmp_path):  # noqa: F811
    _, session = hung_job_session(knowledge, zoo, tmp_path)
    code, printed = drive(session, "".join(TO_THE_MENU + RUN_ENV_PROBE) + CTRL_C)
    assert code == 130, printed
    assert len(re.findall(r"(?m)^HUNG\b", printed)) == 1, printed  # the report (its headline), once
    after = printed[printed.index("running probe env") :]
    assert "Cause: thread-deadlock -" not in after and "Fix:" not in after
    assert re.search(r"^probe env: OK \(", after, re.M)  # the probe's own result
    assert "Updating the diagnosis with probe env" in after
    assert re.search(r"^(The diagnosis did not change: thread-deadlock|Cause.*thread-deadlock)", after, re.M), after
    assert [p["name"] for p in session.report.probes] == ["env"]  # the new diagnosis weighs it


@pytest.mark.timeout(180)
def test_the_whole_report_is_there_when_asked_for(knowledge, zoo, tmp_path):  # noqa: F811
    _, session = hung_job_session(knowledge, zoo, tmp_path)
    code, printed = drive(session, "".join(TO_THE_MENU + ["6" + ENTER, "7" + ENTER]))
    assert code == 0, printed
    assert len(re.findall(r"(?m)^HUNG\b", printed)) == 2 and printed.count("Cause: thread-deadlock -") == 2
    assert "pattern" not in printed.lower().split("cause:")[0]  # the headline in words, no pattern letters


# -- 3. questions worth answering are answered here, not "rerun with --answer" -------------------
@pytest.mark.timeout(60)
def test_a_question_the_diagnosis_asks_is_answered_in_the_session(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [
        UP + ENTER,  # step 1: not running any more / describe it
        ENTER,  # no log
        "3" + ENTER,  # phase: unknown
        "3" + ENTER,  # stuck at: the model
        ENTER,  # step: the same step
        ENTER,  # gpu: idle
        # what next: 1 probe, 2 answer a question, 3 copy, 4 save, 5 show, 6 quit
        "2" + ENTER,  # answer the question it asks (phase: the only one)
        "2" + ENTER,  # phase: mid-run
        "6" + ENTER,  # quit
    ]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert "--answer" not in printed, printed
    assert 'Worth answering (pick "Answer a question" below' in printed
    assert "  - phase (start|mid-run): Does the job hang before the first training step" in printed
    assert "Updating the diagnosis with your answer phase=mid-run" in printed
    phase = session.report.answers["phase"]
    assert (phase["value"], phase["source"]) == ("mid-run", "user")
    assert all(q["key"] != "phase" for q in session.report.next_questions)


@pytest.mark.timeout(60)
def test_a_tie_the_verdict_breaks_by_an_answer_is_answered_in_the_session(knowledge, tmp_path):
    from debug_stuck.core.report import Report, Verdict

    question = "While it hangs, is GPU utilization 0% or above 0%?"
    tie = {"causes": ["io-stall", "dataloader"], "confidence": 0.4, "question": "gpu", "question_text": question}
    tied = Report(answers={"gpu": {"value": "idle", "source": "evidence"}}, verdict=Verdict(tie=tie))
    reports = [tied, Report(verdict=Verdict(summary="Nothing moved."))]
    session = dead_job_session(knowledge, tmp_path)
    session.diagnose = lambda progress=None, live=True: reports.pop(0)  # the tie, then after the answer
    keys = [
        UP + ENTER,  # step 1: not running any more / describe it
        ENTER,  # no log
        "3" + ENTER,  # phase: unknown
        "3" + ENTER,  # stuck at: the model
        ENTER,  # step: the same step
        ENTER,  # gpu: idle
        # what next: 1 answer a question, 2 copy, 3 save, 4 show, 5 quit
        "1" + ENTER,  # answer the question that breaks the tie (gpu, the only one)
        "2" + ENTER,  # gpu: busy
        "4" + ENTER,  # quit (no question left to answer)
    ]
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert "--answer" not in printed, printed
    assert "answer gpu (While it hangs, is GPU utilization 0% or above 0%?) in the menu below" in " ".join(
        printed.split()
    )
    assert "Updating the diagnosis with your answer gpu=busy" in printed
    assert session.triage.answers["gpu"].value == "busy" and not reports


# -- 4. q and Escape at a question; a way back to the job list from question 1 -------------------
@pytest.mark.timeout(60)
def test_escape_at_the_first_question_goes_back_to_the_job_list_and_q_quits(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [UP + ENTER, ENTER, ESC, "q"]  # describe, no log, Escape at question 1, q at the job list
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert printed.count("Step 1 of 5: looking for training jobs") == 2, printed
    assert printed.count("Step 3 of 5: question 1\n") == 1
    assert "debug-stuck: quit; nothing is left running" in printed
    assert session.stopping.is_set() and session.report is None


@pytest.mark.timeout(60)
def test_question_one_offers_the_way_back_to_the_job_list(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [UP + ENTER, ENTER, "4" + ENTER, "q"]  # phase: 1 start, 2 mid-run, 3 unknown, 4 back
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert printed.count("Step 1 of 5: looking for training jobs") == 2, printed


@pytest.mark.timeout(60)
def test_escape_at_a_later_question_goes_back_one_and_drops_that_answer(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    keys = [UP + ENTER, ENTER, "2" + ENTER, ESC, "q"]  # phase: mid-run; Escape at question 2; q
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert printed.count("Step 3 of 5: question 1\n") == 2, printed
    assert printed.count("Step 3 of 5: question 2\n") == 1
    assert printed.count("Step 1 of 5") == 1
    assert session.triage.answers == {}
    assert "debug-stuck: quit" in printed


@pytest.mark.timeout(60)
def test_q_at_a_question_quits(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    code, printed = drive(session, "".join([UP + ENTER, ENTER, "q"]))
    assert code == 0, printed
    assert "debug-stuck: quit; nothing is left running" in printed
    assert session.stopping.is_set()


@pytest.mark.timeout(60)
def test_an_empty_pid_goes_back_to_the_job_list(knowledge, tmp_path):
    session = dead_job_session(knowledge, tmp_path)
    code, printed = drive(session, "".join(["1" + ENTER, ENTER, "q"]))  # by PID; Enter alone; q
    assert code == 0, printed
    assert printed.count("Step 1 of 5: looking for training jobs") == 2, printed


# -- 5. a y/N prompt takes its Enter; the next menu does not -------------------------------------
@pytest.mark.timeout(60)
def test_a_yes_no_prompt_takes_the_enter_typed_after_it():
    session = Session()
    with create_pipe_input() as pipe:
        pipe.send_text("y" + ENTER + "2" + ENTER + "n" + ENTER + ESC + ENTER)
        pipe.close()
        plain = PlainSession(session, io.StringIO(), input=pipe, output=DummyOutput())
        assert plain.confirm("Stop it?") is True
        assert plain.select("Next?", [("first", 1), ("second", 2)], default=1) == 2
        assert plain.confirm("Stop it?") is False
        assert plain.confirm("Stop it?", default=True) is False  # Escape: no
        assert plain.select("Next?", [("first", 1), ("second", 2)], default=1) == 1


@pytest.mark.timeout(180)
def test_declining_to_stop_the_job_leaves_the_menu_where_it_was(knowledge, zoo, tmp_path):  # noqa: F811
    job, session = hung_job_session(knowledge, zoo, tmp_path)
    keys = TO_THE_MENU + ["4" + ENTER, "n" + ENTER, "7" + ENTER]  # stop; no (and Enter); quit
    code, printed = drive(session, "".join(keys))
    assert code == 0, printed
    assert "not stopped" in printed
    assert job.proc.poll() is None  # still running
    assert not list(tmp_path.glob("debug-stuck-report-*"))  # the Enter did not pick "save"


# -- 6. a probe's notes are shown, wherever its summary counts them ------------------------------
@pytest.mark.timeout(180)
def test_the_env_probe_shows_its_notes(knowledge, zoo, tmp_path):  # noqa: F811
    _, session = hung_job_session(knowledge, zoo, tmp_path)
    keys = TO_THE_MENU + RUN_ENV_PROBE + ["6" + ENTER, "7" + ENTER]  # the probe, the whole report, quit
    code, printed = drive(session, "".join(keys))
    lines = printed.splitlines()
    counted = [(i, line) for i, line in enumerate(lines) if re.match(r"probe env: .*\d+ note\(s\)", line, re.I)]
    assert len(counted) >= 2, printed  # the probe's result, and its line in the report
    findings = {f["message"] for p in session.report.probes if p["name"] == "env" for f in p["findings"]}
    for i, line in counted:
        notes = int(re.search(r"(\d+) note\(s\)", line).group(1))
        assert notes >= 1
        shown = lines[i + 1 : i + 1 + notes]
        assert all(s.startswith("  - note: ") for s in shown), (line, shown)
        assert {s[len("  - note: ") :].split(" [see ")[0].split(" [points at ")[0] for s in shown} <= findings
    assert code == 0, printed
