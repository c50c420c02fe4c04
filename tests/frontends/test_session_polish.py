"""The session's rough edges, each driven as a user meets it: q in every overlay, a PID dialog that
keeps bad input, triage that does not ask what the machine already answers and never shows an
answer nobody gave, probe results that stay, screens that do not go stale, words instead of
jargon, a short terminal that leaves room for the tab, one report name, digits on the diagnosis,
and recovery that stops offering what it has done."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest
from zoo.fixtures import zoo  # noqa: F401

pytest.importorskip("textual")

from textual.widgets import OptionList, Static  # noqa: E402
from tui_pilot import attach_by_pid, open_the_pid_dialog, text_of, wait_for  # noqa: E402
from tui_recorded import FROZEN_NOW, recorded_session  # noqa: E402

from debug_stuck.frontends.session.core import Session  # noqa: E402
from debug_stuck.frontends.session.probes import ProbeOutcome, probe_offer  # noqa: E402
from debug_stuck.frontends.tui.app import DebugStuckApp  # noqa: E402
from debug_stuck.frontends.tui.screens import pick  # noqa: E402
from debug_stuck.frontends.tui.screens.diagnosis import DiagnosisScreen  # noqa: E402
from debug_stuck.frontends.tui.screens.dialogs import ConfirmDialog, HelpScreen  # noqa: E402
from debug_stuck.frontends.tui.screens.pick import PickJobScreen  # noqa: E402
from debug_stuck.frontends.tui.screens.probe import ProbeScreen  # noqa: E402
from debug_stuck.frontends.tui.screens.recovery import RecoveryScreen  # noqa: E402
from debug_stuck.frontends.tui.screens.triage import TriageScreen  # noqa: E402
from debug_stuck.render.markdown import render_markdown  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def footer_keys(app) -> set:
    """The keys the footer shows now (bindings the screen enables)."""
    return {b.binding.key for b in app.active_bindings.values() if b.enabled and b.binding.show}


def dead_pid() -> int:
    """A PID no process has: a child that exited and was reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- 1: q everywhere -------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["help", "probes"])
def test_q_quits_from_inside_an_overlay(knowledge, tmp_path, overlay):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path, save_dir="."), clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            if overlay == "help":
                await pilot.press("question_mark")
                await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
            else:
                app.push_screen(ProbeScreen([probe_offer("env", "is a test")], rerank=False))
                await wait_for(pilot, lambda: isinstance(app.screen, ProbeScreen), "the probe dialog")
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_value is not None, "the app to quit")

    asyncio.run(scenario())
    assert app.return_value == 0


# -- 2: the PID dialog keeps what is not a PID -------------------------------------------------------


def test_the_pid_dialog_keeps_bad_input_open_with_the_reason(knowledge, tmp_path):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path, save_dir="."), clock=lambda: FROZEN_NOW)
    gone = dead_pid()

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await open_the_pid_dialog(pilot, app)
            dialog = app.screen
            await pilot.press("a", "b", "c", "enter")
            await pilot.pause()
            assert app.screen is dialog
            assert "'abc' is not a PID" in text_of(dialog.query_one("#dialog-error", Static))
            await pilot.press("backspace", "backspace", "backspace", *str(gone), "enter")
            await pilot.pause()
            assert app.screen is dialog
            assert f"no process {gone} on this machine" in text_of(dialog.query_one("#dialog-error", Static))
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen), "step 1")
            # none of those Enters reached the job list: nothing was attached
            assert app.session.job is None and not app.session.pids

    asyncio.run(scenario())


# -- 5: step 1 does not go stale -------------------------------------------------------------------


def test_step_one_redraws_its_times_and_rescans_when_shown_again(knowledge, tmp_path, monkeypatch):
    monkeypatch.setattr(pick, "REDRAW_SECONDS", 0.1)
    now = [FROZEN_NOW]
    session = recorded_session(knowledge, tmp_path, save_dir=".")
    scans = []
    discover = session.discover
    session.discover = lambda: scans.append(1) or discover()
    app = DebugStuckApp(session, clock=lambda: now[0])

    def job_line() -> str:
        options = app.screen.query_one("#jobs", OptionList)
        return str(options.get_option_at_index(0).prompt)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            assert "up 3 h 12 min" in job_line(), job_line()
            now[0] += 300
            await wait_for(pilot, lambda: "up 3 h 17 min" in job_line(), "the redraw")
            assert "log quiet for 56 min" in job_line()
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen), "triage")
            count = len(scans)
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen), "step 1 again")
            await wait_for(pilot, lambda: len(scans) > count and not app.discovering, "a new scan")

    asyncio.run(scenario())


# -- 4, 6, 7, 10: the diagnosis screen -------------------------------------------------------------


