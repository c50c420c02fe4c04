"""The watcher's response to a stall: the incident report (the diagnosis pipeline's), the journal,
then report only, stop the job, or stop and restart it from its last good checkpoint, refusing to
loop on a job that stalls at the same step again. A mixin of Watcher."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from typing import List, Optional

import psutil

from debug_stuck.actions.watch.clock import (
    Stall,
)
from debug_stuck.actions.watch.job import Job
from debug_stuck.actions.watch.journaling import Journaling
from debug_stuck.actions.watch.settings import (
    DIAGNOSIS_SECONDS,
    EXIT_STALLED,
    JOURNAL_LOOKBACK_SECONDS,
    RESUME_PLAN_SECONDS,
)
from debug_stuck.actions.watch.stall_view import StallView
from debug_stuck.bounded import call_with_timeout
from debug_stuck.errors import BadInput
from debug_stuck.pipeline import quick_cause
from debug_stuck.redact import redact_argv


class Responder(StallView, Journaling):
    def _on_stall(self, stall: Stall, now: float) -> Optional[int]:
        self.incidents += 1
        job = self.job
        last_step = self.clock.last_step
        cause_hint = quick_cause(self.knowledge, self.dumps)
        self.emit(
            "stall",
            pid=job.pid,
            seconds=round(stall.seconds, 1),
            threshold=round(stall.threshold, 1),
            rule=stall.rule,
            phase=stall.phase,
            last_step=last_step,
            interval=round(self.clock.interval(), 3) if self.clock.interval() is not None else None,
            cause=cause_hint,
            evidence=self._stall_evidence(),
        )
        report = self._write_report(stall, last_step)
        self.incident_steps.append(last_step)
        incident_id = self._journal_record(stall, last_step, report, cause_hint)
        if job.gone():  # it ended while we were looking at it: nothing to act on
            self._journal_update(incident_id, outcome="the job ended by itself")
            return self._exited()
        if self._follow_logs(time.monotonic()):  # it moved while we were writing the report
            self.emit("resumed", pid=job.pid, step=self.clock.last_step, note="progress resumed during the report")
            self._journal_update(incident_id, outcome="resumed")
            return None
        if self.settings.on_hang == "report":
            self.stalled, self.stalled_incident = stall, incident_id
            self._journal_update(incident_id, action="report")
            return None
        if not report.get("paths"):
            return self._refuse_action(stall, incident_id, report)
        if self.settings.on_hang == "stop":
            self._stop(reason="--on-hang stop")
            self._journal_update(incident_id, action="stop", outcome="stopped")
            return EXIT_STALLED
        if report.get("finished"):
            return self._stop_finished(report["finished"], last_step, incident_id)
        return self._restart(stall, last_step, incident_id)

    def _stop_finished(self, finished: str, last_step: Optional[int], incident_id: Optional[int]) -> int:
        """A job that hangs in Python's exit after its training is stopped, not restarted: a restart
        would train again from the last checkpoint."""
        reason = f"not restarted: {finished}"
        self._stop(reason="--on-hang restart: the job's training had finished")
        self.emit("gave-up", pid=self.job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
        self._journal_update(incident_id, action="stop", outcome=reason)
        return EXIT_STALLED

    def _refuse_action(self, stall: Stall, incident_id: Optional[int], report: dict) -> None:
        """No report on disk, no stop (`debug-stuck stop` refuses too): the evidence would go with the
        job. Said in a `warning` event (and one stderr line); the watch goes on, reporting only."""
        action = self.settings.on_hang
        why = report.get("error") or "no report was written"
        self.refused = (
            f"did not {action} pid {self.job.pid}: its incident report could not be written ({why}); "
            "watching on, reporting only; give a writable --report-dir"
        )
        self.emit("warning", message=self.refused, refused=action, pid=self.job.pid)
        self.stalled, self.stalled_incident = stall, incident_id
        self._journal_update(incident_id, action="report", outcome=f"no {action}: no report could be written")
        return None

    def _stall_note(self, stall: Stall, last_step: Optional[int]) -> str:
        what = f"step {last_step}" if last_step is not None else "any progress"
        return (
            f"debug-stuck watch: no {'new step' if last_step is not None else 'progress'} for "
            f"{stall.seconds:.0f} s (threshold {stall.threshold:.0f} s, rule {stall.rule}); last seen: {what}"
        )

    def _diagnose(self, stall: Stall, last_step: Optional[int]):
        from debug_stuck.pipeline import DiagnoseRequest, diagnose

        plan = self._resume_plan()  # this job's own command and folder: what a restart would run
        request = DiagnoseRequest(
            answers=self._answers(last_step),
            pids=[self.job.pid],
            logs=self._logs(),
            native=self.settings.native,
            resume=False,
            resume_plan=plan.to_dict() if plan is not None else None,
            notes=[self._stall_note(stall, last_step)],
        )
        return diagnose(request, self.knowledge)

    def _answers(self, last_step: Optional[int]) -> dict:
        """Triage answers the watcher knows: mid-run (steps were seen), and whether this job stalled at
        this same step before (this session, or earlier ones in the journal): pattern D, deterministic."""
        from debug_stuck.core.answers import Answer

        answers = {}
        if last_step is None:
            return answers
        answers["phase"] = Answer("phase", "mid-run", "evidence")
        earlier = list(self.incident_steps)
        if self.settings.journal:
            from debug_stuck.actions.journal import Journal, JournalError

            command = shlex.join(redact_argv(self.original_command or self.job.command))
            try:
                since = time.time() - JOURNAL_LOOKBACK_SECONDS
                earlier += [
                    i.last_step for i in Journal().incidents(limit=200) if i.command == command and i.time >= since
                ]
            except JournalError:
                pass
        earlier = [s for s in earlier if s is not None]
        if earlier:
            answers["step"] = Answer("step", "same-step" if last_step in earlier else "random", "evidence")
        return answers

    def _write_report(self, stall: Stall, last_step: Optional[int]) -> dict:
        job = self.job
        out: dict = {"pid": job.pid}
        try:
            report = call_with_timeout(lambda: self._diagnose(stall, last_step), DIAGNOSIS_SECONDS, "the diagnosis")
        except Exception as exc:  # the job may have exited, or a collector failed: say so in a report of its own
            from debug_stuck.core.report import Report

            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            out["error"] = f"could not diagnose: {message}"
            report = Report(errors=[out["error"]], notes=[self._stall_note(stall, last_step)])
        from debug_stuck.render.files import write_report_files

        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.settings.report_dir / f"incident-{stamp}-pid{job.pid}"
        try:
            self.settings.report_dir.mkdir(parents=True, exist_ok=True)
            markdown, data = write_report_files(report, str(base))
            out["paths"] = {"markdown": markdown, "json": data}
        except OSError as exc:
            failed = f"could not write the report into {self.settings.report_dir}: {exc.strerror or exc}"
            out["error"] = f"{out['error']}; {failed}" if out.get("error") else failed
        verdict = report.verdict
        out.update(
            cause=verdict.cause,
            confidence=verdict.confidence,
            pattern=report.pattern,
            phase=verdict.phase,
            hung=verdict.hung,
            summary=verdict.summary,
        )
        self.emit("report", **out)
        finished = (report.resume or {}).get("finished")
        if finished:
            out["finished"] = finished  # for the restart: not an event field
        return out

    # -- stop and restart -------------------------------------------------------------------------

    def _resume_plan(self):
        from debug_stuck.recovery.plan import plan_resume

        job = self.job
        try:
            return call_with_timeout(
                lambda: plan_resume(job.command, job.cwd, env=job.env), RESUME_PLAN_SECONDS, "resume plan"
            )
        except Exception as exc:  # no plan is a fallback, not a failure of the watch
            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            self.emit("warning", message=f"could not plan the resume: {message}")
            return None

    def _stop(self, reason: str, action: str = "stop") -> dict:
        """End the job's whole tree (debug_stuck.actions.stop.stop_job; for a job we launched, its own
        session as the fallback), then tell what happened in an `action` event. Returns that event's data."""
        from debug_stuck.actions.stop import stop_job

        job = self.job
        started = time.monotonic()
        result: dict = {"action": action, "pid": job.pid, "reason": reason, "via": "stop_job"}
        box: dict = {}

        def run():
            try:
                box["result"] = stop_job(
                    job.pid, report_dir=str(self.settings.report_dir), grace=self.settings.grace, write_report=False
                )
            except Exception as exc:  # reported below; the fallback still ends our own session
                box["error"] = exc

        worker = threading.Thread(target=run, name="watch:stop", daemon=True)
        worker.start()
        deadline = time.monotonic() + 3 * self.settings.grace + 30.0
        while worker.is_alive() and time.monotonic() < deadline:
            if job.proc is not None:
                job.proc.poll()  # reap our child as soon as it dies, so the stopper sees it gone
            worker.join(0.1)
        stopped = box.get("result")
        if stopped is not None:
            result.update(stopped=list(stopped.stopped), signals=list(stopped.signals), left=list(stopped.left or []))
        else:
            error = box.get("error")
            message = error.one_line() if hasattr(error, "one_line") else str(error or "did not return in time")
            result["error"] = f"stop_job: {message}"
        if job.launched and (result.get("error") or result.get("left")):
            result["via"] = "stop_job+session"
            result["left"] = self._stop_own_session()
        if job.proc is not None:
            try:
                job.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        result["seconds"] = round(time.monotonic() - started, 1)
        self.emit("action", **result)
        return result

    def _stop_own_session(self) -> List[int]:
        """End the session we launched the job in: SIGINT, SIGTERM, then SIGKILL (every process in it is the job's)."""
        job = self.job
        pgid = job.proc.pid
        steps = ((signal.SIGINT, self.settings.grace / 2), (signal.SIGTERM, self.settings.grace / 2))
        for sig, wait in steps:
            try:
                os.killpg(pgid, signal.SIGCONT)  # a stopped (SIGSTOP, Ctrl-Z) process cannot shut down cleanly
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                return []
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if job.proc.poll() is not None and not _group_alive(pgid):
                    return []
                time.sleep(0.1)
        from debug_stuck.bounded import kill_process_group

        kill_process_group(pgid)
        try:
            job.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return [pgid]
        return []

    def _restart(self, stall: Stall, last_step: Optional[int], incident_id: Optional[int]) -> Optional[int]:
        job = self.job
        reason = None
        if self.restarts >= self.settings.max_restarts:
            reason = f"reached --max-restarts {self.settings.max_restarts}"
        elif self.restarts > 0:
            best = self.clock.max_step
            previous = self.previous_incident_step
            if previous is None and best is None:
                reason = "no progress since the last restart: the job shows no step counter that moved"
            elif previous is not None and (best is None or best <= previous):
                where = f"step {last_step}" if last_step is not None else "before its first step"
                reason = (
                    f"no progress since the last restart: it stalled again at {where} without getting past step "
                    f"{previous} (a deterministic hang: restarting will not help, read the report)"
                )
        if reason is not None:
            self._stop(reason="giving up on restarts")
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self.previous_incident_step = last_step
        stopped = self._stop(reason="--on-hang restart", action="restart")
        if stopped.get("left"):
            reason = f"processes still alive after the stop: {stopped['left']}; not starting a second copy"
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self._follow_logs(time.monotonic(), final=True)  # the old run's last words (a traceback from the stop)
        plan = self._resume_plan()
        command, env, resume, warning = list(job.command), job.env, {}, None
        if plan is None:
            resume["note"] = "no resume plan (it could not be made): restarting the original command"
        else:
            if plan.argv:
                command = [str(a) for a in plan.argv]
            if plan.env:
                env = dict(os.environ if env is None else env)
                env.update(plan.env)
            checkpoint = plan.checkpoint
            resume = {
                "checkpoint": checkpoint.path if checkpoint is not None else None,
                "checkpoint_step": checkpoint.step if checkpoint is not None else None,
                "framework": plan.framework,
                "lost": plan.lost,
                "notes": list(plan.notes),
            }
            unchanged = [str(a) for a in (plan.argv or job.command)] == list(job.command) and not plan.env
            if checkpoint is not None and unchanged:
                # Nothing tells the relaunch where to start: the same command starts over.
                where = f"{checkpoint.path}" + (f" (step {checkpoint.step})" if checkpoint.step is not None else "")
                resume.update(checkpoint=None, checkpoint_step=None)
                resume["lost"] = (
                    "everything: it restarts from step 0 (the command is unchanged: the script takes no resume "
                    f"option, so the newest checkpoint, {where}, is not passed to it)"
                )
                resume["notes"].append(f"not resumed: {where} is the newest valid checkpoint, unused by this relaunch")
                warning = (
                    f"the restart does not resume from {where}: the script declares no resume option, so the same "
                    "command starts over from step 0 and every step so far is redone; give the script a --resume "
                    "option that loads the checkpoint"
                )
            elif checkpoint is not None and checkpoint.step is not None:
                self.expect_resume_after = checkpoint.step
        self.restarts += 1
        new = Job(
            pid=0, command=command, cwd=(plan.cwd if plan is not None else None) or job.cwd, env=env, run=job.run + 1
        )
        try:
            self._start(new, restarted_from=job.pid)
        except BadInput as exc:
            self.emit("gave-up", pid=job.pid, reason=f"could not relaunch: {exc.one_line()}", restarts=self.restarts)
            self._journal_update(incident_id, action="gave-up", outcome="relaunch failed")
            return EXIT_STALLED
        start = " from step 0 (no resume option)" if warning else ""
        self._journal_update(incident_id, action="restart", outcome=f"restarted as pid {new.pid}{start}")
        if warning:
            self.emit("warning", message=warning)
        self.emit(
            "restarted",
            pid=new.pid,
            previous_pid=job.pid,
            attempt=self.restarts,
            max_restarts=self.settings.max_restarts,
            command=redact_argv(command),
            log=new.log,
            **resume,
        )
        return None

    # -- the end ----------------------------------------------------------------------------------


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Signal 0 also reaches zombies: only count members that still run.
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False
