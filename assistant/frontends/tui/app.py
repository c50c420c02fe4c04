"""The Textual app of the interactive session.

All collection (job discovery, live evidence, GPU readings, probes, the diagnosis) runs in thread
workers; each delivers its result with post_message, so the UI never waits on a process that may
itself be stuck. The data source is the Session given to the constructor: a live one, or a
RecordedSession replaying a report.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional

from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message

from debug_stuck.core.report import Report
from debug_stuck.errors import DebugStuckError, NotInspectable
from debug_stuck.frontends.session.core import Session
from debug_stuck.frontends.session.output import SavedReport
from debug_stuck.frontends.session.probes import ProbeOutcome
from debug_stuck.pipeline.look import JobSummary

GPU_SAMPLE_SECONDS = 2.0
PROBE_PROGRESS_SECONDS = 0.25


def one_line(exc: BaseException) -> str:
    if isinstance(exc, DebugStuckError):
        return exc.one_line()
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class JobsFound(Message):
    def __init__(self, jobs: List[JobSummary], error: Optional[str] = None):
        super().__init__()
        self.jobs = jobs
        self.error = error


class Attached(Message):
    """attach_pid finished: the job, or why not."""

    def __init__(self, job: Optional[JobSummary], error: Optional[str] = None):
        super().__init__()
        self.job = job
        self.error = error


class CollectProgress(Message):
    def __init__(self, what: str, text: str):
        super().__init__()
        self.what = what  # evidence | diagnosis
        self.text = text


class EvidenceReady(Message):
    def __init__(self, report: Optional[Report], error: Optional[str] = None):
        super().__init__()
        self.report = report
        self.error = error


class GpuSampled(Message):
    pass


class ProbeProgress(Message):
    def __init__(self, name: str, elapsed: float, limit: float):
        super().__init__()
        self.name = name
        self.elapsed = elapsed
        self.limit = limit


class ProbeDone(Message):
    def __init__(self, outcome: ProbeOutcome):
        super().__init__()
        self.outcome = outcome


class DiagnosisReady(Message):
    def __init__(self, report: Optional[Report], error: Optional[str] = None):
        super().__init__()
        self.report = report
        self.error = error


class ReportSaved(Message):
    def __init__(self, saved: Optional[SavedReport], error: Optional[str] = None):
        super().__init__()
        self.saved = saved
        self.error = error


class RecoveryDone(Message):
    def __init__(self, action: str, text: str, ok: bool):
        super().__init__()
        self.action = action
        self.text = text
        self.ok = ok


class WorkEnded(Message):
    """A worker thread is done (whatever it did)."""


class Copied(Message):
    def __init__(self, text: str, commands: List[str]):
        super().__init__()
        self.text = text
        self.commands = commands


class DebugStuckApp(App[int]):
    """debug-stuck's interactive session: pick the job, triage, evidence, probes, diagnosis, recovery."""

    TITLE = "debug-stuck"
    # Every key the session has is in the footers and the help; the palette would only take
    # the footer's room at 80 columns.
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    .step-title { background: $boost; color: $accent; text-style: bold; padding: 0 1; height: 1; }
    .hint { color: $text-muted; padding: 0 1; }
    .error-line { color: $error; padding: 0 1; height: auto; }
    Footer FooterLabel { margin-right: 1; }
    """
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit_session", "Quit"),
        Binding("ctrl+c", "quit_session", "Quit", show=False, priority=True),
    ]

    def __init__(
        self,
        session: Session,
        *,
        clock: Callable[[], float] = time.time,
        gpu_interval: float = GPU_SAMPLE_SECONDS,
    ):
        super().__init__()
        self.session = session
        self.clock = clock
        self.gpu_interval = gpu_interval
        self.jobs: List[JobSummary] = []
        self.jobs_error: Optional[str] = None
        self.discovering = False
        self.jobs_scanned = False  # a scan has finished once (a return to step 1 scans again)
        self.evidence: Optional[Report] = None
        self.evidence_error: Optional[str] = None
        self.collecting = False
        self.diagnosing = False
        self.diagnosis_error: Optional[str] = None
        self.status_text = ""
        self._probe_cancel: Optional[threading.Event] = None
        self._gpu_started = False
        # What the worker threads are doing now, for the quit screen: a thread cannot be killed,
        # and the process waits for its threads when the app ends (a collection's window).
        self._work: Dict[int, str] = {}
        self._work_lock = threading.Lock()
        self._work_ids = 0
        self.quitting = False

    # -- work in threads -----------------------------------------------------------------------
    def _start(self, what: str, work: Callable[[], None], group: str, exclusive: bool = True) -> None:
        """Run `work` in a thread worker, remembered as `what` (a phrase: "the live evidence
        collection") while it runs."""
        with self._work_lock:
            self._work_ids += 1
            key = self._work_ids

        def tracked() -> None:
            with self._work_lock:
                self._work[key] = what
            try:
                work()
            finally:
                with self._work_lock:
                    self._work.pop(key, None)
                self.post_message(WorkEnded())

        self.run_worker(tracked, thread=True, group=group, exclusive=exclusive, exit_on_error=False)

    def running_work(self) -> List[str]:
        """What the worker threads are still doing, each once, oldest first."""
        with self._work_lock:
            return list(dict.fromkeys(self._work.values()))

    def _job_phrase(self) -> str:
        pids = self.session.pids
        return f" of pid {', '.join(map(str, pids))}" if pids else ""

    # -- lifecycle ---------------------------------------------------------------------------
    def on_mount(self) -> None:
        from debug_stuck.frontends.tui.screens.pick import PickJobScreen

        self.push_screen(PickJobScreen())
        self.start_discovery()

    def action_help(self) -> None:
        from debug_stuck.frontends.tui.screens.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_quit_session(self) -> None:
        """Quit: the session tells running work to stop (probes are killed). Work that must end
        on its own (a collection's window, a GPU reading) is named on screen until it has: the
        process waits for its threads anyway, and a blank wait would look hung. A second q or
        Ctrl-C leaves the screen at once."""
        self.session.shutdown()
        if self._probe_cancel is not None:
            self._probe_cancel.set()
        self.workers.cancel_all()
        running = self.running_work()
        if not running or self.quitting:
            self.exit(0)
            return
        from debug_stuck.frontends.tui.screens.dialogs import StoppingScreen

        self.quitting = True
        self.push_screen(StoppingScreen(running))

    def on_work_ended(self, message: WorkEnded) -> None:
        if not self.quitting:
            return
        running = self.running_work()
        if not running:
            self.exit(0)
        else:
            self._broadcast("show_stopping", running)

    def _screens_with(self, method: str):
        return [s for s in self.screen_stack if hasattr(s, method)]

    def _broadcast(self, method: str, *args) -> None:
        for screen in self._screens_with(method):
            try:
                getattr(screen, method)(*args)
            except NoMatches:
                pass  # not composed yet: the screen renders the app's state when it mounts

    # -- step 1 ------------------------------------------------------------------------------
    def start_discovery(self) -> None:
        self.discovering = True
        self._broadcast("show_jobs")
        self._start("the scan for training jobs", self._discover_work, "discover")

    def _discover_work(self) -> None:
        try:
            self.post_message(JobsFound(self.session.discover()))
        except Exception as exc:  # a failed scan leaves the other ways in
            self.post_message(JobsFound([], one_line(exc)))

    def on_jobs_found(self, message: JobsFound) -> None:
        self.discovering = False
        self.jobs_scanned = True
        self.jobs, self.jobs_error = message.jobs, message.error
        self._broadcast("show_jobs")
        self._start_gpu_sampler()

    def attach_job(self, job: JobSummary) -> None:
        self.session.attach(job)
        self._open_triage()

    def attach_pid(self, text: str) -> None:
        def work() -> None:
            try:
                self.post_message(Attached(self.session.attach_pid(text)))
            except Exception as exc:
                self.post_message(Attached(None, one_line(exc)))

        self._start(f"reading process {text.strip()}", work, "attach")

    def on_attached(self, message: Attached) -> None:
        if message.error is not None:
            # said once, on step 1's error line (a toast over it would cover the same words)
            self._broadcast("show_attach_error", message.error)
            return
        if message.job is not None and message.job.note:
            self.notify(message.job.note, timeout=8)
        self._open_triage()

    def describe_job(self, logs: str) -> None:
        """No live job; the log paths are checked in a worker (a path may be on a hung mount)."""

        def work() -> None:
            try:
                self.session.describe([logs] if logs.strip() else [])
            except Exception as exc:
                self.post_message(Attached(None, one_line(exc)))
                return
            self.post_message(Attached(None))

        self._start("checking the log paths", work, "attach")

    def _open_triage(self) -> None:
        from debug_stuck.frontends.tui.screens.triage import TriageScreen

        self.evidence = None
        self.evidence_error = None
        self.push_screen(TriageScreen())
        self.start_evidence()

    # -- step 3 ------------------------------------------------------------------------------
    def start_evidence(self) -> None:
        self.collecting = True
        self.status_text = "collecting live evidence..." if self.session.attached else "reading..."
        self._broadcast("show_evidence")
        what = f"the live evidence collection{self._job_phrase()}" if self.session.attached else "reading the logs"
        self._start(what, self._evidence_work, "evidence")

    def _evidence_work(self) -> None:
        say = self._progress_poster("evidence")
        try:
            report = self.session.collect_evidence(progress=say)
        except Exception as exc:
            self.post_message(EvidenceReady(None, one_line(exc)))
            return
        self.post_message(EvidenceReady(report))

    def _progress_poster(self, what: str):
        def say(text: str) -> None:
            self.post_message(CollectProgress(what, text))

        return say

    def on_collect_progress(self, message: CollectProgress) -> None:
        self.status_text = message.text
        if message.what == "evidence":
            self._broadcast("show_evidence_progress", message.text)
        else:
            self._broadcast("show_diagnosis_progress", message.text)

    def on_evidence_ready(self, message: EvidenceReady) -> None:
        self.collecting = False
        self.evidence, self.evidence_error = message.report, message.error
        if message.error:
            self.notify(f"could not read the job: {message.error}", severity="warning", timeout=8)
        self._broadcast("show_evidence")
        self._broadcast("show_gpus")
        self._start_gpu_sampler()

    def _start_gpu_sampler(self) -> None:
        if self._gpu_started or not self.session.live:
            return
        self._gpu_started = True
        self._start("the GPU reading", self._gpu_work, "gpu", exclusive=False)

    def _gpu_work(self) -> None:
        stopping = self.session.stopping
        while not stopping.is_set():
            more = self.session.sample_gpus()
            self.post_message(GpuSampled())
            if not more:
                return  # no GPU here: nothing to sample
            stopping.wait(self.gpu_interval)

    def on_gpu_sampled(self, message: GpuSampled) -> None:
        self._broadcast("show_gpus")

    # -- step 4 ------------------------------------------------------------------------------
    def start_probe(self, name: str, consent: bool, value: str) -> None:
        cancel = threading.Event()
        self._probe_cancel = cancel
        last = [0.0]

        def progress(elapsed: float, limit: float) -> None:
            if elapsed - last[0] >= PROBE_PROGRESS_SECONDS:
                last[0] = elapsed
                self.post_message(ProbeProgress(name, elapsed, limit))

        def work() -> None:
            try:
                outcome = self.session.run_probe(name, consent, value, cancel, progress)
            except Exception as exc:
                outcome = ProbeOutcome(name, "error", one_line(exc))
            self.post_message(ProbeDone(outcome))

        self._start(f"probe {name} (it is killed, with all it started)", work, "probe", exclusive=False)

    def cancel_probe(self) -> None:
        if self._probe_cancel is not None:
            self._probe_cancel.set()

    def on_probe_progress(self, message: ProbeProgress) -> None:
        self._broadcast("show_probe_progress", message)

    def on_probe_done(self, message: ProbeDone) -> None:
        self._probe_cancel = None
        self._broadcast("show_probe_done", message.outcome)

    # -- step 5 ------------------------------------------------------------------------------
    def start_diagnosis(self) -> None:
        from debug_stuck.frontends.tui.screens.diagnosis import DiagnosisScreen

        if not isinstance(self.screen, DiagnosisScreen):
            self.push_screen(DiagnosisScreen())
        self.diagnosing = True
        self.diagnosis_error = None
        self._broadcast("show_diagnosis")
        self._start(f"the diagnosis{self._job_phrase()}", self._diagnosis_work, "diagnosis")

    def _diagnosis_work(self) -> None:
        say = self._progress_poster("diagnosis")
        try:
            try:
                report = self.session.diagnose(progress=say)
            except NotInspectable as exc:
                # The job exited or cannot be read now: diagnose from the answers and logs.
                say(f"the job cannot be read any more ({exc.one_line()}); using the answers and logs")
                report = self.session.diagnose(progress=say, live=False)
                report.errors.insert(0, exc.one_line())
        except Exception as exc:
            self.post_message(DiagnosisReady(None, one_line(exc)))
            return
        self.post_message(DiagnosisReady(report))

    def on_diagnosis_ready(self, message: DiagnosisReady) -> None:
        self.diagnosing = False
        self.diagnosis_error = message.error
        if message.report is not None and message.report.processes:
            self.evidence = message.report  # the freshest live reading
            self._broadcast("show_evidence")
        self._broadcast("show_diagnosis")

    # -- step 6 ------------------------------------------------------------------------------
    def open_recovery(self) -> None:
        from debug_stuck.frontends.tui.screens.recovery import RecoveryScreen

        self.push_screen(RecoveryScreen())

    def copy_fixes(self, cause: Optional[str]) -> None:
        """The clipboard tools run in a worker (each bounded): a wedged X server must not freeze us."""

        def work() -> None:
            fixes = self.session.fix_commands(cause=cause)
            self.post_message(Copied(self.session.copy_fixes(cause=cause), [cmd for _, cmd in fixes]))

        self._start("copying the fix commands", work, "copy")

    def on_copied(self, message: Copied) -> None:
        if message.commands and message.text.startswith("no clipboard"):
            # Terminals that understand OSC 52 get them anyway; they are still printed on exit.
            self.copy_to_clipboard("\n\n".join(message.commands) + "\n")
        self.notify(message.text, timeout=6)

    def save_report(self, directory: str) -> None:
        def work() -> None:
            try:
                self.post_message(ReportSaved(self.session.save_report(directory=directory or None)))
            except Exception as exc:
                self.post_message(ReportSaved(None, one_line(exc)))

        self._start("saving the report", work, "save")

    def on_report_saved(self, message: ReportSaved) -> None:
        if message.saved is not None:
            self.notify(message.saved.one_line(), timeout=8)
        else:
            self.notify(message.error or "could not save", severity="error", timeout=8)
        self._broadcast("show_saved", message)

    def run_recovery(self, action: str) -> None:
        def work() -> None:
            try:
                self.post_message(RecoveryDone(action, self.session.run_recovery(action), True))
            except Exception as exc:
                self.post_message(RecoveryDone(action, one_line(exc), False))

        self._start("stopping the job" if action == "stop" else "planning the resume", work, "recovery")

    def on_recovery_done(self, message: RecoveryDone) -> None:
        self._broadcast("show_recovery", message)
