"""Step 4: the probes on offer, consent for those that run your code, progress and cancel."""

from __future__ import annotations

from typing import List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (
    Button,
    Input,
    OptionList,
    ProgressBar,
    Static,
)
from textual.widgets.option_list import Option

from debug_stuck.frontends.session.probes import ProbeOffer, ProbeOutcome
from debug_stuck.render.text import format_duration


class ProbeScreen(ModalScreen[None]):
    """Step 4: the probes offered here; consent for those that run code; progress; cancel."""

    BINDINGS = [
        Binding("escape", "close", "Close / cancel"),
        Binding("c", "cancel", "Cancel probe"),
        Binding("q", "app.quit_session", "Quit"),
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
                options.append(Option(Text(f"{o.name}  ({o.safety_text})"), id=o.name, disabled=not o.available))
            yield OptionList(*options, id="probe-list")
            yield Input(id="probe-input")
            with Horizontal(id="probe-buttons"):
                yield Button("Run", id="probe-run", variant="primary")
                yield Button("Close", id="probe-close")
            yield ProgressBar(id="probe-progress", show_eta=False)
            yield Static("", markup=False, id="probe-result")
            yield Static("", markup=False, id="probe-history", classes="hint")
            yield Static("", markup=False, id="probe-detail")

    def on_mount(self) -> None:
        self._show_history()
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
        if offer.runs_user_code or not offer.input_optional:
            # consent (and a needed input) is given with the Run button, never by Enter on the list
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
        self._show_history()

    def _show_history(self) -> None:
        """Every probe this session ran, each once, its last completed result: an earlier OK stays
        when a later probe is cancelled."""
        results = self.app.session.probe_results
        lines = [f"  {outcome.one_line()}" for outcome in results.values()]
        self.query_one("#probe-history", Static).update(("Probes run so far:\n" + "\n".join(lines)) if lines else "")

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
