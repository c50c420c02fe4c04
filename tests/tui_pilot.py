"""Driving the full-screen session with Textual's Pilot, shared by the TUI tests."""

from __future__ import annotations

import time

from debug_stuck.frontends.tui.screens.dialogs import InputDialog
from debug_stuck.frontends.tui.screens.pick import PickJobScreen
from debug_stuck.frontends.tui.screens.triage import TriageScreen


async def wait_for(pilot, condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.05)


def text_of(widget) -> str:
    return str(widget.render())


async def open_the_pid_dialog(pilot, app) -> None:
    """Step 1, once its scan is done: `a` opens the attach-by-PID dialog."""
    await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
    await pilot.press("a")
    await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), "the PID dialog")


async def attach_by_pid(pilot, app, pid: int) -> None:
    """Attach to `pid` from step 1 and wait for the triage screen."""
    await open_the_pid_dialog(pilot, app)
    await pilot.press(*str(pid), "enter")
    await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen), "the triage screen")
