"""`debug-stuck --plain` where menus cannot draw: stdout not a terminal (`debug-stuck --plain | tee
log`), TERM=dumb, NO_COLOR. The prompts are numbered lines then, read as a number: every option
readable in what was captured, not one escape code in it."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time

import pytest

pytest.importorskip("questionary")

from prompt_driving import drive_lines  # noqa: E402

from conftest import example_request as load_example  # noqa: E402
from debug_stuck.frontends.prompts import needs_numbered_lines  # noqa: E402
from debug_stuck.frontends.session.core import Session  # noqa: E402

ESC = "\x1b"
FIXED_OPTIONS = ("Attach to another process by PID", "Not running any more / describe it")


def flat(text: str) -> str:
    return " ".join(text.split())


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_menus_draw_only_on_a_terminal_that_can_take_escape_codes():
    assert needs_numbered_lines(io.StringIO(), {"TERM": "xterm-256color"})  # a pipe or a file
    assert not needs_numbered_lines(Tty(), {"TERM": "xterm-256color"})
    assert needs_numbered_lines(Tty(), {"TERM": "dumb"})
    assert needs_numbered_lines(Tty(), {"TERM": "xterm-256color", "NO_COLOR": "1"})
    assert not needs_numbered_lines(Tty(), {"TERM": "xterm-256color", "NO_COLOR": ""})  # no-color.org: set, not empty


@pytest.mark.timeout(120)
def test_the_numbered_prompts_walk_the_whole_session_without_an_escape_code(knowledge, tmp_path):
    log = tmp_path / "train.log"
    shutil.copyfile(load_example(knowledge, "nanochat-collective").logs[0], log)
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []
    answers = [
        "2",  # not running any more / describe it
        str(log),
        "",  # phase: mid-run, from the log (Enter: the suggestion)
        "2",  # step: random
        "",  # errors: none
        "2",  # gpu: busy
        "",  # progress: stopped
        "1",  # power: low
        "x",  # what next: not a number: asked again
        "3",  # what next (1 probe, 2 copy, 3 save, 4 show, 5 quit): save
        "",  # in the default directory
        "",  # what next: quit (the default once saved)
    ]
    code, printed = drive_lines(session, "\n".join(answers) + "\n")
    assert code == 0, printed
    assert ESC not in printed
    assert "Type a number from 1 to 5." in printed
    assert sorted(p.suffix for p in tmp_path.glob("debug-stuck-report-*")) == [".json", ".md"]
    text = flat(printed)
    for option in FIXED_OPTIONS + ("Copy the fix commands", "Save the report (Markdown and JSON)", "Quit"):
        assert option in text, option
    for key in session.triage.order:  # every question asked, and every option it offered
        question = knowledge.tree.questions[key]
        assert flat(question.text) in text, key
        for value, meaning in question.values.items():
            assert flat(f"{value}: {meaning}") in text, (key, value)
    assert "4) unknown: I don't know" in printed and "5) <- back to the previous question" in printed


@pytest.mark.timeout(60)
def test_the_numbered_prompts_ask_again_until_the_answer_is_valid(knowledge, tmp_path):
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []
    # by PID: not a number, then Enter alone: back to the list; describe it, no log; q at question 1
    code, printed = drive_lines(session, "1\nabc\n\n2\n\nq\n")
    assert code == 0, printed
    assert "a number, or nothing to go back" in printed
    assert printed.count("Step 1 of 5: looking for training jobs") == 2, printed
    assert "debug-stuck: quit; nothing is left running" in printed


@pytest.mark.timeout(60)
def test_the_end_of_the_input_ends_the_session(knowledge, tmp_path):
    session = Session(knowledge, save_dir=str(tmp_path))
    session.discover = lambda: []
    out = io.StringIO()
    from debug_stuck.frontends.prompts import run_prompts

    assert run_prompts(session, out=out, lines=True, stdin=io.StringIO("")) == 0
    assert "the input ended; nothing is left running" in out.getvalue()
    assert session.stopping.is_set()


# -- the real command, on a terminal (a pty) ----------------------------------------------------
def run_plain(tmp_path, env: dict, stdout_on_the_terminal: bool, keys=b"q\r") -> tuple:
    """`debug-stuck --plain` with a terminal (80x24) on stdin, and on stdout too or a pipe there;
    `keys` typed once it has listed the jobs and asks to pick one (bytes, or a function of what it
    wrote so far that returns them). (exit code, what it wrote to stdout)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS", "LINES")}
    environ.update(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "debug_stuck", "--plain"],
        stdin=slave,
        stdout=slave if stdout_on_the_terminal else subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environ,
        cwd=tmp_path,
    )
    os.close(slave)
    source = master if stdout_on_the_terminal else proc.stdout.fileno()
    got, typed = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([source], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(source, 65536)
                except OSError:  # the terminal closed: the command ended
                    chunk = b""
                if not chunk:
                    break
                got += chunk
            if not typed and b"Which job is stuck?" in got and b"quits)" in got:
                os.write(master, keys(got) if callable(keys) else keys)
                typed = True
            if stdout_on_the_terminal and not ready and proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        if proc.stdout is not None:
            proc.stdout.close()
    return code, got.decode("utf-8", "replace")


@pytest.mark.timeout(120)
def test_plain_into_a_pipe_writes_every_option_and_no_escape_code(tmp_path, knowledge):
    # describe it, no log, q at question 1; the option's number depends on the jobs this machine runs
    def describe_it(listed: bytes) -> bytes:
        number = re.search(rb"(\d+)\) Not running any more", listed).group(1)
        return number + b"\r\rq\r"

    code, out = run_plain(tmp_path, {"TERM": "xterm-256color"}, stdout_on_the_terminal=False, keys=describe_it)
    assert code == 0, out
    assert ESC not in out, repr(out)
    phase = knowledge.tree.questions["phase"]
    options = list(FIXED_OPTIONS) + [f"{value}: {meaning}" for value, meaning in phase.values.items()]
    for option in options + ["unknown: I don't know", "<- back to the job list"]:
        assert option in flat(out), (option, out)
    assert "debug-stuck: quit; nothing is left running" in out


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "env", [{"TERM": "dumb"}, {"TERM": "xterm-256color", "NO_COLOR": "1"}], ids=["dumb", "no-color"]
)
def test_plain_on_a_terminal_that_takes_no_escape_codes_writes_none(tmp_path, env):
    code, out = run_plain(tmp_path, env, stdout_on_the_terminal=True)
    assert code == 0, out
    assert ESC not in out, repr(out)
    for option in FIXED_OPTIONS:
        assert option in out, out
