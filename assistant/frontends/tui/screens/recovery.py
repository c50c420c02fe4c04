"""Step 6: save the report; stop or resume the job."""

from __future__ import annotations

import os
from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Input,
    Static,
)

from debug_stuck.frontends.tui.screens.dialogs import ConfirmDialog


def resume_lines(resume: dict) -> Text:
    """The resume command, and what it resumes from: a checkpoint, or step 0 when there is none."""
    text = Text()
    command = resume.get("command") or ""
    checkpoint = resume.get("checkpoint")
    if checkpoint:
        where = ", ".join(f"{k} {resume[k]}" for k in ("step", "epoch") if resume.get(k) is not None)
        label = f"{checkpoint} ({where})" if where else str(checkpoint)
        text.append(f"Resume from the last good checkpoint, {label}", style="bold")
        text.append(":\n")
    else:
        text.append("No usable checkpoint: this restarts training from step 0", style="bold yellow")
        text.append(" (everything the job trained is lost). To start again:\n")
    if command:
        text.append(f"    {command}\n", style="green")
    for skipped in resume.get("skipped") or []:
        text.append(f"skipped {skipped.get('path')}: {skipped.get('problem')}\n", style="dim")
    if resume.get("lost") and checkpoint:
        text.append(f"lost: {resume['lost']}\n", style="dim")
    return text


class RecoveryScreen(Screen):
    """Step 6: save the report; stop or resume the job once the recovery module is installed."""

    BINDINGS = [
        Binding("s", "save", "Save report"),
        Binding("c", "copy", "Copy fixes"),
        Binding("b", "back", "Back"),
        Binding("x", "stop", "Stop job"),
        Binding("z", "resume", "Resume"),
    ]
    DEFAULT_CSS = """
    RecoveryScreen VerticalScroll { padding: 0 1; }
    RecoveryScreen Static { height: auto; }
    #save-dir { margin: 0 0 1 0; }
    #recovery-buttons { height: 3; }
    #recovery-buttons Button { min-width: 10; margin-right: 1; }
    #saved { color: $success; }
    """

    def compose(self) -> ComposeResult:
        yield Static("Step 6 of 6: recovery", classes="step-title")
        with VerticalScroll():
            yield Static("Save the report as Markdown and JSON in this directory:")
            yield Input(value=self.app.session.save_dir or os.getcwd(), id="save-dir")
            with Horizontal(id="recovery-buttons"):
                yield Button(Text("Save report [s]"), id="save", variant="primary")
                yield Button(Text("Copy fixes [c]"), id="copy")
                yield Button(Text("Stop the job [x]"), id="stop", variant="error")
                yield Button(Text("Resume [z]"), id="resume")
                yield Button(Text("Quit [q]"), id="quit")
            yield Static("", markup=False, id="saved")
            yield Static("", markup=False, id="resume-info")
            yield Static("", markup=False, id="recovery-output")
        yield Footer(compact=True)

    def check_action(self, action: str, parameters) -> Optional[bool]:
        """x and z are in the footer only while they can act (a live job; stop until it is stopped)."""
        if action in ("stop", "resume"):
            return action in self.app.session.recovery_actions()
        return True

    def _show_actions(self) -> None:
        actions = self.app.session.recovery_actions()
        self.query_one("#stop", Button).display = "stop" in actions
        self.query_one("#resume", Button).display = "resume" in actions
        self.refresh_bindings()

    def on_mount(self) -> None:
        actions = self.app.session.recovery_actions()
        self._show_actions()
        report = self.app.session.report
        info = Text()
        if report is not None and report.resume:
            info.append_text(resume_lines(report.resume))
        elif not actions:
            if not self.app.session.live:
                why = "This is a replay of a recorded report: stop and resume act on live jobs only."
            else:
                why = "Stop and resume need a live job: attach to one in step 1."
            info.append(why, style="dim")
        self.query_one("#resume-info", Static).update(info)
        if self.app.session.saved is not None:
            self.query_one("#saved", Static).update(self.app.session.saved.one_line())
        self.query_one("#save", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id
        if button == "save":
            self.action_save()
        elif button == "copy":
            self.action_copy()
        elif button == "stop":
            self.action_stop()
        elif button == "resume":
            self.action_resume()
        elif button == "quit":
            self.app.action_quit_session()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_save()

    def action_save(self) -> None:
        self.query_one("#saved", Static).update("saving...")
        self.app.save_report(self.query_one("#save-dir", Input).value.strip())

    def show_saved(self, message) -> None:
        if message.saved is not None:
            self.query_one("#saved", Static).update(message.saved.one_line())
        else:
            self.query_one("#saved", Static).update(Text(f"not saved: {message.error}", style="bold red"))

    def action_copy(self) -> None:
        self.app.copy_fixes(None)

    def action_stop(self) -> None:
        if "stop" not in self.app.session.recovery_actions():
            return

        def done(yes: Optional[bool]) -> None:
            if yes:
                self.query_one("#recovery-output", Static).update("stopping the job...")
                self.app.run_recovery("stop")

        pids = ", ".join(map(str, self.app.session.pids))
        self.app.push_screen(
            ConfirmDialog(f"Stop the job (pid {pids}) and every process it started? The report is saved first."),
            done,
        )

    def action_resume(self) -> None:
        if "resume" in self.app.session.recovery_actions():
            self.query_one("#recovery-output", Static).update("finding the resume command...")
            self.app.run_recovery("resume")

    def show_recovery(self, message) -> None:
        text = Text(f"{message.action}: ", style="bold")
        text.append(message.text, style="" if message.ok else "red")
        self.query_one("#recovery-output", Static).update(text)
        self._show_actions()

    def action_back(self) -> None:
        self.app.pop_screen()
