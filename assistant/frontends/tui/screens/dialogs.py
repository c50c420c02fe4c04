"""The small dialogs: a line of input (PID, log paths), a yes/no confirmation, the help."""

from __future__ import annotations

from typing import Callable, List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    Input,
    Markdown,
    Static,
)

WIDE_COLUMNS = 110

HELP = """\
# debug-stuck: the interactive session

Six steps, each on its own screen:

1. **Pick the job**: the training jobs running on this machine, another process by PID, or
   "not running any more / describe it".
2. **Triage**: the tree's questions. An answer the live evidence or the log already gives is
   pre-filled and marked *suggested*: confirm it with Enter or pick another. Every question
   says why it is asked.
3. **Evidence**: processes (state, CPU, what each is doing), GPU utilization and power, and
   stacks grouped across ranks with the odd one out highlighted. Beside the questions on a
   wide terminal; `e` shows it on a narrow one.
4. **Probes**: the checks that answer a question or settle a cause. Those that run your code
   ask for consent first. `c` or Escape cancels a running probe (it is killed, with all it started).
5. **Diagnosis**: ranked causes with confidence and evidence, the fix, the playbook.
   `c` copies the fix commands (or prints them when you quit if there is no clipboard tool).
6. **Recovery**: save the report (Markdown and JSON); stop or resume the job where the
   recovery module is installed.

## Keys

| key | where | what |
| --- | --- | --- |
| arrows, Enter, mouse | everywhere | move, choose |
| `1`..`9` | triage, diagnosis | pick that answer / show that cause |
| `u` | triage | "I don't know" |
| `b` | triage, diagnosis, recovery | back |
| `e` | triage | show or hide the evidence pane |
| `r` | step 1, triage, diagnosis | scan again / re-read the evidence / diagnose again |
| `d` | triage | diagnose now, with the answers so far |
| `p` | triage, diagnosis | probes |
| `a` / `n` | step 1 | attach by PID / not running, describe it |
| `v` `f` `m` `l` | diagnosis | evidence, fix, playbook, live tabs |
| PgDn, Space / PgUp | diagnosis | scroll the tab (the arrows stay on the causes) |
| `c` | diagnosis, recovery | copy the fix commands |
| `s` | diagnosis, recovery | on to recovery / save the report |
| `x` / `z` | recovery | stop the job (asks first) / the resume command |
| `?` | everywhere | this help |
| `q`, Ctrl-C | everywhere | quit; nothing is left running (what is still stopping is named; `q` again: leave now) |

The same session without the full-screen interface: `debug-stuck --plain`.
Scripted, never prompting: `debug-stuck diagnose`.
"""


class InputDialog(ModalScreen[Optional[str]]):
    """One line of input; Enter gives it, Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    InputDialog { align: center middle; }
    InputDialog > Vertical { width: 70; max-width: 95%; height: auto; border: thick $primary; background: $surface;
        padding: 1 2; }
    InputDialog Static { height: auto; }
    """

    def __init__(
        self,
        title: str,
        prompt: str,
        allow_empty: bool = False,
        validate: Optional[Callable[[str], Optional[str]]] = None,
    ):
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.allow_empty = allow_empty
        self.validate = validate  # the value -> why it is not valid (None: valid)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield Static(self.prompt, markup=False, classes="hint")
            yield Input(id="dialog-input")
            yield Static("", markup=False, id="dialog-error", classes="error-line")
            yield Static("Enter: OK    Escape: cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """An invalid value keeps the dialog open with the reason: the Enter never reaches the
        screen below (where it would pick whatever is highlighted there)."""
        event.stop()
        value = event.value.strip()
        if not value and not self.allow_empty:
            self.query_one("#dialog-error", Static).update("type a value, or Escape to cancel")
            return
        problem = self.validate(value) if self.validate is not None and value else None
        if problem:
            self.query_one("#dialog-error", Static).update(problem)
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
        Binding("q", "app.quit_session", "Quit"),
    ]
    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical { width: 64; max-width: 95%; height: auto; border: thick $error; background: $surface;
        padding: 1 2; }
    ConfirmDialog Static { height: auto; }
    ConfirmDialog Horizontal { height: 3; }
    """

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, markup=False)
            with Horizontal():
                yield Button(Text("Yes [y]"), id="yes", variant="error")
                yield Button(Text("No [n]"), id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark", "close", "Close"), Binding("q", "app.quit_session", "Quit")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 98%; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(HELP)
            yield Static("Escape closes this help.", classes="hint")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class StoppingScreen(ModalScreen[None]):
    """After q or Ctrl-C: what is being stopped, until it has (the app then exits by itself)."""

    BINDINGS = [Binding("q", "app.quit_session", "Leave now")]

    DEFAULT_CSS = """
    StoppingScreen { align: center middle; }
    StoppingScreen > Vertical { width: 70; max-width: 95%; height: auto; border: thick $warning;
        background: $surface; padding: 1 2; }
    StoppingScreen Static { height: auto; }
    """

    def __init__(self, running: List[str]):
        super().__init__()
        self.running = running

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Quitting", style="bold"))
            yield Static("", markup=False, id="stopping")
            yield Static("It ends within its time limit. q or Ctrl-C again: leave the screen now.", classes="hint")

    def on_mount(self) -> None:
        self.show_stopping(self.running)

    def show_stopping(self, running: List[str]) -> None:
        self.query_one("#stopping", Static).update("Stopping " + "; ".join(running) + "...")
