"""A watcher's incidents in the journal: each stall recorded, then updated with what followed (a
restart, the job moving again, the job's end). A mixin of Watcher; a journal that cannot be
written costs a `warning` event, never the watch."""

from __future__ import annotations

import shlex
import time
from typing import Optional

from debug_stuck.actions.watch.clock import Stall
from debug_stuck.redact import redact_argv


class Journaling:
    def _journal_record(self, stall: Stall, last_step, report: dict, cause_hint) -> Optional[int]:
        if not self.settings.journal:
            return None
        from debug_stuck.actions.journal import Incident, Journal, JournalError

        paths = report.get("paths") or {}
        incident = Incident(
            time=time.time(),
            command=shlex.join(redact_argv(self.original_command or self.job.command)),
            pid=self.job.pid,
            host=self.host,
            cwd=self.job.cwd,
            last_step=last_step,
            seconds_stalled=round(stall.seconds, 1),
            threshold=round(stall.threshold, 1),
            cause=report.get("cause") or cause_hint,
            confidence=report.get("confidence"),
            pattern=report.get("pattern"),
            phase=report.get("phase") or stall.phase,
            summary=report.get("summary") or report.get("error"),
            report_markdown=paths.get("markdown"),
            report_json=paths.get("json"),
            watch_id=self.watch_id,
            attempt=self.restarts + 1,
        )
        try:
            incident_id = Journal().record(incident)
        except JournalError as exc:
            self.emit("warning", message=str(exc))
            return None
        self.incident_ids.append(incident_id)
        return incident_id

    def _journal_ended(self, code: Optional[int], how: str) -> None:
        """The job's end, on every incident of this watch: a restarted job that later finished says so."""
        if not self.incident_ids:
            return
        step = f" at step {self.clock.last_step}" if self.clock.last_step is not None else ""
        restarted = (
            f"the restarted job (run {self.job.run}, pid {self.job.pid})" if self.restarts else f"pid {self.job.pid}"
        )
        ended = f"{restarted} {how}{step}"
        for incident_id in self.incident_ids:
            self._journal_update(incident_id, ended=ended, end_code=code)

    def _journal_update(self, incident_id: Optional[int], **fields) -> None:
        if incident_id is None:
            return
        from debug_stuck.actions.journal import Journal, JournalError

        try:
            Journal().update(incident_id, **fields)
        except JournalError as exc:
            self.emit("warning", message=str(exc))
