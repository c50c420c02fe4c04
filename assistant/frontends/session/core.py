"""The interactive session's core: what the Textual app and the questionary prompts both walk.

1. pick the job (the training jobs running here, a PID, or "not running, describe it");
2. triage: the tree's questions, each pre-filled from live evidence with the reason in one sentence;
3. the live evidence itself (the preliminary report, and a history of GPU readings);
4. probes, run in a child process so that a cancel really stops them;
5. the diagnosis, by `debug_stuck.pipeline.diagnose`, the same as `debug-stuck diagnose`;
6. the report saved as Markdown and JSON, the fix commands copied, the job stopped or resumed.

No UI is imported here. Front ends call the slow methods (`discover`, `collect_evidence`,
`sample_gpus`, `run_probe`, `diagnose`) from worker threads and render what they return.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from debug_stuck.contract import REPORT_PREFIX, UNKNOWN
from debug_stuck.core.answers import Answer, check_answer
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.libfacts import sets_nccl
from debug_stuck.core.report import Report
from debug_stuck.core.tree import Question
from debug_stuck.errors import BadInput, DebugStuckError, NotInspectable
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.frontends.session.output import SavedReport, copy_to_clipboard
from debug_stuck.frontends.session.probes import (
    PROBE_START_SECONDS,
    ProbeOffer,
    ProbeOutcome,
    probe_argv,
    probe_offer,
    run_probe_child,
)
from debug_stuck.frontends.session.triage import QuestionView, Suggestion, Triage
from debug_stuck.interpreter import isolated_python_module
from debug_stuck.kb import load_knowledge
from debug_stuck.pipeline.look import JobSummary

Say = Callable[[str], None]
GPU_READ_SECONDS = 3.0


GPU_PROBES = ("gpu-health",)
MAX_PROBE_BATCHES = 1_000_000


def _uses_nccl(report: Report) -> bool:
    for process in report.processes or []:
        if sets_nccl(process.get("env")):
            return True
        for thread in process.get("threads") or []:
            if any("nccl" in (f.get("file") or "").lower() for f in thread.get("frames") or []):
                return True
    return False


def fixes_text(fixes: Sequence[Tuple[str, str]]) -> str:
    """The fix commands to paste: each fix's title once, as a comment above its command blocks."""
    blocks: List[str] = []
    last = None
    for title, command in fixes:
        header = f"# {title}"
        if title != last and not command.startswith(header):
            blocks.append(f"{header}\n{command}")
        else:
            blocks.append(command)
        last = title
    return "\n\n".join(blocks) + "\n"


