"""Step 5: the ranked causes, with evidence, fix, playbook and live evidence for the one selected."""

from __future__ import annotations

import os
from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import (
    Footer,
    Markdown,
    OptionList,
    Static,
    TabbedContent,
    TabPane,
)
from textual.widgets.option_list import Option

from debug_stuck.frontends.tui.screens.dialogs import WIDE_COLUMNS
from debug_stuck.frontends.tui.screens.probe import ProbeScreen
from debug_stuck.frontends.tui.widgets import EvidencePane
from debug_stuck.render import verdict_lead, verdict_names, verdict_tells, verdict_words
from debug_stuck.render.advice import (
    check_heading,
    edit_heading,
    first_runnable_check,
    fix_heading,
    needs_line,
    probe_line,
)
from debug_stuck.render.text import chain_heading, chain_lines, session_headline

SHORT_ROWS = 32


class DiagnosisScreen(Screen):
    """Step 5: ranked causes, their evidence, the fix, the playbook; the live evidence in a tab."""

    TABS = Binding.Group("Tabs")
    BINDINGS = [
        Binding("c", "copy", "Copy"),
        Binding("p", "probes", "Probes"),
        Binding("s", "recovery", "Save"),
        Binding("b", "back", "Back"),
        Binding("r", "rediagnose", "Again"),
        Binding("v", "tab('tab-evidence')", "Evidence", group=TABS),
        Binding("f", "tab('tab-fix')", "Fix", group=TABS),
        Binding("m", "tab('tab-playbook')", "Playbook", group=TABS),
        Binding("l", "tab('tab-live')", "Live", group=TABS),
        # The arrows move among the causes; these scroll the tab beside them, wherever the focus is.
        Binding("space", "scroll_detail(1)", "Scroll", key_display="PgDn"),
        Binding("pagedown", "scroll_detail(1)", "Scroll down", show=False, priority=True),
        Binding("pageup", "scroll_detail(-1)", "Scroll up", show=False, priority=True),
    ] + [Binding(str(n), f"pick_cause({n - 1})", show=False) for n in range(1, 10)]
    DEFAULT_CSS = """
    #verdict { padding: 0 1; height: auto; }
    #diag-progress { padding: 0 1; height: auto; color: $text-muted; }
    #diag-body { height: 1fr; }
    #causes { width: 36; height: 1fr; }
    #diag-tabs { width: 1fr; height: 1fr; }
    #diag-tabs TabPane { height: 1fr; padding: 0; }
    #diag-tabs ContentSwitcher { height: 1fr; }
    .tab-scroll { height: 1fr; padding: 0 1; }
    DiagnosisScreen.-narrow #diag-body { layout: vertical; }
    DiagnosisScreen.-narrow #causes { width: 1fr; height: auto; max-height: 8; border: none; padding: 0 1; }
    DiagnosisScreen.-narrow #causes:focus { border: none; }
    DiagnosisScreen.-short #verdict { max-height: 3; }
    DiagnosisScreen.-short.-narrow #causes { max-height: 3; }
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
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._fit(self.app.size)
        self.show_diagnosis()
        self.show_evidence()
        self.show_gpus()

    def on_resize(self, event) -> None:
        self._fit(event.size)
        self.show_diagnosis()

    def _fit(self, size) -> None:
        """A short terminal keeps the verdict to its first lines and the causes to three rows, so
        the tab below has room; the whole verdict opens the Evidence tab instead."""
        self.set_class(size.width < WIDE_COLUMNS, "-narrow")
        self.set_class(size.height < SHORT_ROWS, "-short")

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
        head = Text()
        head.append(
            session_headline(report), style="bold red" if v.hung else "bold green" if v.hung is False else "bold"
        )
        short = self.has_class("-short")
        head.append(
            "\n" + (verdict_lead(report, for_session=True) if short else verdict_words(report, for_session=True))
        )
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

    def action_pick_cause(self, index: int) -> None:
        """A digit shows that cause, as the digits answer a question in triage."""
        causes = self.query_one("#causes", OptionList)
        if 0 <= index < causes.option_count:
            causes.highlighted = index

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
        if not verdict_names(report, d):  # the verdict above names the top cause
            ev.append(f"{d.title}\n", style="bold")
        ev.append(f"confidence {d.confidence:.0%}   playbook {d.playbook}\n\n")
        if d.summary and not verdict_tells(report, d):  # not twice on one screen
            ev.append(d.summary + "\n\n", style="italic")
        if self.has_class("-short") and d is report.diagnoses[0]:
            ev.append(verdict_words(report, for_session=True) + "\n\n")
        if report.chain and d is report.diagnoses[0]:
            ev.append(chain_heading(report.verdict, "What waits on what") + "\n", style="bold underline")
            for line in chain_lines(report.chain):
                ev.append(line.strip() + "\n")
            ev.append("\n")
        ev.append("Evidence\n", style="bold underline")
        for e in d.evidence:
            where = ""
            if e.file:
                where = f" ({os.path.basename(e.file)}{':' + str(e.line) if e.line else ''})"
            ev.append(f"[{e.source}] ", style="cyan")
            ev.append(f"{e.detail}{where}\n")
        check = first_runnable_check(d)
        if check is not None:
            ev.append("\nConfirm with ", style="bold underline")
            ev.append(f"{check_heading(check)}\n", style="yellow")
            ev.append(check.command + "\n")
            if needs_line(check.unfilled):
                ev.append(f"({needs_line(check.unfilled)})\n", style="dim")
        ran = self.app.session.probe_results
        done = [ran[p["name"]] for p in d.probe_items if p["name"] in ran and ran[p["name"]].completed]
        offered = [p for p in d.probe_items if not (p["name"] in ran and ran[p["name"]].completed)]
        for outcome in done:
            ev.append(f"\nRan: {outcome.one_line()}\n", style="dim")
        if offered:
            ev.append("\n[p] settle it with a probe:\n", style="dim")
            for probe in offered:
                ev.append(f"  {probe_line(probe)}\n", style="dim")
        self.query_one("#cause-evidence", Static).update(ev)
        fix = Text()
        if not d.fixes:
            fix.append("The playbook gives no commands for this cause.")
        for i, item in enumerate(d.fixes, 1):
            fix.append(f"{i}. {fix_heading(item)}\n", style="bold")
            if item.why:
                fix.append(f"    {item.why}\n")
            if needs_line(item.unfilled):
                fix.append(f"    ({needs_line(item.unfilled)})\n", style="dim")
            for command in item.commands:
                for line in command.splitlines():
                    fix.append(f"    {line}\n", style="green")
                fix.append("\n")
        for edit in report.edits if report is not None else []:
            fix.append(f"Edit in your code: {edit_heading(edit)}\n", style="bold")
            fix.append(edit["diff"].rstrip("\n") + "\n\n", style="green")
        fix.append("[c] copy these commands", style="dim")
        self.query_one("#cause-fix", Static).update(fix)
        book = self.app.session.knowledge.playbooks.get(cause)
        if book is None:
            body = f"No playbook for {cause}."
        elif book.body.lstrip().startswith("# "):
            body = book.body  # the playbook opens with its title
        else:
            body = f"# {book.title}\n\n{book.body}"
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

    def action_scroll_detail(self, direction: int) -> None:
        """Page the active tab up or down, the focus staying on the causes."""
        tabs = self.query_one("#diag-tabs", TabbedContent)
        pane = tabs.get_pane(tabs.active)
        target = pane.query_one(EvidencePane) if tabs.active == "tab-live" else pane.query_one(".tab-scroll")
        if direction > 0:
            target.scroll_page_down()
        else:
            target.scroll_page_up()

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
        from debug_stuck.frontends.tui.screens.triage import TriageScreen

        session = self.app.session
        self.app.pop_screen()
        for screen in self.app.screen_stack:
            if isinstance(screen, TriageScreen):
                # Every question answered: re-ask the last one. After "diagnose now" (d) the
                # question it was asked at comes back, with every answer given so far.
                if session.triage_done:
                    session.back()
                screen.show_question()
