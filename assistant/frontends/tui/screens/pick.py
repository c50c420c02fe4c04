"""Step 1: pick the job (running jobs, a PID, or describe one that is not running)."""

from __future__ import annotations

from typing import List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import (
    Footer,
    OptionList,
    Static,
)
from textual.widgets.option_list import Option

from debug_stuck.frontends.tui.screens.dialogs import InputDialog
from debug_stuck.render.text import clip

REDRAW_SECONDS = 5.0


def pid_problem(text: str) -> Optional[str]:
    """Why `text` is not a PID to attach to, or None. Only what can be told at once (a number, a
    process that exists); the rest (rights, not Python) is said by the attach itself."""
    import psutil

    text = text.strip()
    if not text.isdigit() or int(text) <= 0:
        return f"{text!r} is not a PID: give the number of a process of the job, e.g. 12345"
    if not psutil.pid_exists(int(text)):
        return f"no process {text} on this machine (it may have exited): give another PID"
    return None


class PickJobScreen(Screen):
    """Step 1: the training jobs here, a PID, or no live job."""

    BINDINGS = [
        Binding("a", "attach_pid", "Attach PID"),
        Binding("n", "describe", "Not running"),
        Binding("r", "rescan", "Scan again"),
    ]
    DEFAULT_CSS = """
    #jobs { height: 1fr; margin: 1 1 0 1; }
    #jobs-status { padding: 1 1 0 1; height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static("Step 1 of 6: pick the job", classes="step-title")
        yield Static("", markup=False, id="jobs-status")
        yield OptionList(id="jobs")
        yield Static("", markup=False, id="attach-error", classes="error-line")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.show_jobs()
        self.query_one("#jobs", OptionList).focus()
        # "up 45 s" and "log quiet for 36 s" are read against the clock: redrawn while shown
        self.set_interval(REDRAW_SECONDS, self._tick)

    def _tick(self) -> None:
        if self.is_current and not self.app.discovering:
            self.show_jobs()

    def on_screen_resume(self) -> None:
        """Back at step 1 (from triage): the jobs are scanned again, since they may have moved on,
        ended, or been stopped from the session."""
        if not self.app.discovering and self.app.jobs_scanned:
            self.app.start_discovery()

    def show_jobs(self) -> None:
        app = self.app
        now = app.clock()
        width = max(30, self.size.width - 8 if self.size.width else 72)
        options: List[Option | None] = []
        for i, job in enumerate(app.jobs):
            text = Text()
            text.append(job.headline(now), style="bold")
            text.append("\n  " + job.log_phrase(now, width=width - 24))
            text.append("\n  " + clip(job.command, width), style="dim")
            options.append(Option(text, id=f"job-{i}"))
        if options:
            options.append(None)
        options.append(Option(Text("Attach to another process by PID...  [a]"), id="attach"))
        options.append(Option(Text("Not running any more / describe it  [n]"), id="describe"))
        jobs = self.query_one("#jobs", OptionList)
        keep = jobs.highlighted
        jobs.set_options(options)
        jobs.highlighted = keep if keep is not None and keep < jobs.option_count else 0
        if app.discovering:
            status = "Looking for training jobs on this machine..."
        elif app.jobs_error:
            status = f"Could not scan this machine: {app.jobs_error}"
        elif app.jobs:
            status = f"{len(app.jobs)} training job(s) on this machine. Which one is stuck?"
        else:
            status = (
                "No training job found here (Python processes that load libtorch). "
                "Attach to a process by PID, or describe the job."
            )
        self.query_one("#jobs-status", Static).update(status)

    def show_attach_error(self, error: Optional[str]) -> None:
        self.query_one("#attach-error", Static).update(error or "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        option_id = event.option.id or ""
        if option_id.startswith("job-"):
            self.app.attach_job(self.app.jobs[int(option_id[4:])])
        elif option_id == "attach":
            self.action_attach_pid()
        elif option_id == "describe":
            self.action_describe()

    def action_attach_pid(self) -> None:
        def done(value: Optional[str]) -> None:
            if value:
                self.show_attach_error("")
                self.app.attach_pid(value)

        self.app.push_screen(
            InputDialog(
                "Attach to a process by PID",
                "PID of any process of the job (launcher, rank or worker)",
                validate=pid_problem,
            ),
            done,
        )

    def action_describe(self) -> None:
        def done(value: Optional[str]) -> None:
            if value is not None:
                self.show_attach_error("")
                self.app.describe_job(value)

        self.app.push_screen(
            InputDialog(
                "Not running any more: describe it",
                "training log path(s), space-separated (optional: Enter to skip)",
                allow_empty=True,
            ),
            done,
        )

    def action_rescan(self) -> None:
        self.app.start_discovery()