class Session:
    """One interactive session. The front end owns the threads; this owns the state and the work."""

    # Replays (RecordedSession) say so, and front ends stop sampling live data.
    live = True

    def __init__(
        self,
        knowledge: Optional[Knowledge] = None,
        *,
        pids: Sequence[int] = (),
        logs: Sequence[str] = (),
        window: float = 1.0,
        native: bool = True,
        save_dir: Optional[str] = None,
        probe_launcher: Optional[Sequence[str]] = None,
    ):
        self.knowledge = knowledge or load_knowledge()
        self.extra_pids = list(pids)  # offered in step 1 besides the jobs found
        self.window = window
        self.native = native
        self.save_dir = save_dir
        self.probe_launcher = list(probe_launcher or isolated_python_module("debug_stuck"))
        self.job: Optional[JobSummary] = None
        self.pids: List[int] = []
        self.logs: List[str] = list(logs)
        self.evidence: Optional[Report] = None
        self.suggestions: Dict[str, Suggestion] = {}
        self.triage = Triage(self.knowledge.tree)
        self.report: Optional[Report] = None
        self.probe_results: Dict[str, ProbeOutcome] = {}
        self.gpu = GpuHistory()
        self.saved: Optional[SavedReport] = None
        self.pending_output: List[str] = []  # printed when the session ends (fixes with no clipboard)
        self.stopping = threading.Event()  # set when the user quits: running work gives up
        self.job_stopped = False  # the user stopped the job from the session: stop is offered no more

    # -- step 1 ----------------------------------------------------------------------------------
    def discover(self) -> List[JobSummary]:
        from debug_stuck.pipeline.look import find_jobs

        return find_jobs(self.extra_pids, self._read_gpus())

    def attach(self, job: JobSummary) -> JobSummary:
        self.job = job
        self.pids = list(dict.fromkeys([job.pid] + [p for p in self.extra_pids if p in job.pids]))
        self._reset_evidence()
        return job

    def attach_pid(self, text) -> JobSummary:
        """Attach to the job of a PID the user typed. Raises BadInput or NotInspectable."""
        raw = str(text).strip()
        if not raw.isdigit() or int(raw) <= 0:
            raise BadInput(f"{raw!r} is not a PID", "give the number of a process of the job (see ps or top)")
        # A DataLoader worker's PID reads its whole job, as `diagnose --pid` does.
        from debug_stuck.pipeline.look import describe_job

        job, root, note = describe_job(int(raw), self._read_gpus())
        job.note = note
        self.job = job
        self.pids = [root]
        self._reset_evidence()
        return job

    def describe(self, logs: Sequence[str] = ()) -> None:
        """No live job: triage from the answers and, when given, the training logs."""
        paths = []
        for raw in logs:
            for part in shlex.split(str(raw)):
                path = os.path.expanduser(part)
                if not os.path.isfile(path):
                    raise BadInput(f"no log file {part!r}", "give the path of a training log, or leave it empty")
                paths.append(os.path.abspath(path))
        self.job = None
        self.pids = []
        self.logs = paths
        self._reset_evidence()

    def _reset_evidence(self) -> None:
        self.evidence = None
        self.suggestions = {}
        self.report = None

    @property
    def attached(self) -> bool:
        return bool(self.pids)

    # -- step 3: evidence -----------------------------------------------------------------------
    def collect_evidence(self, progress: Optional[Say] = None) -> Report:
        """The preliminary report, with no answer of the user's: what the evidence says alone.
        Raises NotInspectable when the job cannot be read (exited, permissions)."""
        from debug_stuck.pipeline import DiagnoseRequest, diagnose

        if not self.pids and not self.logs:
            report = Report()
        else:
            request = DiagnoseRequest(
                pids=list(self.pids),
                logs=list(self.logs),
                window=self.window,
                native=self.native,
                progress=progress,
                resume=False,
                advice=False,
            )
            report = diagnose(request, self.knowledge)
        if report.gpus:
            self.gpu.add_devices(report.gpus)
        elif report.gpu_note and self.gpu.available is None:
            self.gpu.available, self.gpu.note = False, report.gpu_note
        self.evidence = report
        self.suggestions = self.build_suggestions(report)
        return report

    def sample_gpus(self) -> bool:
        """One GPU reading for the sparklines; False when there is no GPU (stop asking then)."""
        return self._read_gpus() is not None and bool(self.gpu.available)

    def _read_gpus(self):
        if self.gpu.available is False:
            return None
        from debug_stuck.pipeline.look import read_gpus

        try:
            snapshot = read_gpus(GPU_READ_SECONDS, samples=1)
        except Exception as exc:  # a GPU reading is a nicety; it must not end the session
            self.gpu.available, self.gpu.note = False, f"could not read the GPUs: {exc}"
            return None
        self.gpu.add_snapshot(snapshot)
        return snapshot

    def job_gpus(self) -> Optional[List[int]]:
        return self.job.gpus if self.job is not None and self.job.gpus else None

    # -- step 2: triage -------------------------------------------------------------------------
    def build_suggestions(self, report: Report) -> Dict[str, Suggestion]:
        """Pre-fills from the answers the evidence and the logs gave (never the user's own)."""
        questions = self.knowledge.tree.questions
        found: Dict[str, Suggestion] = {}
        for key, entry in report.answers.items():
            question = questions.get(key)
            if question is None or entry.get("source") == "user" or entry.get("value") in (None, UNKNOWN):
                continue
            found[key] = Suggestion(key, entry["value"], entry["source"], self._reason(question, entry))
        # The report keeps only the answers on its own path; a follow-up the user may reach by
        # overriding an answer can still be pre-filled from what the logs and the evidence offered.
        for key, entry in report.suggested_answers.items():
            if key not in found and key in questions and entry.get("value") not in (None, UNKNOWN):
                found[key] = Suggestion(key, entry["value"], entry["source"], self._reason(questions[key], entry))
        gpu = self.gpu.describe_util(self.job_gpus())
        power = self.gpu.describe_power(self.job_gpus())
        if power is not None and "power" not in found:
            found["power"] = Suggestion("power", power[0], "evidence", power[1])
        if gpu is not None:
            value, sentence = gpu
            found["gpu"] = Suggestion("gpu", value, "evidence", sentence)
        elif "gpu" not in found and self.gpu.available is False and self.attached:
            found["gpu"] = Suggestion(
                "gpu", "idle", "evidence", "No GPU was found on this machine, so the job runs nothing on one"
            )
        if "errors" not in found and self.gpu.available is False and self.attached and not _uses_nccl(report):
            found["errors"] = Suggestion(
                "errors",
                "none",
                "evidence",
                "No GPU on this machine and no NCCL in the job, so no Xid, ECC or NCCL error can come from it",
            )
        return found

    @staticmethod
    def _reason(question: Question, entry: dict) -> str:
        why = " ".join(str(entry.get("why") or "").split())
        value = entry["value"]
        meaning = question.values.get(value, value)
        origin = "the log" if entry.get("source") == "log" else "live evidence"
        if not why:
            return f"{origin[0].upper()}{origin[1:]} says {value} ({meaning})"
        # The evidence says it in its own words ("at most 0% CPU"): the answer's name is enough
        # (its meaning is beside it in the choices).
        return f"{why}, so the answer is {value}"

    def next_question(self) -> Optional[QuestionView]:
        pending = self.triage.pending(self.suggestions)
        if not pending:
            return None
        question = self.knowledge.tree.questions[pending[0]]
        if question.kind == "integer":
            choices = [("1", "1: one machine")] + [(UNKNOWN, "unknown: I don't know")]
        else:
            choices = [(v, f"{v}: {meaning}") for v, meaning in question.values.items()]
            choices.append((UNKNOWN, "unknown: I don't know"))
        return QuestionView(
            question=question,
            number=len(self.triage.order) + 1,
            total=len(self.triage.order) + len(pending),
            suggestion=self.suggestions.get(question.key),
            choices=choices,
            probes=[p for p in self.probe_offers(question.probes, f"answers: {question.text}") if self._useful(p)],
        )

    def _useful(self, offer: ProbeOffer) -> bool:
        """A GPU probe on a machine where no GPU was found answers nothing."""
        return not (offer.name in GPU_PROBES and self.gpu.available is False)

    def answer(self, key: str, value: str) -> Answer:
        """Record the user's answer. A confirmed suggestion keeps its source (evidence or log):
        the report then says where the value came from. Raises BadInput."""
        answer = check_answer(self.knowledge.tree.questions, key, value)
        suggestion = self.suggestions.get(answer.key)
        if suggestion is not None and suggestion.value == answer.value:
            answer = Answer(answer.key, answer.value, suggestion.source)
        self.triage.record(answer)
        return answer

    def back(self) -> Optional[str]:
        return self.triage.back()

    @property
    def triage_done(self) -> bool:
        return not self.triage.pending(self.suggestions)

    # -- step 4: probes -------------------------------------------------------------------------
    def probe_offers(self, names: Sequence[str], why: str = "") -> List[ProbeOffer]:
        return [self.probe_offer(name, why) for name in dict.fromkeys(names)]

    def diagnosis_probes(self, report: Optional[Report] = None) -> List[ProbeOffer]:
        """The probes the top causes' playbooks name, best cause first."""
        report = report or self.report or self.evidence
        offers: Dict[str, ProbeOffer] = {}
        for diagnosis in report.diagnoses[:3] if report else []:
            for name in diagnosis.probes:
                if name not in offers:
                    offers[name] = self.probe_offer(name, f"settles: {diagnosis.title}")
        return list(offers.values())

    def probe_offer(self, name: str, why: str = "") -> ProbeOffer:
        return probe_offer(name, why)

    def run_probe(
        self,
        name: str,
        consent: bool = False,
        value: str = "",
        cancel: Optional[threading.Event] = None,
        progress: Optional[Callable[[float, float], None]] = None,
    ) -> ProbeOutcome:
        """Run one probe as `debug-stuck probe NAME --format json` in a child process.

        A cancel (or the session ending) kills the child and everything it started, by PID.
        Raises BadInput when the probe is unknown or runs the user's code without consent."""
        from debug_stuck.probes.targeted.registry import CLEANUP_GRACE

        offer = self.probe_offer(name)
        if not offer.available:
            raise BadInput(f"probe {name!r} is not available in this version", "pick another probe")
        if offer.runs_user_code and not consent:
            raise BadInput(f"probe {name!r} runs your code", "consent first; nothing was run")
        argv = probe_argv(self.probe_launcher, offer, self.pids, consent, value, self._probe_extras(name))
        outcome = run_probe_child(
            argv,
            name,
            limit=offer.timeout + PROBE_START_SECONDS + CLEANUP_GRACE,
            cwd=self.save_dir,
            stop=lambda: (cancel is not None and cancel.is_set()) or self.stopping.is_set(),
            progress=(lambda elapsed: progress(elapsed, offer.timeout)) if progress is not None else None,
        )
        return self._keep(outcome)

    def _keep(self, outcome: ProbeOutcome) -> ProbeOutcome:
        """A probe's result stays until the same probe completes again: a later run that was
        cancelled or failed does not erase what an earlier one found."""
        earlier = self.probe_results.get(outcome.name)
        if earlier is None or outcome.completed or not earlier.completed:
            self.probe_results[outcome.name] = outcome
        return outcome

    def _probe_extras(self, name: str) -> List[str]:
        """What the session knows that a probe should use: the dataloader probe fetches past the step
        the log stopped at (its default of 5 batches proves nothing about a hang at batch 5)."""
        if name != "dataloader" or self.evidence is None:
            return []
        steps = [(log.get("progress") or {}).get("last_step") for log in self.evidence.logs]
        steps = [s for s in steps if isinstance(s, int) and s >= 0]
        if not steps:
            return []
        return ["--batches", str(min(max(steps) + 2, MAX_PROBE_BATCHES))]

    # -- step 5: diagnosis ----------------------------------------------------------------------
    def request_answers(self) -> Dict[str, Answer]:
        return dict(self.triage.answers)

    def diagnose(self, progress: Optional[Say] = None, live: bool = True) -> Report:
        """The final report: `debug_stuck.pipeline.diagnose` with the user's answers, the live job (unless
        live=False, e.g. after it exited) and the probes that ran. Raises NotInspectable."""
        from debug_stuck.pipeline import DiagnoseRequest, diagnose

        logs = list(self.logs)
        if not live and self.evidence is not None:
            logs += [entry["path"] for entry in self.evidence.logs if entry.get("path") not in logs]
        # Probes the user already ran are not run again: their results weigh in the ranking exactly
        # as with `diagnose --probe`.
        done = [outcome.result for outcome in self.probe_results.values() if outcome.completed and outcome.result]
        request = DiagnoseRequest(
            answers=self.request_answers(),
            pids=list(self.pids) if live else [],
            logs=logs,
            window=self.window,
            native=self.native,
            progress=progress,
            probe_results=done,
        )
        report = diagnose(request, self.knowledge)
        # a probe that did not complete (cancelled, timed out) is shown with what it found, not weighed
        ran = {p.get("name") for p in report.probes}
        for name, outcome in self.probe_results.items():
            if name not in ran and outcome.result is not None:
                report.probes.append(outcome.result)
        self.report = report
        return report

    # -- step 6: recovery -----------------------------------------------------------------------
    def save_report(
        self, report: Optional[Report] = None, directory: Optional[str] = None, now: Optional[float] = None
    ) -> SavedReport:
        """Write debug-stuck-report-[<pid>-]<timestamp>.md and .json, named as `debug-stuck stop` names
        its report. Raises BadInput when it cannot."""
        from debug_stuck.render.files import write_report_files

        report = report or self.report
        if report is None:
            raise BadInput("there is no report to save yet", "finish the diagnosis first")
        folder = Path(os.path.expanduser(directory or self.save_dir or os.getcwd()))
        if not folder.is_dir():
            raise BadInput(f"{folder} is not a directory", "give an existing directory to save the report in")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
        prefix = f"{REPORT_PREFIX}{self.pids[0]}-" if self.pids else REPORT_PREFIX
        base = folder / f"{prefix}{stamp}"
        n = 1
        while base.with_suffix(".md").exists() or base.with_suffix(".json").exists():
            n += 1
            base = folder / f"{prefix}{stamp}-{n}"
        try:
            markdown, data = write_report_files(report, str(base))
        except OSError as exc:
            raise BadInput(
                f"cannot write the report in {folder}: {exc.strerror or exc}", "give a writable directory"
            ) from None
        self.saved = SavedReport(markdown, data)
        return self.saved

    def fix_commands(self, report: Optional[Report] = None, cause: Optional[str] = None) -> List[Tuple[str, str]]:
        """(fix title, command block) of one diagnosis (default: the top one)."""
        report = report or self.report
        if report is None or not report.diagnoses:
            return []
        diagnosis = next((d for d in report.diagnoses if d.cause == cause), report.diagnoses[0])
        return [(fix.title, command) for fix in diagnosis.fixes for command in fix.commands]

    def copy_fixes(self, report: Optional[Report] = None, cause: Optional[str] = None) -> str:
        """Copy the fix commands; with no clipboard tool, keep them to print at the end."""
        fixes = self.fix_commands(report, cause)
        if not fixes:
            return "no fix commands to copy"
        text = fixes_text(fixes)
        tool = copy_to_clipboard(text)
        if tool:
            return f"copied {len(fixes)} fix command block(s) to the clipboard ({tool})"
        if text not in self.pending_output:
            self.pending_output.append(text)
        return "no clipboard tool (wl-copy, xclip, pbcopy): the fix commands will be printed when you quit"

    def take_pending_output(self) -> str:
        text = ""
        if self.pending_output:
            text = "Fix commands (copy them from here):\n\n" + "\n".join(self.pending_output)
        self.pending_output = []
        return text

    def recovery_actions(self) -> List[str]:
        """'stop' and 'resume' once a live job is attached; after the session stopped it, 'resume'
        alone (from the plan made while the job could still be read)."""
        if not self.attached:
            return []
        if self.job_stopped:
            return ["resume"] if self.report is not None and self.report.resume else []
        return ["stop", "resume"]

    def run_recovery(self, action: str) -> str:
        """Stop (the front end has asked for confirmation) or plan the resume of the attached job.
        Returns what happened, in text."""
        if action not in self.recovery_actions():
            valid = ", ".join(self.recovery_actions()) or "none (attach to a live job first)"
            raise BadInput(f"no recovery action {action!r} here", f"valid: {valid}")
        pid = self.job.pid if self.job else self.pids[0]
        from debug_stuck.recovery.plan import plan_resume_for_pid
        from debug_stuck.render.resume import render_resume_text

        if action == "stop":
            from debug_stuck.actions.stop import stop_job

            if self.report is not None and self.report.resume is None:
                # planned while the job can still be read: after the stop its command line is gone
                try:
                    self.report.resume = plan_resume_for_pid(pid).to_dict()
                except DebugStuckError:
                    pass
            report_dir = str(Path(self.saved.json).parent) if self.saved else self.save_dir
            summary = stop_job(pid, report_dir=report_dir, report=self.report).summary()
            self.job_stopped = True
            return summary
        if self.job_stopped:
            return render_resume_text(self.report.resume, here=self.save_dir or os.getcwd())
        try:
            resume = plan_resume_for_pid(pid).to_dict()
        except NotInspectable as exc:
            # the CLI's hint names flags (--cmd, --dir) the session has no place for
            raise BadInput(exc.message, "the job can no longer be read; the saved report names its command") from None
        if self.report is not None:
            from debug_stuck.recovery.plan import mark_finished

            self.report.resume = resume  # the report's `resume` object, saved with it
            mark_finished(self.report)
        return render_resume_text(resume, here=self.save_dir or os.getcwd())

    def shutdown(self) -> None:
        """The user quits: running probes are killed, samplers stop."""
        self.stopping.set()
