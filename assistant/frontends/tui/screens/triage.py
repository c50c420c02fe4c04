"""Step 2 and 3: the questions, each pre-filled from the evidence, beside the evidence pane."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import (
    Footer,
    Input,
    OptionList,
    Static,
)
from textual.widgets.option_list import Option

from debug_stuck.errors import DebugStuckError
from debug_stuck.frontends.session.triage import QuestionView
from debug_stuck.frontends.tui.screens.dialogs import WIDE_COLUMNS
from debug_stuck.frontends.tui.screens.probe import ProbeScreen
from debug_stuck.frontends.tui.widgets import EvidencePane


class TriageScreen(Screen):
    """Step 2 (with step 3 beside it): one question at a time, pre-filled from the evidence."""

    BINDINGS = [
        Binding("b", "back", "Back"),
        Binding("u", "unknown", "Don't know"),
        Binding("p", "probes", "Probes"),
        Binding("e", "toggle_evidence", "Evidence"),
        Binding("r", "refresh", "Re-read"),
        Binding("d", "diagnose", "Diagnose now"),
    ] + [Binding(str(n), f"choose({n - 1})", show=False) for n in range(1, 10)]
    DEFAULT_CSS = """
    #triage-body { height: 1fr; }
    #question-panel { width: 1fr; }
    TriageScreen #evidence { width: 1fr; border-left: vkey $primary; }
    TriageScreen.-narrow #evidence { display: none; }
    TriageScreen.-narrow.-evidence #evidence { display: block; border-left: none; }
    TriageScreen.-narrow.-evidence #question-panel { display: none; }
    #question-text { text-style: bold; padding: 1 1 0 1; height: auto; }
    #why { color: $text-muted; padding: 0 1; height: auto; }
    #suggestion { color: $success; padding: 1 1 0 1; height: auto; }
    #choices { height: auto; max-height: 10; margin: 1 1 0 1; }
    #question-probes { padding: 1 1 0 1; height: auto; }
    #answered { padding: 0 1; height: auto; }
    """

    def __init__(self):
        super().__init__()
        self.view: Optional[QuestionView] = None
        self._shown_suggestion: Optional[tuple] = None

    def compose(self) -> ComposeResult:
        yield Static("", markup=False, id="triage-title", classes="step-title")
        with Horizontal(id="triage-body"):
            with VerticalScroll(id="question-panel"):
                yield Static("", markup=False, id="question-text")
                yield Static("", markup=False, id="why")
                yield Static("", markup=False, id="suggestion")
                yield OptionList(id="choices")
                yield Static("", markup=False, id="question-probes", classes="hint")
                yield Static("", markup=False, id="answered", classes="hint")
            yield EvidencePane(id="evidence")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._fit(self.app.size.width)
        self.show_evidence()
        self.show_gpus()
        self.show_question()

    def on_resize(self, event) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        self.set_class(width < WIDE_COLUMNS, "-narrow")

    # -- the question ----------------------------------------------------------------------
    def show_question(self) -> None:
        app = self.app
        session = app.session
        view = session.next_question()
        self.view = view
        if view is None:
            if self.is_current:
                app.start_diagnosis()
            return
        q = view.question
        self.query_one("#triage-title", Static).update(f"Step 2 of 6: triage, question {view.number} of {view.total}")
        self.query_one("#question-text", Static).update(q.text)
        self.query_one("#why", Static).update(f"Why we ask: {q.why}")
        suggestion = view.suggestion
        self._show_suggestion_line()
        options = []
        highlight = 0
        for i, (value, label) in enumerate(view.choices):
            text = Text(f"{i + 1}. " if i < 9 else "   ")
            text.append(label)
            if suggestion is not None and value == suggestion.value:
                text.append("   (suggested)", style="bold green")
            elif suggestion is None and value == view.default:
                text.append("   (usual answer)", style="dim")
            if value == view.default:
                highlight = i
            options.append(Option(text, id=value))
        choices = self.query_one("#choices", OptionList)
        choices.set_options(options)
        choices.highlighted = highlight
        self._shown_suggestion = (q.key, suggestion.value if suggestion else None)
        if view.probes:
            names = ", ".join(f"{p.name} ({p.safety_text})" for p in view.probes)
            self.query_one("#question-probes", Static).update(f"[p] probes that answer this: {names}")
        else:
            self.query_one("#question-probes", Static).update("")
        answered = [f"{k}={a.value}" for k, a in session.triage.answers.items()]
        self.query_one("#answered", Static).update(
            ("Answers so far: " + ", ".join(answered)) if answered else "[b] back  [u] don't know  [d] diagnose now"
        )
        if not isinstance(app.focused, Input) and not self._evidence_only:
            choices.focus()

    def _show_suggestion_line(self) -> None:
        view = self.view
        if view is None:
            return
        if view.suggestion is not None:
            origin = "the log" if view.suggestion.source == "log" else "live evidence"
            line = f"Pre-filled from {origin}: {view.suggestion.prompt}"
        elif self.app.collecting:
            line = "Reading the live evidence; it may answer this one..."
        else:
            line = "Nothing read answers this one: your call."
        self.query_one("#suggestion", Static).update(line)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "choices" and event.option.id:
            self._answer(event.option.id)

    def _answer(self, value: str) -> None:
        if self.view is None:
            return
        try:
            self.app.session.answer(self.view.key, value)
        except DebugStuckError as exc:  # bad input: say so and ask again
            self.app.notify(exc.one_line(), severity="error")
            return
        self.show_question()

    def action_choose(self, index: int) -> None:
        if self.view is not None and 0 <= index < len(self.view.choices):
            self._answer(self.view.choices[index][0])

    def action_unknown(self) -> None:
        self._answer("unknown")

    def action_back(self) -> None:
        if self.app.session.back() is None:
            self.app.pop_screen()  # back to step 1
            return
        self.show_question()

    def action_diagnose(self) -> None:
        self.app.start_diagnosis()

    def action_refresh(self) -> None:
        if not self.app.collecting:
            self.app.start_evidence()

    @property
    def _evidence_only(self) -> bool:
        """On a narrow terminal with the evidence shown in place of the question."""
        return self.has_class("-narrow") and self.has_class("-evidence")

    def action_toggle_evidence(self) -> None:
        """Show the evidence (focused: the arrows scroll it), or go back to the question (focused:
        Enter answers). On a wide terminal both are shown and `e` moves the focus between them."""
        pane = self.query_one("#evidence", EvidencePane)
        if self.has_class("-narrow"):
            self.toggle_class("-evidence")
            showing = self.has_class("-evidence")
        else:
            showing = not pane.has_focus_within
        if showing:
            pane.focus()
        else:
            self.query_one("#choices", OptionList).focus()

    def action_probes(self) -> None:
        offers = list(self.view.probes) if self.view else []
        seen = {o.name for o in offers}
        offers += [o for o in self.app.session.diagnosis_probes(self.app.evidence) if o.name not in seen]
        if not offers:
            self.app.notify("no probe is offered here yet", timeout=4)
            return
        self.app.push_screen(ProbeScreen(offers, rerank=False))

    # -- the evidence ----------------------------------------------------------------------
    def show_evidence(self) -> None:
        app = self.app
        pane = self.query_one("#evidence", EvidencePane)
        if app.collecting:
            pane.show_report(app.evidence, app.status_text or "collecting live evidence...")
        elif app.evidence_error:
            pane.show_report(app.evidence, f"could not read the job: {app.evidence_error}")
        else:
            pane.show_report(app.evidence)
        if self.view is not None:
            suggestion = app.session.suggestions.get(self.view.key)
            if self._shown_suggestion != (self.view.key, suggestion.value if suggestion else None):
                self.show_question()
            else:
                self._show_suggestion_line()

    def show_evidence_progress(self, text: str) -> None:
        self.query_one("#evidence", EvidencePane).show_status(text)

    def show_gpus(self) -> None:
        self.query_one("#evidence", EvidencePane).show_gpus(self.app.session.gpu, self.app.session.job_gpus())
