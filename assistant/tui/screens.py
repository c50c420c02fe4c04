"""The screens of the session, one per step, and the dialogs (PID, describe, probes, confirm, help)."""

from __future__ import annotations

import os
from typing import List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import (
    Button,
    Footer,
    Input,
    Markdown,
    OptionList,
    ProgressBar,
    Static,
    TabbedContent,
    TabPane,
)
from textual.widgets.option_list import Option

from assistant.errors import DebugStuckError
from assistant.session import ProbeOffer, ProbeOutcome, QuestionView, format_duration, recovery_module
from assistant.tui.widgets import EvidencePane

# Below this many columns the evidence pane and the causes list move out of the way.
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
| `1`..`9` | triage | pick that answer |
| `u` | triage | "I don't know" |
| `b` | triage, diagnosis, recovery | back |
| `e` | triage | show or hide the evidence pane |
| `r` | step 1, triage, diagnosis | scan again / re-read the evidence / diagnose again |
| `d` | triage | diagnose now, with the answers so far |
| `p` | triage, diagnosis | probes |
| `a` / `n` | step 1 | attach by PID / not running, describe it |
| `v` `f` `m` `l` | diagnosis | evidence, fix, playbook, live tabs |
| `c` | diagnosis, recovery | copy the fix commands |
| `s` | diagnosis, recovery | on to recovery / save the report |
| `?` | everywhere | this help |
| `q`, Ctrl-C | everywhere | quit; nothing is left running |

