"""The live evidence pane: processes, GPU sparklines, stacks grouped across ranks."""

from __future__ import annotations

from typing import List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Label, Sparkline, Static

from debug_stuck.core.report import Report
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.render.text import doing_phrase

MAX_GPUS_SHOWN = 8
MAX_ERRORS_SHOWN = 3


def _cpu(process: dict) -> str:
    values = [v for v in (process.get("cpu_percent"), process.get("cpu_demand")) if v is not None]
    return f"{max(values):.0f}" if values else "-"


def stack_group_lines(report: Report) -> Text:
    """Ranks grouped by stack; the culprit's group (the odd one out) highlighted."""
    text = Text()
    groups = report.stack_groups
    if not groups:
        text.append("no Python stacks read" if report.processes else "no live job attached", style="dim")
        return text
    culprit_pid = (report.culprit or {}).get("pid")
    for group in groups:
        odd = culprit_pid is not None and culprit_pid in group.get("pids", [])
        mark = ">> " if odd else "   "
        style = "bold reverse yellow" if odd else ""
        text.append(f"{mark}{group.get('label', '?')}", style=style)
        text.append(f"  {group.get('top', '')}", style="yellow" if odd else "")
        if odd:
            text.append("  (the odd one out)", style="bold yellow")
        text.append("\n")
    if report.culprit:
        text.append(f"Culprit: {report.culprit.get('reason', '')}", style="bold")
    return text


class GpuRow(Horizontal):
    """One GPU: utilization and power, each with its sparkline."""

    def __init__(self, index: int):
        super().__init__(id=f"gpu-{index}", classes="gpu-row")
        self.index = index

    def compose(self) -> ComposeResult:
        yield Label(f"GPU {self.index}", classes="gpu-name")
        with Vertical(classes="gpu-lines"):
            with Horizontal(classes="gpu-line"):
                yield Label("util", classes="gpu-value", id=f"gpu-{self.index}-util")
                yield Sparkline([], classes="gpu-util-spark", id=f"gpu-{self.index}-util-spark")
            with Horizontal(classes="gpu-line"):
                yield Label("power", classes="gpu-value", id=f"gpu-{self.index}-power")
                yield Sparkline([], classes="gpu-power-spark", id=f"gpu-{self.index}-power-spark")

    def show(self, history: GpuHistory) -> None:
        latest = history.latest()
        util = history.util_series(self.index)
        power = history.power_series(self.index)
        now_util = latest.util.get(self.index) if latest else None
        now_power = latest.power_w.get(self.index) if latest else None
        limit = latest.power_limit_w.get(self.index) if latest else None
        self.query_one(f"#gpu-{self.index}-util", Label).update(
            "util  -" if now_util is None else f"util {now_util:3.0f}%"
        )
        watts = "power -" if now_power is None else f"power {now_power:.0f} W"
        if now_power is not None and limit:
            watts += f"/{limit:.0f}"
        self.query_one(f"#gpu-{self.index}-power", Label).update(watts)
        # A flat line needs two points; a sparkline of one reading would show nothing.
        self.query_one(f"#gpu-{self.index}-util-spark", Sparkline).data = (util * 2 if len(util) == 1 else util) or [0]
        self.query_one(f"#gpu-{self.index}-power-spark", Sparkline).data = (
            power * 2 if len(power) == 1 else power
        ) or [0]


class EvidencePane(VerticalScroll):
    """Step 3: what the job is doing, refreshed as evidence comes in."""

    DEFAULT_CSS = """
    EvidencePane { padding: 0 1; }
    EvidencePane .pane-title { text-style: bold; color: $accent; }
    EvidencePane #processes { height: auto; max-height: 12; }
    EvidencePane .gpu-row { height: 2; }
    EvidencePane .gpu-name { width: 6; }
    EvidencePane .gpu-lines { height: 2; }
    EvidencePane .gpu-line { height: 1; }
    EvidencePane .gpu-value { width: 16; }
    EvidencePane Sparkline { height: 1; width: 1fr; }
    EvidencePane Sparkline > .sparkline--min-color { color: $accent; }
    EvidencePane Sparkline > .sparkline--max-color { color: $warning; }
    EvidencePane #gpus { height: auto; }
    EvidencePane #no-gpu { color: $text-muted; }
    EvidencePane #groups { height: auto; }
    EvidencePane #evidence-errors { color: $warning; height: auto; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._gpu_indices: List[int] = []

    def compose(self) -> ComposeResult:
        yield Static("Live evidence", classes="pane-title")
        yield Static("waiting for the first reading...", markup=False, id="evidence-status")
        table = DataTable(id="processes", cursor_type="row", zebra_stripes=True)
        table.add_columns("pid", "role", "rank", "st", "cpu%", "doing")
        yield table
        yield Static("GPUs", classes="pane-title")
        yield Static("", markup=False, id="no-gpu")
        yield Vertical(id="gpus")
        yield Static("Stacks across ranks", classes="pane-title")
        yield Static("", markup=False, id="groups")
        yield Static("", markup=False, id="evidence-errors")

    def show_status(self, text: str) -> None:
        self.query_one("#evidence-status", Static).update(text)

    def show_report(self, report: Optional[Report], note: str = "") -> None:
        table = self.query_one("#processes", DataTable)
        table.clear()
        if report is None:
            self.show_status(note or "no evidence yet")
            return
        for process in report.processes:
            rank = "" if process.get("rank") is None else str(process["rank"])
            table.add_row(
                str(process.get("pid")),
                str(process.get("role", "")),
                rank,
                str(process.get("state", "?")),
                _cpu(process),
                doing_phrase(process),
            )
        n = len(report.processes)
        if n:
            status = f"{n} process{'es' if n != 1 else ''} read"
            if report.verdict.hung is True:
                status += ": nothing moved during the window"
            elif report.verdict.hung is False:
                status += ": the job is making progress"
        elif report.logs:
            status = "no live job: evidence from the log(s) only"
        else:
            status = "no live job attached: answers only"
        self.show_status(note or status)
        self.query_one("#groups", Static).update(stack_group_lines(report))
        errors = report.errors[:MAX_ERRORS_SHOWN]
        more = len(report.errors) - len(errors)
        text = "\n".join(f"could not collect: {e}" for e in errors)
        if more > 0:
            text += f"\n... {more} more in the report"
        self.query_one("#evidence-errors", Static).update(text)

    def show_gpus(self, history: GpuHistory, job_gpus: Optional[List[int]] = None) -> None:
        """The job's GPUs (all of them when the job's are not known)."""
        no_gpu = self.query_one("#no-gpu", Static)
        box = self.query_one("#gpus", Vertical)
        indices = [i for i in history.indices() if not job_gpus or i in job_gpus][:MAX_GPUS_SHOWN]
        if not indices:
            if history.available is False:
                no_gpu.update(f"no GPU: {history.note or 'none found'}")
            else:
                no_gpu.update("reading the GPUs...")
            box.display = False
            return
        no_gpu.update("")
        no_gpu.display = False
        box.display = True
        if indices != self._gpu_indices:
            self._gpu_indices = indices
            box.remove_children()
            box.mount_all([GpuRow(i) for i in indices])
            self.call_after_refresh(self._fill_gpus, history)
            return
        self._fill_gpus(history)

    def _fill_gpus(self, history: GpuHistory) -> None:
        for row in self.query(GpuRow):
            row.show(history)
