"""Driving `debug-stuck --plain` in tests: keystrokes through prompt_toolkit pipe input, the
printed text back (used by tests/frontends/test_prompts.py, test_prompt_keys.py and test_plain_*.py)."""

from __future__ import annotations

import io
import re

from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.vt100 import Vt100_Output

from debug_stuck.frontends.prompts import PlainSession, QuitSession, run_prompts
from debug_stuck.frontends.session.core import Session

ENTER = "\r"
UP = "\x1b[A"
# The tests read what is printed, not how it is laid out: so wide that nothing wraps (a phrase
# they look for stays on one line, a finding on its own). The tests of the wrapping pass
# width=80, the terminal of the walkthrough.
WIDE = 1000


def drive(session: Session, keys: str, width: int = WIDE, output=None) -> tuple:
    """Run the prompts with these keystrokes; (exit code, everything printed). The pipe is closed
    after the keys, so a prompt nobody expected ends the run (EOF) instead of waiting forever."""
    out = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()
        try:
            code = run_prompts(session, out=out, input=pipe, output=output or DummyOutput(), width=width)
        except EOFError:
            raise AssertionError("the prompts asked more than expected:\n" + out.getvalue()) from None
    return code, out.getvalue()


class Screen(io.StringIO):
    """A terminal for prompt_toolkit to draw on, enough of one to read the menus back: text,
    carriage return, line feed, cursor moves and erasing. No line is cut at the edge here (a real
    terminal would), so a line drawn too long shows as one. `frames` holds the screen as it was
    after each write (the menus erase themselves once answered)."""

    CODE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b.|[\r\n]|[^\x1b\r\n]+")

    def __init__(self):
        super().__init__()
        self.rows = [[]]
        self.row = self.col = 0
        self.frames = []

    def write(self, data: str) -> int:
        for match in self.CODE.finditer(data):
            self._act(match)
        self.frames.append("\n".join("".join(row).rstrip() for row in self.rows))
        return len(data)

    def _act(self, match) -> None:
        text, final = match.group(0), match.group(2)
        n = int(match.group(1) or 1) if final and match.group(1).isdigit() else 1
        if final == "A":
            self.row = max(0, self.row - n)
        elif final == "B" or text == "\n":
            self.row += 1 if text == "\n" else n
        elif final == "C":
            self.col += n
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final == "J":  # erase below the cursor
            del self.rows[self.row + 1 :]
            self._line()[self.col :] = []
        elif final == "K":  # erase to the end of the line
            self._line()[self.col :] = []
        elif text == "\r":
            self.col = 0
        elif not text.startswith("\x1b"):
            line = self._line()
            line.extend(" " * (self.col - len(line)))
            line[self.col : self.col + len(text)] = list(text)
            self.col += len(text)

    def _line(self) -> list:
        while len(self.rows) <= self.row:
            self.rows.append([])
        return self.rows[self.row]


def drive_screen(session: Session, keys: str, width: int = 80) -> tuple:
    """drive(), with the menus drawn on a terminal of `width` columns; (exit code, everything
    printed, every screen the menus drew, one after the other)."""
    screen = Screen()
    terminal = Vt100_Output(screen, lambda: Size(rows=24, columns=width), term="xterm")
    code, printed = drive(session, keys, width=width, output=terminal)
    return code, printed, "\n\n".join(dict.fromkeys(screen.frames))


def draw_menu(message: str, choices: list, width: int = 80, **options) -> str:
    """One menu drawn on a terminal of `width` columns, then quit with `q`; the screen as drawn.
    (In a run, a menu whose keys are typed ahead is answered before it is drawn.)"""
    screen = Screen()
    terminal = Vt100_Output(screen, lambda: Size(rows=24, columns=width), term="xterm")
    with create_pipe_input() as pipe:
        pipe.send_text("q")
        plain = PlainSession(Session(), io.StringIO(), width, input=pipe, output=terminal)
        try:
            plain.select(message, choices, **options)
        except QuitSession:
            pass
    return max(screen.frames, key=len)  # the menu whole, before it erased itself


def drive_lines(session: Session, answers: str, width: int = 80) -> tuple:
    """The numbered prompts (as on a pipe, or TERM=dumb): `answers` typed a line each; (exit code,
    everything printed, prompts included)."""
    out = io.StringIO()
    code = run_prompts(session, out=out, width=width, lines=True, stdin=io.StringIO(answers))
    printed = out.getvalue()
    assert "the input ended" not in printed, "the prompts asked more than expected:\n" + printed
    return code, printed
