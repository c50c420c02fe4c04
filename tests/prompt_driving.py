"""Driving `debug-stuck --plain` in tests: keystrokes through prompt_toolkit pipe input, the
printed text back (used by tests/test_prompts.py and tests/test_prompts_polish.py)."""

from __future__ import annotations

import io

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from debug_stuck.frontends.prompts import run_prompts
from debug_stuck.frontends.session.core import Session

ENTER = "\r"
UP = "\x1b[A"


def drive(session: Session, keys: str) -> tuple:
    """Run the prompts with these keystrokes; (exit code, everything printed). The pipe is closed
    after the keys, so a prompt nobody expected ends the run (EOF) instead of waiting forever."""
    out = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()
        try:
            code = run_prompts(session, out=out, input=pipe, output=DummyOutput())
        except EOFError:
            raise AssertionError("the prompts asked more than expected:\n" + out.getvalue()) from None
    return code, out.getvalue()