def test_the_diagnosis_speaks_in_words_leaves_room_and_takes_digits(knowledge, tmp_path):
    session = recorded_session(knowledge, tmp_path, save_dir=".")
    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen), "triage")
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen) and not app.diagnosing, "diagnosis")
            await pilot.pause()
            screen = app.screen
            head = text_of(screen.query_one("#verdict", Static))
            assert head.startswith("HUNG inside a training step; it stops mid-run with the GPU busy"), head
            assert "pattern" not in head and "phase" not in head and "prior" not in head
            # 80x24: the verdict keeps to its first sentence, the causes to three rows, the tab has room
            tabs = screen.query_one("#diag-tabs")
            assert tabs.region.height >= 10, tabs.region
            evidence = text_of(screen.query_one("#cause-evidence", Static))
            assert "before any evidence" in evidence and "with prior" not in evidence
            # the answers nobody gave are not shown as answers
            assert "errors=none" not in evidence and "errors not asked (usually none)" in evidence, evidence
            causes = screen.query_one("#causes", OptionList)
            await pilot.press("2")
            await pilot.pause()
            assert causes.highlighted == 1 and screen.cause == session.report.diagnoses[1].cause
            await pilot.press("1")
            await pilot.pause()
            assert causes.highlighted == 0

    asyncio.run(scenario())


def test_probe_results_stay_say_what_they_do_and_reach_the_report(knowledge, tmp_path):
    session = recorded_session(knowledge, tmp_path, save_dir=".")
    offer = probe_offer("storage")
    assert offer.safety_text == "writes a temporary file" and offer.input_optional
    assert probe_offer("dataloader").safety_text == "runs your code"
    ok = ProbeOutcome("env", "ok", "no risky setting", 0.4, [{"severity": "info", "message": "fine"}], {"name": "env"})
    session._keep(ok)
    session._keep(ProbeOutcome("env", "cancelled", "cancelled; nothing is left running", 0.2))
    assert session.probe_results["env"] is ok  # a cancelled rerun does not erase the result
    session.evidence = session.report = session.recorded
    extra = session._probe_extras("dataloader")
    assert extra == ["--batches", "4120"]  # past step 4118, where the log stopped

    report = session.report
    report.probes = [dict(name="env", status="ok", summary="no risky setting", findings=ok.findings)]
    markdown = render_markdown(report)
    assert "## Probes run" in markdown and "- **env**: OK: no risky setting" in markdown

    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)
    top = report.diagnoses[0]
    top.probe_items = [dict(name="env", command="debug-stuck probe env --pid 4100", safety={"text": "reads only"})]

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            app.push_screen(DiagnosisScreen())
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen), "diagnosis")
            await pilot.pause()
            evidence = text_of(app.screen.query_one("#cause-evidence", Static))
            assert "Ran: probe env: OK" in evidence and "settle it with a probe" not in evidence, evidence
            app.push_screen(ProbeScreen([probe_offer("storage"), probe_offer("env")], rerank=False))
            await wait_for(pilot, lambda: isinstance(app.screen, ProbeScreen), "the probe dialog")
            await pilot.pause()
            dialog = app.screen
            listed = [str(o.prompt) for o in dialog.query_one("#probe-list", OptionList)._options]
            assert "storage  (writes a temporary file)" in listed, listed
            assert "probe env: OK" in text_of(dialog.query_one("#probe-history", Static))

    asyncio.run(scenario())


# -- 3 and 10: a live job with no GPU, stopped from the session -----------------------------------------


def test_a_live_job_on_a_machine_with_no_gpu_then_stopped_from_the_session(knowledge, zoo, tmp_path):  # noqa: F811
    job = zoo("lock_deadlock")
    session = Session(knowledge, save_dir=str(tmp_path))
    app = DebugStuckApp(session)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await attach_by_pid(pilot, app, job.proc.pid)
            await wait_for(pilot, lambda: app.evidence is not None and not app.collecting, "the live evidence")
            if session.gpu.available is not False:
                pytest.skip("this machine has a GPU: the no-GPU answers do not apply")
            # the machine answers the hardware-errors question itself, and offers no GPU probe
            suggestion = session.suggestions.get("errors")
            assert suggestion is not None and suggestion.value == "none" and "No GPU" in suggestion.reason
            triage = app.screen
            while isinstance(app.screen, TriageScreen):
                view = triage.view
                if view is not None and view.key == "errors":
                    assert all(p.name != "gpu-health" for p in view.probes)
                await pilot.press("enter")
                await pilot.pause()
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen) and not app.diagnosing, "diagnosis")
            # confirming the machine's answer keeps its source: the report never calls it the user's
            asked = session.triage.answers.get("errors")
            assert asked is None or asked.source == "evidence", asked
            assert (session.report.answers.get("errors") or {}).get("source") != "user"

            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, RecoveryScreen), "recovery")
            await pilot.pause()
            assert {"x", "z"} <= footer_keys(app)  # the footer names them
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
            await pilot.press("y")
            await wait_for(pilot, lambda: session.job_stopped, "the stop", 60)
            await pilot.pause()
            recovery = app.screen
            assert not recovery.query_one("#stop").display  # stopped: not offered again
            assert "x" not in footer_keys(app) and "z" in footer_keys(app)
            await pilot.press("z")
            await wait_for(
                pilot, lambda: "resume:" in text_of(recovery.query_one("#recovery-output", Static)), "resume"
            )
            said = text_of(recovery.query_one("#recovery-output", Static))
            assert "--cmd" not in said and "--dir" not in said, said

    asyncio.run(scenario())
    written = sorted(p.name for p in tmp_path.glob("debug-stuck-report-*.md"))
    assert written and all(re.match(rf"debug-stuck-report-{job.proc.pid}-\d{{8}}-\d{{6}}", n) for n in written)
