"""The interactive session without a full-screen UI: questionary prompts over the same core.

`debug-stuck --plain`, and any terminal where the Textual app cannot run. The same six steps as
the TUI (debug_stuck.frontends.session does the work), one prompt at a time, ending at the same report.
Tests drive it through prompt_toolkit pipe input: run_prompts(session, input=..., output=...).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, List, Optional, TextIO

from debug_stuck.core.report import Report
from debug_stuck.errors import DebugStuckError, NotInspectable
from debug_stuck.frontends.session.core import Session
from debug_stuck.frontends.session.jobs import format_duration
from debug_stuck.frontends.session.probes import ProbeOffer
from debug_stuck.render.text import doing_phrase

MAX_PROCESSES_SHOWN = 12
PROBE_PROGRESS_EVERY = 5.0
BACK = "__back__"
PROBE = "__probe__"


class PlainSession:
    """One run of the prompts; `io` goes to every questionary prompt (pipe input in tests)."""

    def __init__(self, session: Session, out: Optional[TextIO] = None, **io: Any):
        self.session = session
        self.out = out or sys.stdout
        self.io = {k: v for k, v in io.items() if v is not None}

    # -- plumbing --------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def select(self, message: str, choices: List, default: Any = None, instruction: Optional[str] = None):
        import questionary

        items = [questionary.Choice(title, value=value) for title, value in choices]
        chosen = next((c for c in items if c.value == default), None)
        return questionary.select(
            message,
            choices=items,
            default=chosen,
            use_shortcuts=len(items) <= 9,
            instruction=instruction,
            **self.io,
        ).unsafe_ask()

    def text(self, message: str, default: str = "", validate: Optional[Callable] = None) -> str:
        import questionary

        return questionary.text(message, default=default, validate=validate, **self.io).unsafe_ask()

    def confirm(self, message: str, default: bool = False) -> bool:
        import questionary

        return bool(questionary.confirm(message, default=default, **self.io).unsafe_ask())

    # -- the steps -------------------------------------------------------------------------
    def run(self) -> int:
        try:
            while not self.pick_job():
                pass
            self.evidence()
            self.triage()
            report = self.diagnose()
            self.recovery(report)
        except KeyboardInterrupt:
            self.say("debug-stuck: interrupted; nothing is left running")
            return 130
        finally:
            self.session.shutdown()
        return 0

    def pick_job(self) -> bool:
        self.say("Step 1 of 6: looking for training jobs on this machine...")
        try:
            jobs = self.session.discover()
        except Exception as exc:  # the other ways in still work
            self.say(f"could not scan this machine: {exc}")
            jobs = []
        if not jobs:
            self.say("No training job found here (Python processes that load libtorch).")
        now = time.time()
        choices = [(f"{job.headline(now)} | {job.log_phrase(now, width=50)}", ("job", i)) for i, job in enumerate(jobs)]
        choices.append(("Attach to another process by PID", ("pid", None)))
        choices.append(("Not running any more / describe it", ("describe", None)))
        kind, index = self.select("Which job is stuck?", choices)
        try:
            if kind == "job":
                self.session.attach(jobs[index])
            elif kind == "pid":
                pid = self.text("PID of any process of the job:", validate=lambda t: t.strip().isdigit() or "a number")
                self.session.attach_pid(pid)
            else:
                logs = self.text("Training log path(s), space-separated (optional, Enter to skip):")
                self.session.describe([logs] if logs.strip() else [])
        except DebugStuckError as exc:
            self.say(f"debug-stuck: {exc.one_line()}")
            return False
        if self.session.job is not None:
            self.say(f"Attached: {self.session.job.headline(now)}")
        return True

    def evidence(self) -> None:
        session = self.session
        if not session.attached and not session.logs:
            self.say("No live job: the diagnosis comes from your answers.")
            return
        self.say("Step 3 of 6: reading the live evidence..." if session.attached else "Reading the logs...")
        try:
            report = session.collect_evidence(progress=lambda m: self.say(f"  {m}..."))
        except NotInspectable as exc:
            self.say(f"could not read the job: {exc.one_line()}")
            return
        self.say(render_evidence(report, session))

    def triage(self) -> None:
        session = self.session
        while True:
            view = session.next_question()
            if view is None:
                return
            q = view.question
            self.say("")
            self.say(f"Step 2 of 6: question {view.number} of {view.total}")
            self.say(f"Why we ask: {q.why}")
            s = view.suggestion
            if s is not None:
                origin = "the log" if s.source == "log" else "live evidence"
                self.say(f"Pre-filled from {origin}: {s.prompt}")
            choices = []
            for value, label in view.choices:
                if s is not None and value == s.value:
                    label += "   (suggested)"
                elif s is None and value == view.default:
                    label += "   (usual answer)"
                choices.append((label, value))
            offers = [o for o in view.probes if o.available]
            if offers:
                choices.append((f"Run a probe that answers this ({', '.join(o.name for o in offers)})", PROBE))
            if view.number > 1:
                choices.append(("<- back to the previous question", BACK))
            value = self.select(q.text, choices, default=view.default)
            if value == BACK:
                session.back()
            elif value == PROBE:
                self.probe_menu(offers)
            else:
                session.answer(q.key, value)

    def diagnose(self) -> Report:
        self.say("")
        self.say("Step 5 of 6: diagnosing...")
        say = lambda m: self.say(f"  {m}...")  # noqa: E731
        try:
            report = self.session.diagnose(progress=say)
        except NotInspectable as exc:
            self.say(f"the job cannot be read any more ({exc.one_line()}); using the answers and logs")
            report = self.session.diagnose(progress=say, live=False)
            report.errors.insert(0, exc.one_line())
        from debug_stuck.render.text import render_text

        self.say("")
        self.say(render_text(report))
        return report

    def recovery(self, report: Report) -> None:
        session = self.session
        while True:
            choices = []
            offers = [o for o in session.diagnosis_probes(report) if o.available]
            if offers:
                choices.append((f"Run a probe to settle it ({', '.join(o.name for o in offers)})", "probe"))
            choices.append(("Copy the fix commands", "copy"))
            choices.append(("Save the report (Markdown and JSON)", "save"))
            for action in session.recovery_actions():
                choices.append(("Stop the job (report first)" if action == "stop" else "Resume the job", action))
            choices.append(("Quit", "quit"))
            what = self.select("Step 6 of 6: what next?", choices, default="save" if session.saved is None else "quit")
            if what == "quit":
                return
            if what == "probe":
                if self.probe_menu(offers):
                    report = self.diagnose()
            elif what == "copy":
                self.say(session.copy_fixes(report))
            elif what == "save":
                folder = self.text("Save the report in directory:", default=session.save_dir or ".")
                try:
                    self.say(session.save_report(report, directory=folder).one_line())
                except DebugStuckError as exc:
                    self.say(f"debug-stuck: {exc.one_line()}")
            elif what in ("stop", "resume"):
                if what == "stop" and not self.confirm(
                    f"Stop the job (pid {', '.join(map(str, session.pids))}) and every process it started?"
                ):
                    continue
                try:
                    self.say(session.run_recovery(what))
                except Exception as exc:  # the recovery module's own failure, said in one line
                    self.say(f"debug-stuck: {what} failed: {exc}")

    # -- step 4 ----------------------------------------------------------------------------
    def probe_menu(self, offers: List[ProbeOffer]) -> bool:
        """Offer the probes; True when one completed (its findings then weigh in the ranking)."""
        choices = [
            (f"{o.name}: {o.summary}" + ("  [RUNS YOUR CODE]" if o.runs_user_code else ""), o.name) for o in offers
        ]
        choices.append(("none", None))
        name = self.select("Step 4 of 6: which probe?", choices)
        offer = next((o for o in offers if o.name == name), None)
        if offer is None:
            return False
        consent = False
        if offer.runs_user_code:
            consent = self.confirm(
                f"Probe {offer.name} RUNS YOUR CODE (own process group, killed after {offer.timeout:g} s). Run it?"
            )
            if not consent:
                self.say("not run")
                return False
        value = ""
        if offer.input_kind:
            value = self.text(f"{offer.input_prompt}:")
        return self.run_probe(offer, consent, value)

    def run_probe(self, offer: ProbeOffer, consent: bool, value: str) -> bool:
        self.say(f"running probe {offer.name} (up to {offer.timeout:g} s; Ctrl-C cancels it)...")
        cancel = threading.Event()
        last = [0.0]

        def progress(elapsed: float, limit: float) -> None:
            if elapsed - last[0] >= PROBE_PROGRESS_EVERY:
                last[0] = elapsed
                self.say(f"  {format_duration(elapsed)} of {limit:g} s...")

        try:
            outcome = self.session.run_probe(offer.name, consent, value, cancel, progress)
        except KeyboardInterrupt:
            # run_probe killed the probe and all it started before re-raising
            self.say(f"probe {offer.name} cancelled; nothing is left running")
            return False
        except DebugStuckError as exc:
            self.say(f"debug-stuck: {exc.one_line()}")
            return False
        self.say(outcome.one_line())
        for finding in outcome.findings[:8]:
            cause = f" [{finding.get('cause')}]" if finding.get("cause") else ""
            self.say(f"  - {finding.get('severity')}: {finding.get('message')}{cause}")
        return outcome.completed


def render_evidence(report: Report, session: Session) -> str:
    """The live evidence as text: processes, GPUs, stacks grouped across ranks."""
    out = []
    if report.processes:
        out.append(f"{'pid':>8} {'role':18} {'rank':>4} {'st':2} {'cpu%':>5}  doing")
        for p in report.processes[:MAX_PROCESSES_SHOWN]:
            rank = "" if p.get("rank") is None else p["rank"]
            cpu = "" if p.get("cpu_percent") is None else f"{p['cpu_percent']:.0f}"
            out.append(f"{p['pid']:>8} {p['role']:18} {rank!s:>4} {p['state']:2} {cpu:>5}  {doing_phrase(p)}")
        if len(report.processes) > MAX_PROCESSES_SHOWN:
            out.append(f"  ... {len(report.processes) - MAX_PROCESSES_SHOWN} more")
    gpu = session.gpu.describe_util(session.job_gpus())
    if gpu is not None:
        out.append(f"GPUs: {gpu[1]}")
    elif session.gpu.available is False:
        out.append(f"GPUs: no GPU ({session.gpu.note})")
    culprit = (report.culprit or {}).get("pid")
    if report.stack_groups:
        out.append("Stacks across ranks:")
        for g in report.stack_groups:
            odd = culprit is not None and culprit in g.get("pids", [])
            out.append(f"  {'>>' if odd else '  '} {g['label']}: {g['top']}" + ("   <- the odd one out" if odd else ""))
    if report.culprit:
        out.append(f"Culprit: {report.culprit.get('reason', '')}")
    for error in report.errors[:3]:
        out.append(f"could not collect: {error}")
    return "\n".join(out)


def run_prompts(session: Session, out: Optional[TextIO] = None, input=None, output=None) -> int:
    """Walk the session with questionary prompts; the exit code (130 when interrupted)."""
    return PlainSession(session, out, input=input, output=output).run()
