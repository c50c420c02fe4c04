"""`debug-stuck --plain` at 80 columns: each job's command on its line, so that two one-process
jobs differ; options and printed text wrapped at word boundaries, never cut. The menus are drawn
on a terminal of 80 columns (prompt_toolkit's own output into a buffer) and read back."""

from __future__ import annotations

import io
import re
import shutil
import time

import pytest

pytest.importorskip("questionary")

from prompt_driving import ENTER, UP, draw_menu, drive, drive_lines, drive_screen  # noqa: E402

from conftest import example_request as load_example  # noqa: E402
from debug_stuck.frontends.prompts import (  # noqa: E402
    fit_option,
    question_choices,
    script_and_args,
    verbatim_lines,
    wrap_line,
)
from debug_stuck.frontends.session.core import Session  # noqa: E402
from debug_stuck.pipeline.look import JobSummary  # noqa: E402
from debug_stuck.render.text import session_headline  # noqa: E402

ESC = "\x1b"
WIDTH = 80


def one_process_job(pid: int, command: str, **more) -> JobSummary:
    return JobSummary(pid=pid, pids=[pid], launcher="python", ranks=0, command=command, gpus=[], **more)


def session_with_jobs(knowledge, tmp_path, *jobs) -> Session:
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: list(jobs)
    return session


def flat(text: str) -> str:
    return " ".join(text.split())


def drawn_lines(drawn: str):
    # A line that reaches the last column is drawn as 79 characters, a carriage return, a jump
    # and the last one: each piece is a line of its own here, none longer than the whole.
    return [piece for line in drawn.split("\n") for piece in line.split("\r")]


# -- 8a: the job list shows each job's command ---------------------------------------------------
TRAIN = "/usr/bin/python3 -u train.py --lr 0.1 --data /data/imagenet"
EVAL = "/usr/bin/python3 -u eval.py --ckpt runs/7/last.pt --hf-token '<redacted>'"


@pytest.mark.timeout(60)
def test_two_one_process_jobs_differ_by_their_command(knowledge, tmp_path):
    session = session_with_jobs(knowledge, tmp_path, one_process_job(4101, TRAIN), one_process_job(4202, EVAL))
    code, _, drawn = drive_screen(session, "q", width=WIDTH)
    assert code == 0
    assert "train.py --lr 0.1 --data /data/imagenet" in drawn, drawn
    assert "eval.py --ckpt runs/7/last.pt --hf-token '<redacted>'" in drawn
    assert "/usr/bin/python3" not in drawn  # the interpreter tells no job from another


@pytest.mark.timeout(60)
def test_a_long_command_is_shortened_to_one_line(knowledge, tmp_path):
    args = " ".join(f"--option-{n} value-{n}" for n in range(20))
    session = session_with_jobs(knowledge, tmp_path, one_process_job(4101, f"python train.py {args}"))
    code, _, drawn = drive_screen(session, "q", width=WIDTH)
    assert code == 0
    line = next(line for line in drawn_lines(drawn) if "train.py --option-0 value-0" in line)
    assert line.endswith("...") and len(line) <= WIDTH, line
    assert all(len(piece) <= WIDTH for piece in drawn_lines(drawn)), drawn


@pytest.mark.timeout(60)
def test_the_numbered_job_list_shows_the_commands_too(knowledge, tmp_path):
    session = session_with_jobs(knowledge, tmp_path, one_process_job(4101, TRAIN), one_process_job(4202, EVAL))
    code, printed = drive_lines(session, "q\n")
    assert code == 0
    assert "train.py --lr 0.1 --data /data/imagenet" in printed, printed
    assert "eval.py --ckpt runs/7/last.pt --hf-token '<redacted>'" in printed


def test_the_interpreter_and_its_flags_are_left_out_of_the_command():
    assert script_and_args("/opt/conda/bin/python3.11 -u -X dev train.py --lr 1") == "train.py --lr 1"
    launch = "-m torch.distributed.run --nproc 2 t.py"
    assert script_and_args(f"python {launch}") == launch
    assert script_and_args("/home/me/python-tools/run.sh --fast") == "/home/me/python-tools/run.sh --fast"
    assert script_and_args("python") == "python"


# -- 8b: wrapped at word boundaries, never cut ----------------------------------------------------
@pytest.mark.timeout(60)
def test_a_long_option_is_wrapped_not_cut(knowledge, tmp_path):
    last = "step 4118 | loss 2.7134 | lr 3.0e-04 | tokens/s 181234 | mfu 41.2% | grad-norm 0.83 | data-wait 0.01 s"
    job = one_process_job(
        4101,
        TRAIN,
        started=time.time() - 7200,
        log_path="/scratch/runs/7/train.log",
        last_line=last,
        log_mtime=time.time() - 900,
        workers=4,
    )
    session = session_with_jobs(knowledge, tmp_path, job)
    code, _, drawn = drive_screen(session, "q", width=WIDTH)
    assert code == 0
    assert all(len(piece) <= WIDTH for piece in drawn_lines(drawn)), drawn
    headline = job.headline(time.time())
    words = drawn.split()
    for word in headline.split() + ["log", "quiet", "for", "15", "min:", "'step", "4118"]:
        assert word in words, (word, drawn)  # whole, never cut at the edge


