"""A session that replays a recorded report: for tests, screenshots and demos."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.report import Report
from debug_stuck.errors import NotInspectable
from debug_stuck.frontends.session.core import Say, Session
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.frontends.session.probes import ProbeOffer, ProbeOutcome
from debug_stuck.frontends.session.triage import Suggestion
from debug_stuck.pipeline.look import JobSummary


class RecordedSession(Session):
    """A session that replays a recorded report: reads no process and runs nothing.

    For tests, screenshots and demos: the evidence and the diagnosis are the recorded report,
    step 1 lists the recorded jobs, and the GPU history is what was recorded."""

    live = False

    def __init__(
        self,
        report: Report,
        knowledge: Optional[Knowledge] = None,
        *,
        jobs: Sequence[JobSummary] = (),
        gpu_history: Optional[GpuHistory] = None,
        probe_offers: Sequence[ProbeOffer] = (),
        save_dir: Optional[str] = None,
    ):
        super().__init__(knowledge, save_dir=save_dir)
        self.recorded = report
        self.recorded_jobs = list(jobs)
        self.recorded_offers = {o.name: o for o in probe_offers}
        if gpu_history is not None:
            self.gpu = gpu_history
        elif self.gpu.available is None:
            self.gpu.available, self.gpu.note = False, report.gpu_note or "no GPU in the recording"

    def discover(self) -> List[JobSummary]:
        return list(self.recorded_jobs)

    def attach_pid(self, text) -> JobSummary:
        raw = str(text).strip()
        job = next((j for j in self.recorded_jobs if raw.isdigit() and int(raw) in j.pids), None)
        if job is None:
            raise NotInspectable(f"process {raw} is not in the recording", "pick a recorded job")
        return self.attach(job)

    def collect_evidence(self, progress: Optional[Say] = None) -> Report:
        if progress is not None:
            progress("replaying the recorded evidence")
        self.evidence = self.recorded
        self.suggestions = self.build_suggestions(self.recorded)
        return self.recorded

    def build_suggestions(self, report: Report) -> Dict[str, Suggestion]:
        questions = self.knowledge.tree.questions
        found = {}
        for key, entry in report.answers.items():
            if key in questions and entry.get("source") in ("evidence", "log"):
                found[key] = Suggestion(key, entry["value"], entry["source"], self._reason(questions[key], entry))
        gpu = self.gpu.describe_util(self.job_gpus())
        if gpu is not None:
            found["gpu"] = Suggestion("gpu", gpu[0], "evidence", gpu[1])
        power = self.gpu.describe_power(self.job_gpus())
        if power is not None:
            found["power"] = Suggestion("power", power[0], "evidence", power[1])
        return found

    def sample_gpus(self) -> bool:
        return False  # the recording does not grow

    def recovery_actions(self) -> List[str]:
        return []  # a replay must never signal a process: the recorded PIDs may be anyone's now

    def probe_offer(self, name: str, why: str = "") -> ProbeOffer:
        recorded = self.recorded_offers.get(name)
        if recorded is None:
            return super().probe_offer(name, why)
        return ProbeOffer(**dict(recorded.__dict__, why=why or recorded.why))

    def _read_gpus(self):
        return None

    def run_probe(self, name, consent=False, value="", cancel=None, progress=None) -> ProbeOutcome:
        recorded = next((p for p in self.recorded.probes if p.get("name") == name), None)
        if recorded is None:
            return self._keep(ProbeOutcome(name, "skipped", "not run: this is a replay of a recorded report"))
        return self._keep(
            ProbeOutcome(name, recorded.get("status", "ok"), recorded.get("summary", ""), 0.0, [], recorded)
        )

    def diagnose(self, progress: Optional[Say] = None, live: bool = True) -> Report:
        if progress is not None:
            progress("replaying the recorded diagnosis")
        self.report = self.recorded
        return self.recorded