The same session without the full-screen interface: `debug-stuck --plain`.
Scripted, never prompting: `debug-stuck diagnose`.
"""


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(1, width - 3)] + "..."


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
        yield Footer()

    def on_mount(self) -> None:
        self.show_jobs()
        self.query_one("#jobs", OptionList).focus()

    def show_jobs(self) -> None:
        app = self.app
        now = app.clock()
        width = max(30, self.size.width - 8 if self.size.width else 72)
        options: List[Option | None] = []
        for i, job in enumerate(app.jobs):
            text = Text()
            text.append(job.headline(now), style="bold")
            text.append("\n  " + job.log_phrase(now, width=width - 24))
            text.append("\n  " + _clip(job.command, width), style="dim")
            options.append(Option(text, id=f"job-{i}"))
        if options:
            options.append(None)
        options.append(Option(Text("Attach to another process by PID...  [a]"), id="attach"))
        options.append(Option(Text("Not running any more / describe it  [n]"), id="describe"))
        jobs = self.query_one("#jobs", OptionList)
        jobs.set_options(options)
        jobs.highlighted = 0
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
            InputDialog("Attach to a process by PID", "PID of any process of the job (launcher, rank or worker)"),
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


class InputDialog(ModalScreen[Optional[str]]):
    """One line of input; Enter gives it, Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    InputDialog { align: center middle; }
    InputDialog > Vertical { width: 70; max-width: 95%; height: auto; border: thick $primary; background: $surface;
        padding: 1 2; }
    InputDialog Static { height: auto; }
    """

    def __init__(self, title: str, prompt: str, allow_empty: bool = False):
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield Static(self.prompt, markup=False, classes="hint")
            yield Input(id="dialog-input")
            yield Static("Enter: OK    Escape: cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if value or self.allow_empty:
            self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


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
        yield Footer()

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
            names = ", ".join(
                f"{p.name} ({'runs your code' if p.runs_user_code else 'reads only'})"
                + ("" if p.available else " [not in this version]")
                for p in view.probes
            )
            self.query_one("#question-probes", Static).update(f"[p] probes that answer this: {names}")
        else:
            self.query_one("#question-probes", Static).update("")
        answered = [f"{k}={a.value}" for k, a in session.triage.answers.items()]
        self.query_one("#answered", Static).update(
            ("Answers so far: " + ", ".join(answered)) if answered else "[b] back  [u] don't know  [d] diagnose now"
        )
        if not isinstance(app.focused, Input):
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

    def action_toggle_evidence(self) -> None:
        if self.has_class("-narrow"):
            self.toggle_class("-evidence")
        else:
            self.query_one("#evidence", EvidencePane).focus()

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


class DiagnosisScreen(Screen):
    """Step 5: ranked causes, their evidence, the fix, the playbook; the live evidence in a tab."""

    BINDINGS = [
        Binding("c", "copy", "Copy fixes"),
        Binding("p", "probes", "Probes"),
        Binding("s", "recovery", "Save/recover"),
        Binding("b", "back", "Back"),
        Binding("r", "rediagnose", "Again"),
        Binding("v", "tab('tab-evidence')", "Evidence", show=False),
        Binding("f", "tab('tab-fix')", "Fix", show=False),
        Binding("m", "tab('tab-playbook')", "Playbook", show=False),
        Binding("l", "tab('tab-live')", "Live", show=False),
    ]
    DEFAULT_CSS = """
    #verdict { padding: 0 1; height: auto; max-height: 5; }
    #diag-progress { padding: 0 1; height: auto; color: $text-muted; }
    #diag-body { height: 1fr; }
    #causes { width: 36; height: 1fr; }
    #diag-tabs { width: 1fr; height: 1fr; }
    #diag-tabs TabPane { height: 1fr; padding: 0; }
    #diag-tabs ContentSwitcher { height: 1fr; }
    .tab-scroll { height: 1fr; padding: 0 1; }
    DiagnosisScreen.-narrow #diag-body { layout: vertical; }
    DiagnosisScreen.-narrow #causes { width: 1fr; height: 4; }
    """

    def __init__(self):
        super().__init__()
        self.cause: Optional[str] = None

    def compose(self) -> ComposeResult:
        yield Static("Step 5 of 6: diagnosis", classes="step-title")
        yield Static("", markup=False, id="verdict")
        yield Static("", markup=False, id="diag-progress")
        with Horizontal(id="diag-body"):
            yield OptionList(id="causes")
            with TabbedContent(id="diag-tabs", initial="tab-evidence"):
                with TabPane("Evidence [v]", id="tab-evidence"):
                    with VerticalScroll(classes="tab-scroll"):
                        yield Static("", markup=False, id="cause-evidence")
                with TabPane("Fix [f]", id="tab-fix"):
                    with VerticalScroll(classes="tab-scroll"):
                        yield Static("", markup=False, id="cause-fix")
                with TabPane("Playbook [m]", id="tab-playbook"):
                    with VerticalScroll(classes="tab-scroll"):
                        yield Markdown("", id="playbook")
                with TabPane("Live [l]", id="tab-live"):
                    yield EvidencePane(id="evidence")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.app.size.width < WIDE_COLUMNS, "-narrow")
        self.show_diagnosis()
        self.show_evidence()
        self.show_gpus()

    def on_resize(self, event) -> None:
        self.set_class(event.size.width < WIDE_COLUMNS, "-narrow")

    def show_diagnosis(self) -> None:
        app = self.app
        report = app.session.report
        progress = self.query_one("#diag-progress", Static)
        if app.diagnosing:
            self.query_one("#verdict", Static).update(Text("Diagnosing...", style="bold"))
            progress.update(app.status_text or "")
            return
        if app.diagnosis_error or report is None:
            self.query_one("#verdict", Static).update(
                Text(f"No diagnosis: {app.diagnosis_error or 'not run yet'}", style="bold red")
            )
            progress.update("[r] try again   [b] back to the questions")
            return
        progress.update("")
        v = report.verdict
        hung = {True: "HUNG", False: "PROGRESSING", None: "not observed live"}[v.hung]
        head = Text()
        head.append(hung, style="bold red" if v.hung else "bold green" if v.hung is False else "bold")
        head.append(f"  pattern {report.pattern or '?'}  phase {v.phase}")
        if v.cause:
            head.append(f"  cause: {v.cause} ({v.confidence:.0%})", style="bold")
        head.append("\n" + v.summary)
        self.query_one("#verdict", Static).update(head)
        causes = self.query_one("#causes", OptionList)
        options = []
        for i, d in enumerate(report.diagnoses, 1):
            text = Text(f"{i}. ")
            text.append(d.cause, style="bold" if d.cause == v.cause else "")
            text.append(f"  {d.confidence:.0%}")
            options.append(Option(text, id=d.cause))
        causes.set_options(options)
        if options:
            index = next((i for i, d in enumerate(report.diagnoses) if d.cause == self.cause), 0)
            causes.highlighted = index
            self.show_cause(report.diagnoses[index].cause)
            causes.focus()

    def show_diagnosis_progress(self, text: str) -> None:
        self.query_one("#diag-progress", Static).update(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "causes" and event.option.id:
            self.show_cause(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "causes":
            self.action_tab("tab-fix")

    def show_cause(self, cause: str) -> None:
        report = self.app.session.report
        if report is None:
            return
        d = next((x for x in report.diagnoses if x.cause == cause), None)
        if d is None:
            return
        self.cause = cause
        ev = Text()
        ev.append(f"{d.title}\n", style="bold")
        ev.append(f"confidence {d.confidence:.0%}   playbook {d.playbook}\n\n")
        if d.summary:
            ev.append(d.summary + "\n\n", style="italic")
        ev.append("Evidence\n", style="bold underline")
        for e in d.evidence:
            where = ""
            if e.file:
                where = f" ({os.path.basename(e.file)}{':' + str(e.line) if e.line else ''})"
            ev.append(f"[{e.source}] ", style="cyan")
            ev.append(f"{e.detail}{where}\n")
        if d.checks:
            ev.append("\nConfirm with\n", style="bold underline")
            ev.append(d.checks[0] + "\n")
        if d.probes:
            ev.append(f"\n[p] settle it with a probe: {', '.join(d.probes)}\n", style="dim")
        self.query_one("#cause-evidence", Static).update(ev)
        fix = Text()
        if not d.fixes:
            fix.append("The playbook gives no commands for this cause.")
        for i, item in enumerate(d.fixes, 1):
            fix.append(f"{i}. {item.title}\n", style="bold")
            for command in item.commands:
                for line in command.splitlines():
                    fix.append(f"    {line}\n", style="green")
                fix.append("\n")
        fix.append("[c] copy these commands", style="dim")
        self.query_one("#cause-fix", Static).update(fix)
        book = self.app.session.knowledge.playbooks.get(cause)
        body = f"# {book.title}\n\n{book.body}" if book is not None else f"No playbook for {cause}."
        self.query_one("#playbook", Markdown).update(body)

    def show_evidence(self) -> None:
        app = self.app
        self.query_one("#evidence", EvidencePane).show_report(app.evidence)

    def show_evidence_progress(self, text: str) -> None:
        self.query_one("#evidence", EvidencePane).show_status(text)

    def show_gpus(self) -> None:
        self.query_one("#evidence", EvidencePane).show_gpus(self.app.session.gpu, self.app.session.job_gpus())

    def action_tab(self, tab: str) -> None:
        self.query_one("#diag-tabs", TabbedContent).active = tab

    def action_copy(self) -> None:
        if self.app.session.report is not None:
            self.app.copy_fixes(self.cause)

    def action_probes(self) -> None:
        offers = self.app.session.diagnosis_probes()
        if not offers:
            self.app.notify("the playbooks name no probe for these causes", timeout=4)
            return
        self.app.push_screen(ProbeScreen(offers, rerank=True))

    def action_recovery(self) -> None:
        if self.app.session.report is not None and not self.app.diagnosing:
            self.app.open_recovery()

    def action_rediagnose(self) -> None:
        if not self.app.diagnosing:
            self.app.start_diagnosis()

    def action_back(self) -> None:
        self.app.pop_screen()
        for screen in self.app.screen_stack:
            if isinstance(screen, TriageScreen):
                self.app.session.back()  # re-ask the last question
                screen.show_question()


class ProbeScreen(ModalScreen[None]):
    """Step 4: the probes offered here; consent for those that run code; progress; cancel."""

    BINDINGS = [
        Binding("escape", "close", "Close / cancel"),
        Binding("c", "cancel", "Cancel probe"),
    ]
    DEFAULT_CSS = """
    ProbeScreen { align: center middle; }
    #probe-dialog { width: 90; max-width: 98%; height: auto; max-height: 95%; border: thick $primary;
        background: $surface; padding: 0 1; }
    #probe-list { height: auto; max-height: 7; }
    #probe-detail { height: auto; }
    #probe-input { display: none; }
    #probe-input.-wanted { display: block; }
    #probe-buttons { height: 3; }
    #probe-progress { display: none; }
    #probe-progress.-running { display: block; }
    #probe-result { height: auto; }
    """

    def __init__(self, offers: List[ProbeOffer], rerank: bool):
        super().__init__()
        self.offers = {o.name: o for o in offers}
        self.rerank = rerank
        self.selected: Optional[ProbeOffer] = None
        self.running = False
        self.completed = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="probe-dialog"):
            yield Static("Step 4 of 6: probes", classes="step-title")
            options = []
            for o in self.offers.values():
                tag = "runs your code" if o.runs_user_code else "reads only"
                if not o.available:
                    tag = "not in this version"
                options.append(Option(Text(f"{o.name}  ({tag})"), id=o.name, disabled=not o.available))
            yield OptionList(*options, id="probe-list")
            yield Input(id="probe-input")
            with Horizontal(id="probe-buttons"):
                yield Button("Run", id="probe-run", variant="primary")
                yield Button("Close", id="probe-close")
            yield ProgressBar(id="probe-progress", show_eta=False)
            yield Static("", markup=False, id="probe-result")
            yield Static("", markup=False, id="probe-detail")

    def on_mount(self) -> None:
        first = next((o for o in self.offers.values() if o.available), None)
        self._select(first)
        self.query_one("#probe-list", OptionList).focus()

    def _select(self, offer: Optional[ProbeOffer]) -> None:
        self.selected = offer
        detail = Text()
        run = self.query_one("#probe-run", Button)
        field = self.query_one("#probe-input", Input)
        if offer is None:
            detail.append("None of these probes is available in this version.")
            run.disabled = True
            self.query_one("#probe-detail", Static).update(detail)
            return
        run.disabled = self.running
        detail.append(f"{offer.name}: ", style="bold")
        detail.append(f"{offer.summary}\n")
        if offer.why:
            detail.append(f"Offered because it {offer.why}\n", style="dim")
        detail.append(f"Time limit {offer.timeout:g} s; c or Escape cancels it while it runs.\n")
        if offer.runs_user_code:
            detail.append(
                "This probe RUNS YOUR CODE (in its own process group, killed at its time limit). "
                "Run it only if that is safe here. Pressing 'Run: I consent' is your consent.\n",
                style="bold yellow",
            )
            run.label = "Run: I consent"
        else:
            run.label = "Run"
        field.set_class(offer.input_kind is not None, "-wanted")
        field.placeholder = offer.input_prompt or ""
        self.query_one("#probe-detail", Static).update(detail)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id in self.offers and not self.running:
            self._select(self.offers[event.option.id])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        offer = self.offers.get(event.option.id or "")
        if offer is None or self.running:
            return
        self._select(offer)
        if offer.runs_user_code or offer.input_kind:
            # consent (and any input) is given with the Run button, never by Enter on the list
            target = self.query_one("#probe-input", Input) if offer.input_kind else self.query_one("#probe-run")
            target.focus()
        else:
            self._run()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.selected is not None and not self.selected.runs_user_code:
            self._run()
        else:
            self.query_one("#probe-run", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "probe-run":
            self._run()
        elif event.button.id == "probe-close":
            self.action_close()

    def _run(self) -> None:
        offer = self.selected
        if offer is None or self.running or not offer.available:
            return
        self.running = True
        self.query_one("#probe-run", Button).disabled = True
        bar = self.query_one("#probe-progress", ProgressBar)
        bar.update(total=offer.timeout, progress=0)
        bar.add_class("-running")
        self.query_one("#probe-result", Static).update(f"running {offer.name}...  [c] cancel")
        value = self.query_one("#probe-input", Input).value
        self.app.start_probe(offer.name, offer.runs_user_code, value)

    def show_probe_progress(self, message) -> None:
        if self.running:
            self.query_one("#probe-progress", ProgressBar).update(
                total=message.limit, progress=min(message.elapsed, message.limit)
            )
            self.query_one("#probe-result", Static).update(
                f"running {message.name}: {format_duration(message.elapsed)} of {message.limit:g} s  [c] cancel"
            )

    def show_probe_done(self, outcome: ProbeOutcome) -> None:
        self.running = False
        self.query_one("#probe-progress", ProgressBar).remove_class("-running")
        self.query_one("#probe-run", Button).disabled = False
        text = Text()
        text.append(outcome.one_line() + "\n", style="bold")
        for finding in outcome.findings[:6]:
            cause = f" [{finding.get('cause')}]" if finding.get("cause") else ""
            text.append(f"  - {finding.get('severity')}: {finding.get('message')}{cause}\n")
        if outcome.completed:
            self.completed = True
            if self.selected is not None and self.selected.runs_user_code:
                text.append("Its result goes into the report.", style="dim")
            else:
                text.append("Its findings weigh in the ranking.", style="dim")
        self.query_one("#probe-result", Static).update(text)

    def action_cancel(self) -> None:
        if self.running:
            self.app.cancel_probe()
            self.query_one("#probe-result", Static).update("cancelling: stopping the probe and all it started...")

    def action_close(self) -> None:
        if self.running:
            self.action_cancel()
            return
        self.dismiss(None)
        if self.completed and self.rerank:
            self.app.start_diagnosis()


class RecoveryScreen(Screen):
    """Step 6: save the report; stop or resume the job once the recovery module is installed."""

    BINDINGS = [
        Binding("s", "save", "Save report"),
        Binding("c", "copy", "Copy fixes"),
        Binding("b", "back", "Back"),
        Binding("x", "stop", "Stop job", show=False),
        Binding("z", "resume", "Resume", show=False),
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
        yield Footer()

    def on_mount(self) -> None:
        actions = self.app.session.recovery_actions()
        self.query_one("#stop", Button).display = "stop" in actions
        self.query_one("#resume", Button).display = "resume" in actions
        report = self.app.session.report
        info = Text()
        if report is not None and report.resume:
            info.append("Resume from the last good checkpoint:\n", style="bold")
            info.append(f"    {report.resume.get('command', '')}\n", style="green")
        elif not actions:
            if not self.app.session.live:
                why = "This is a replay of a recorded report: stop and resume act on live jobs only."
            elif recovery_module() is None:
                why = "Stop and resume actions appear here once the recovery module is installed."
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

    def action_back(self) -> None:
        self.app.pop_screen()


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]
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
    BINDINGS = [Binding("escape,question_mark", "close", "Close")]
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