def test_every_question_and_its_options_fit_80_columns(knowledge):
    for question in knowledge.tree.questions.values():
        choices = [(label, value) for value, label in question_choices(question)]
        choices.append(("Run a probe that answers this (nccl-debug-run, dataloader, gpu-health)", "probe"))
        choices.append(("<- back to the previous question", "back"))
        drawn = draw_menu(question.text, choices, width=WIDTH, escape="back")
        assert all(len(line) <= WIDTH for line in drawn.splitlines()), drawn
        assert flat(question.text) in flat(drawn), drawn
        for label, _ in choices:
            assert flat(label) in flat(drawn), (label, drawn)  # every word whole, in order


@pytest.mark.timeout(120)
def test_printed_paragraphs_are_wrapped_at_word_boundaries(knowledge, tmp_path):
    log = tmp_path / "train.log"
    shutil.copyfile(load_example(knowledge, "nanochat-collective").logs[0], log)
    session = session_with_jobs(knowledge, tmp_path)
    keys = [
        UP + ENTER,  # not running any more / describe it
        str(log) + ENTER,
        ENTER,  # phase: mid-run, from the log
        "2" + ENTER,  # step: random
        ENTER,  # errors: none
        "2" + ENTER,  # gpu: busy
        ENTER,  # progress: stopped
        "1" + ENTER,  # power: low
        "q",
    ]
    code, printed = drive(session, "".join(keys), width=WIDTH)
    assert code == 0, printed
    keep = verbatim_lines(session.report)
    long_lines = [line for line in printed.splitlines() if len(line) > WIDTH]
    # Only a command (copied whole) or a single word longer than the line may pass the edge.
    assert all(line.strip() in keep or " " not in line.strip() for line in long_lines), long_lines
    assert any(len(line) > WIDTH for line in long_lines), "this report has commands wider than 80"
    why = knowledge.tree.questions["errors"].why
    assert f"Why we ask: {flat(why)}" in flat(printed)  # every word kept, in order
    headline = session_headline(session.report)
    assert "pattern" not in headline and "phase" not in headline, headline  # words, not letters and ids
    summary = printed[printed.index(headline[:30]) :].splitlines()[1:3]
    assert all(len(line) <= WIDTH for line in summary), summary  # refilled, not cut at 100 then 80


def test_wrap_line_keeps_words_whole_and_hangs_under_the_text():
    line = "  - note: TOKENIZERS_PARALLELISM is unset: HF tokenizers' threads + forked DataLoader workers"
    wrapped = wrap_line(line, 40)
    assert all(len(w) <= 40 for w in wrapped)
    assert flat(" ".join(wrapped)) == flat(line)
    assert wrapped[0].startswith("  - note:") and all(w.startswith("    ") for w in wrapped[1:])
    assert wrap_line("x" * 90, 80) == ["x" * 90]  # a word longer than the line is not cut
    assert wrap_line("Why we ask: " + "word " * 20, 30)[1].startswith("  word")


def test_an_option_continues_under_its_own_text():
    title = "pid 4101 | python, one process (not distributed) | 4 DataLoader workers | up 2 h 0 min"
    fitted = fit_option(title, 40, 6).split("\n")
    assert all(len(line) <= 40 - 6 for line in fitted[:1])
    assert all(re.match(r" {6}\S", line) and len(line) <= 40 for line in fitted[1:]), fitted
    assert ESC not in "".join(fitted)


def test_the_report_refills_its_paragraphs_and_keeps_its_commands_whole(knowledge):
    from debug_stuck.core.report import Diagnosis, FixItem, Report, Verdict
    from debug_stuck.frontends.prompts import PlainSession

    why = "The pool thread waits for an Event nobody sets at prefetch_shard (future_result.py:43). " * 3
    command = 'python -c "import torch; print(torch.cuda.is_available(), torch.version.cuda, torch.__version__)"'
    fix = FixItem(title="Find what should set the Event", commands=[command], why=why)
    top = Diagnosis("thread-deadlock", "A thread waits on another", 0.9, [], [fix], "skills/thread-deadlock.md")
    report = Report(verdict=Verdict(hung=True, cause="thread-deadlock"), diagnoses=[top])
    out = io.StringIO()
    PlainSession(Session(knowledge), out, width=WIDTH).show_report(report)
    lines = out.getvalue().splitlines()
    assert f"       {command}" in lines  # copied whole: never wrapped
    assert all(len(line) <= WIDTH for line in lines if line.strip() != command), lines
    assert flat(why) in flat(out.getvalue())  # every word of the why, in order: none cut
    start = next(i for i, line in enumerate(lines) if line.startswith("     The pool thread"))
    assert all(len(line) > WIDTH - 12 for line in lines[start : start + 2])  # refilled, not ragged
    assert re.match(r" {5}\S", lines[start + 1])  # under its first line, as render_text fills it


def test_a_busy_process_whose_python_frames_stay_put_is_not_called_frozen():
    # the sixth hunt: ranks at 97-155% CPU inside one long native call (eigh, a backward) read "[frozen]"
    from debug_stuck.render.text import doing_phrase

    frames = [{"function": "zca_matrix", "file": "/job/train.py", "line": 16}]
    busy = {"pid": 7, "cpu_percent": 155.0, "stack": "frozen", "threads": [{"tid": 7, "frames": frames}]}
    assert doing_phrase(busy) == "zca_matrix (train.py:16) [same Python frames, busy in native code]"
    idle = dict(busy, cpu_percent=0.0)
    assert doing_phrase(idle) == "zca_matrix (train.py:16) [frozen]"
