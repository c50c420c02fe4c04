"""The live evidence pane: processes, GPU sparklines, stacks grouped across ranks."""

from __future__ import annotations

from typing import List, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Label, Sparkline, Static

from debug_stuck.core.report import Report
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.render.text import chain_heading, chain_lines, culprit_line, doing_phrase

MAX_GPUS_SHOWN = 8
MAX_ERRORS_SHOWN = 3
PROCESS_COLUMNS = ("pid", "role", "rank", "st", "cpu%", "doing")
MIN_DOING_WIDTH = 24


def gpu_note_line(note: Optional[str]) -> str:
    """Why there is no GPU reading, in one line: the library's own error after the explanation
    ("no NVIDIA or AMD GPU found (...): NVML: NVML Shared Library Not Found") is left to the report."""
    first = (note or "").split(": ")[0].strip().rstrip(":") or "none found"
    return f"no GPU: {first}"


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
        text.append(culprit_line(report.culprit), style="bold")
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
    EvidencePane #processes { height: auto; }
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
    EvidencePane #chain { height: auto; }
    EvidencePane #evidence-errors { color: $warning; height: auto; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._gpu_indices: List[int] = []
        self._report: Optional[Report] = None
        self._table_width = 0

    def compose(self) -> ComposeResult:
        yield Static("Live evidence", classes="pane-title")
        yield Static("waiting for the first reading...", markup=False, id="evidence-status")
        # Not focusable: the arrow keys scroll the pane (the table has no cursor to move).
        table = DataTable(id="processes", cursor_type="none", zebra_stripes=True)
        table.can_focus = False
        table.add_columns(*PROCESS_COLUMNS)
        yield table
        yield Static("GPUs", classes="pane-title")
        yield Static("", markup=False, id="no-gpu")
        yield Vertical(id="gpus")
        yield Static("What waits on what", classes="pane-title", id="chain-title")
        yield Static("", markup=False, id="chain")
        yield Static("Stacks across ranks", classes="pane-title")
        yield Static("", markup=False, id="groups")
        yield Static("", markup=False, id="evidence-errors")

    def show_status(self, text: str) -> None:
        self.query_one("#evidence-status", Static).update(text)

    def on_resize(self, event) -> None:
        if self.scrollable_content_region.width != self._table_width:
            self._fill_table()

    def _fill_table(self) -> None:
        """One row per process; "doing" takes the width left and wraps, so it is never cut."""
        table = self.query_one("#processes", DataTable)
        table.clear(columns=True)
        report = self._report
        rows = []
        for process in report.processes if report is not None else []:
            rank = "" if process.get("rank") is None else str(process["rank"])
            rows.append(
                [
                    str(process.get("pid")),
                    str(process.get("role", "")),
                    rank,
                    str(process.get("state", "?")),
                    _cpu(process),
                    doing_phrase(process),
                ]
            )
        widths = [max([len(name)] + [len(row[i]) for row in rows]) for i, name in enumerate(PROCESS_COLUMNS[:-1])]
        self._table_width = self.scrollable_content_region.width
        padding = 2 * table.cell_padding
        doing = max(MIN_DOING_WIDTH, self._table_width - sum(w + padding for w in widths) - padding)
        for name, width in zip(PROCESS_COLUMNS, widths + [doing]):
            table.add_column(name, width=width)
        for row in rows:
            table.add_row(*row[:-1], Text(row[-1]), height=None)

    def show_report(self, report: Optional[Report], note: str = "") -> None:
        self._report = report
        self._fill_table()
        if report is None:
            self.show_status(note or "no evidence yet")
            return
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
        lines = chain_lines(report.chain) if report.chain else []
        self.query_one("#chain-title", Static).display = bool(lines)
        self.query_one("#chain-title", Static).update(chain_heading(report.verdict, "What waits on what"))
        self.query_one("#chain", Static).display = bool(lines)
        self.query_one("#chain", Static).update("\n".join(line.strip() for line in lines))
        errors = report.errors[:MAX_ERRORS_SHOWN]
        more = len(report.errors) - len(errors)
        missing = [f"missing: {m['what']}. To get it: {m['get_it']}" for m in report.missing]
        text = "\n".join(missing + [f"could not collect: {e}" for e in errors])
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
                no_gpu.update(gpu_note_line(history.note))
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
