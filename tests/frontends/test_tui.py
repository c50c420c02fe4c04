"""The Textual app of the interactive session.

Pilot drives the whole session against a real hung process of the zoo (pick the job by PID,
triage with pre-filled answers, live evidence, a probe, the diagnosis, the saved report) and the
probe dialog on a real tree of processes (consent, progress, cancel, Ctrl-C). Snapshots of every
screen at 80x24 and 160x48 come from a recorded session (tests/tui_recorded.py), so they are the
same on every machine; update them with `pytest tests/test_tui.py --snapshot-update`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from zoo.fixtures import zoo  # noqa: F401

pytest.importorskip("textual")

from textual.widgets import Button, DataTable, Markdown, OptionList, Static, TabbedContent  # noqa: E402
from tui_pilot import attach_by_pid, text_of, wait_for  # noqa: E402
from tui_recorded import FROZEN_NOW, recorded_session  # noqa: E402

from debug_stuck.frontends.session.core import Session
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.frontends.session.recorded import RecordedSession
from debug_stuck.frontends.tui.app import DebugStuckApp  # noqa: E402
from debug_stuck.frontends.tui.screens.diagnosis import DiagnosisScreen
from debug_stuck.frontends.tui.screens.dialogs import ConfirmDialog, HelpScreen, InputDialog, StoppingScreen
from debug_stuck.frontends.tui.screens.pick import PickJobScreen
from debug_stuck.frontends.tui.screens.probe import ProbeScreen
from debug_stuck.frontends.tui.screens.recovery import RecoveryScreen
from debug_stuck.frontends.tui.screens.triage import TriageScreen

HERE = Path(__file__).parents[1]
PROBE_HOST = [sys.executable, str(HERE / "probe_plugins" / "probe_host.py")]
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


def non_daemon_threads_besides(before) -> list:
    return [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]


def children_besides(pids) -> list:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in pids and child.status() != psutil.STATUS_ZOMBIE:
                out.append((child.pid, child.name()))
        except psutil.Error:
            pass
    return out


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- the whole session, live ------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_whole_session_against_a_hung_process(knowledge, zoo, tmp_path):  # noqa: F811
    job = zoo("future_result")
    job_pids = set(job.pids())
    session = Session(knowledge, save_dir=str(tmp_path))
    app = DebugStuckApp(session)
    overrides = {"phase": "mid-run", "step": "random"}  # what the user knows; evidence gives the rest
    threads_before = set(threading.enumerate())
    seen = {}

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            # Step 1: attach by PID (a job without libtorch is not in the list of training jobs)
            await attach_by_pid(pilot, app, job.proc.pid)
            triage = app.screen
            await wait_for(pilot, lambda: app.evidence is not None and not app.collecting, "the live evidence")
            await pilot.pause()

            # Step 3: the evidence pane shows the process, what it does, its stack, the GPUs
            table = triage.query_one("#processes", DataTable)
            assert table.row_count == 1
            row = [str(cell) for cell in table.get_row_at(0)]
            assert row[0] == str(job.proc.pid) and row[1] == "rank" and "result" in row[5], row
            assert "wait (threading.py" in text_of(triage.query_one("#groups", Static))
            if session.gpu.available is False:
                assert text_of(triage.query_one("#no-gpu", Static)).startswith("no GPU")

            # Step 2: every question says why; pre-filled ones are highlighted; the user overrides two
            while isinstance(app.screen, TriageScreen):
                view = triage.view
                assert text_of(triage.query_one("#why", Static)).startswith("Why we ask: ")
                choices = triage.query_one("#choices", OptionList)
                values = [value for value, _ in view.choices]
                if view.default is not None:
                    assert values[choices.highlighted] == view.default
                if view.suggestion is not None:
                    assert text_of(triage.query_one("#suggestion", Static)).endswith("-- correct?")
                seen[view.key] = view.suggestion
                if view.key in overrides:
                    await pilot.press(str(values.index(overrides[view.key]) + 1))
                else:
                    await pilot.press("enter")
                await pilot.pause()
            assert seen["cpu"] is not None and seen["cpu"].value == "idle"  # from the live evidence

            # Step 5: the diagnosis names the cause, with its evidence, fix and playbook
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen), "the diagnosis screen")
            diagnosis = app.screen
            await wait_for(pilot, lambda: not app.diagnosing, "the diagnosis")
            await pilot.pause()
            headline = " ".join(text_of(diagnosis.query_one("#verdict", Static)).split())
            assert headline.startswith("HUNG") and "Most likely: Threads or processes" in headline, headline
            assert "pattern" not in headline and "phase" not in headline  # words, not letters and ids
            # the headline names the end of the wait: the pool thread, what it waits for, where
            assert "thread 'loader_0', the pool's worker thread, waits for an Event nobody sets" in headline
            assert "its main thread waits for it in result" in headline
            causes = diagnosis.query_one("#causes", OptionList)
            assert causes.get_option_at_index(0).id == "thread-deadlock"
            assert "Future.result()" in text_of(diagnosis.query_one("#cause-evidence", Static))
            await pilot.press("m")
            await pilot.pause()
            assert diagnosis.query_one("#diag-tabs", TabbedContent).active == "tab-playbook"
            assert "Why it happens" in diagnosis.query_one("#playbook", Markdown).source

            # Step 4: the env probe (reads only) runs, and its findings reach the ranking
            await pilot.press("p")
            await wait_for(pilot, lambda: isinstance(app.screen, ProbeScreen), "the probe dialog")
            dialog = app.screen
            names = [dialog.query_one("#probe-list", OptionList).get_option_at_index(i).id for i in range(2)]
            assert names[0] == "env", names
            await pilot.press("enter")
            await wait_for(pilot, lambda: dialog.completed and not dialog.running, "the env probe", 60)
            assert text_of(dialog.query_one("#probe-result", Static)).startswith("probe env: ")
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen), "the dialog to close")
            await wait_for(pilot, lambda: not app.diagnosing, "the diagnosis with the probe")
            assert [p["name"] for p in session.report.probes] == ["env"]
            assert session.report.verdict.cause == "thread-deadlock"

            # Step 6: save the report with the mouse
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, RecoveryScreen), "the recovery screen")
            await pilot.pause()
            await pilot.click("#save")
            await wait_for(pilot, lambda: session.saved is not None, "the saved report")
            await pilot.pause()
            assert "report saved" in text_of(app.screen.query_one("#saved", Static))
            assert app.screen.query_one("#stop", Button).display  # a live job is attached: stop is offered
            await pilot.press("q")

    asyncio.run(scenario())
    assert app.return_value == 0
    saved = json.loads(Path(session.saved.json).read_text())
    assert saved["verdict"]["cause"] == "thread-deadlock" and Path(session.saved.markdown).parent == tmp_path
    assert saved["answers"]["phase"] == {"value": "mid-run", "source": "user"}
    assert saved["answers"]["cpu"]["source"] == "evidence"
    assert non_daemon_threads_besides(threads_before) == []
    assert children_besides(job_pids) == []


# -- the probe dialog on a real tree of processes ---------------------------------------------------


@pytest.mark.timeout(180)
def test_probe_consent_progress_cancel_and_ctrl_c(knowledge, tmp_path, monkeypatch, request):
    from debug_stuck.probes.targeted.registry import REGISTRY

    monkeypatch.syspath_prepend(str(HERE / "probe_plugins"))
    import slow_user_probe

    monkeypatch.setitem(REGISTRY, slow_user_probe.NAME, slow_user_probe.SPEC)
    session = Session(knowledge, save_dir=str(tmp_path), probe_launcher=PROBE_HOST)
    app = DebugStuckApp(session)
    threads_before = set(threading.enumerate())
    sleepers: list = []
    request.addfinalizer(lambda: [p.kill() for p in sleepers if alive(p)])

    def sleeping() -> list:
        found = []
        for child in psutil.Process().children(recursive=True):
            try:
                if child.name() == "sleep":
                    found.append(child)
            except psutil.Error:
                pass
        sleepers.extend(p for p in found if p not in sleepers)
        return found

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            app.push_screen(ProbeScreen([session.probe_offer("slow-user-code", "is a test")], rerank=False))
            await wait_for(pilot, lambda: isinstance(app.screen, ProbeScreen), "the probe dialog")
            dialog = app.screen
            await pilot.pause()
            assert "RUNS YOUR CODE" in text_of(dialog.query_one("#probe-detail", Static))
            assert str(dialog.query_one("#probe-run", Button).label) == "Run: I consent"
            await pilot.press("enter")  # Enter on the list is not consent
            await pilot.pause(0.3)
            assert not dialog.running and not sleeping()

            await pilot.click("#probe-run")
            await wait_for(pilot, lambda: bool(sleeping()), "the probe's command", 30)
            await wait_for(pilot, lambda: dialog.query_one("#probe-progress").progress > 0, "progress")
            first = list(sleeping())
            await pilot.press("c")
            await wait_for(pilot, lambda: not dialog.running, "the cancel", 30)
            assert session.probe_results["slow-user-code"].status == "cancelled"
            assert not any(alive(p) for p in first), "the probe's command survived the cancel"

            await pilot.click("#probe-run")
            await wait_for(pilot, lambda: bool([p for p in sleeping() if p not in first]), "the second run", 30)
            await pilot.press("ctrl+c")  # quits while the probe runs: the probe goes too

    started = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - started < 90
    assert sleepers and not any(alive(p) for p in sleepers)
    assert non_daemon_threads_besides(threads_before) == []
    assert children_besides(set()) == []


def test_describe_a_dead_job_from_its_log(knowledge, tmp_path):
    from conftest import example_request as load_example

    log = tmp_path / "train.log"
    log.write_bytes(Path(load_example(knowledge, "nanochat-collective").logs[0]).read_bytes())
    session = Session(knowledge, save_dir=str(tmp_path))
    app = DebugStuckApp(session)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), "the describe dialog")
            await pilot.press(*"/no/such.log", "enter")
            await wait_for(pilot, lambda: "no log file" in text_of(app.screen.query_one("#attach-error")), "error")
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, InputDialog), "the describe dialog")
            await pilot.press(*str(log), "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen) and not app.collecting, "the log")
            await pilot.pause()
            triage = app.screen
            assert triage.view.key == "phase" and triage.view.suggestion.source == "log"
            assert "train.log shows step 4118" in text_of(triage.query_one("#suggestion", Static))
            # mid-run as the log says, random steps, no errors, GPU busy, steps stopped, low power
            await pilot.press("enter", "2", "enter", "2", "enter", "1")
            await wait_for(pilot, lambda: isinstance(app.screen, DiagnosisScreen) and not app.diagnosing, "diagnosis")
            await pilot.pause()
            verdict = text_of(app.screen.query_one("#verdict", Static))
            # the triage answers and an NCCL trace's presence (context) alone: a best guess, not a verdict
            assert "it stops mid-run with the GPU busy" in verdict, verdict
            assert "the best guess is Ranks deadlocked" in verdict, verdict
            assert "not observed live" in verdict  # no live job: the log is too fresh to call it hung
            assert session.report.answers["phase"]["source"] == "log"
            await pilot.press("q")

    asyncio.run(scenario())
    assert app.return_value == 0


@pytest.mark.timeout(180)
def test_stop_from_the_recovery_screen_asks_first(knowledge, zoo, tmp_path):  # noqa: F811
    job = zoo("future_result")
    session = Session(knowledge, save_dir=str(tmp_path))
    session.attach_pid(str(job.proc.pid))
    session.diagnose()
    pids = job.pids()
    app = DebugStuckApp(session)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen) and not app.discovering, "the scan")
            app.open_recovery()
            await wait_for(pilot, lambda: isinstance(app.screen, RecoveryScreen), "the recovery screen")
            await pilot.pause()
            recovery = app.screen
            assert recovery.query_one("#stop", Button).display and recovery.query_one("#resume", Button).display
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
            await pilot.press("n")
            await wait_for(pilot, lambda: app.screen is recovery, "the dialog to close")
            assert all(alive(psutil.Process(p)) for p in pids), "'no' stops nothing"
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
            await pilot.press("y")
            output = recovery.query_one("#recovery-output", Static)
            await wait_for(pilot, lambda: text_of(output).startswith("stop: "), "the job to stop", 90)
            assert "stopped" in text_of(output)
            await pilot.press("q")

    asyncio.run(scenario())
    assert not any(_pid_alive(p) for p in pids)


def _pid_alive(pid: int) -> bool:
    try:
        return alive(psutil.Process(pid))
    except psutil.Error:
        return False


def test_help_opens_and_closes(knowledge, tmp_path):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path, save_dir="."), clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, PickJobScreen), "help to close")
            await pilot.press("q")

    asyncio.run(scenario())
    assert app.return_value == 0


def test_recorded_session_prefills_from_its_log_and_gpu_readings(knowledge, tmp_path):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)
    session = app.session

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            await press_settled(pilot, ANSWERED)
            assert isinstance(app.screen, DiagnosisScreen)
            await pilot.press("q")

    asyncio.run(scenario())
    assert session.suggestions["phase"].source == "log" and "step 4118" in session.suggestions["phase"].reason
    assert session.suggestions["gpu"].reason == "GPU util has been 100% on all 2 GPUs for 40 s"
    assert session.suggestions["power"].value == "low"
    assert list(session.triage.answers) == ["phase", "step", "event", "gpu"]
    assert session.triage.answers["gpu"].source == "evidence"


# -- snapshots of every screen, from a recorded session --------------------------------------------

# Pick the recorded job, then Enter on each of its 4 questions (phase, step, event, gpu): the
# highlighted answer is the suggestion or the tree's default.
ANSWERED = ["enter"] * 5

SCREENS = {
    "pick": [],
    "triage": ["enter"],
    "triage-evidence": ["enter", "e"],
    "diagnosis": ANSWERED,
    "diagnosis-fix": ANSWERED + ["f"],
    "diagnosis-playbook": ANSWERED + ["m"],
    "diagnosis-live": ANSWERED + ["l"],
    "probes": ANSWERED + ["p"],
    "recovery": ANSWERED + ["s"],
    "help": ["question_mark"],
}


@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen_snapshot(snap_compare, knowledge, tmp_path, screen, size):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path, save_dir="."), clock=lambda: FROZEN_NOW)

    async def run_before(pilot) -> None:
        await settle(pilot)
        await press_settled(pilot, SCREENS[screen])

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


async def press_settled(pilot, keys) -> None:
    """Each key, then wait for what it started (screens, collection workers) to settle."""
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.timeout(120)
def test_missing_evidence_is_shown_with_what_would_get_it(knowledge, tmp_path):
    # issue 16: a partial report (stacks denied) says so in the evidence pane and the plain prompts
    from debug_stuck.frontends.prompts import render_evidence

    session = recorded_session(knowledge, tmp_path)
    session.recorded.missing = [
        {
            "what": "Python stacks of process(es) 4101",
            "why": "not allowed to read the stacks of process 4101",
            "get_it": "run it as root: sudo debug-stuck diagnose --pid 4101",
        }
    ]
    plain = render_evidence(session.recorded, session)
    assert "Missing: Python stacks of process(es) 4101: not allowed" in plain
    assert "To get it: run it as root: sudo debug-stuck diagnose --pid 4101" in plain

    async def scenario():
        app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            await pilot.press("e")
            await settle(pilot)
            shown = text_of(app.screen.query_one("#evidence-errors", Static))
            assert "missing: Python stacks of process(es) 4101" in shown
            assert "sudo debug-stuck diagnose --pid 4101" in shown

    asyncio.run(scenario())


# -- issue 17: the session, polished ----------------------------------------------------------------


async def _to_triage(pilot) -> TriageScreen:
    await settle(pilot)
    await pilot.press("enter")  # the recorded job
    await settle(pilot)
    assert isinstance(pilot.app.screen, TriageScreen)
    return pilot.app.screen


@pytest.mark.timeout(120)
def test_evidence_shown_then_hidden_at_80x24_gives_the_question_its_focus_back(knowledge, tmp_path):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)
    session = app.session

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            triage = await _to_triage(pilot)
            assert triage.view.key == "phase" and triage.view.suggestion.value == "mid-run"
            await pilot.press("e")
            await settle(pilot)
            pane = triage.query_one("#evidence")
            assert pane.display and app.focused is pane  # the arrows scroll the evidence
            await pilot.press("e")
            await settle(pilot)
            assert app.focused is triage.query_one("#choices", OptionList)
            await pilot.press("enter")  # confirms the suggestion
            await settle(pilot)
            assert session.triage.answers["phase"].value == "mid-run"
            assert triage.view.key != "phase"

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_back_from_a_diagnosis_asked_early_keeps_every_answer(knowledge, tmp_path):
    app = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)
    session = app.session

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            triage = await _to_triage(pilot)
            await pilot.press("enter", "enter")  # questions 1 and 2
            await settle(pilot)
            assert triage.view.number == 3
            third = triage.view.key
            await pilot.press("d")  # diagnose now, at question 3
            await settle(pilot)
            assert isinstance(app.screen, DiagnosisScreen)
            await pilot.press("b")
            await settle(pilot)
            assert app.screen is triage and triage.view.number == 3 and triage.view.key == third
            assert list(session.triage.answers) == ["phase", "step"]
            # With every question answered, back re-asks the last one.
            while isinstance(app.screen, TriageScreen):
                await pilot.press("enter")
                await settle(pilot)
            answered = list(session.triage.answers)
            await pilot.press("b")
            await settle(pilot)
            assert app.screen is triage and triage.view.key == answered[-1]
            assert list(session.triage.answers) == answered[:-1]

    asyncio.run(scenario())


@pytest.mark.timeout(240)
def test_attaching_by_a_dataloader_workers_pid_reads_the_whole_job(knowledge, zoo, tmp_path):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("dataloader_io")
    trainer, worker = job.info["pid"], job.info["worker_pid"]
    session = Session(knowledge, save_dir=str(tmp_path))
    app = DebugStuckApp(session)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await attach_by_pid(pilot, app, worker)
            await wait_for(pilot, lambda: app.evidence is not None and not app.collecting, "the live evidence", 120)
            await pilot.pause()
            assert session.pids == [trainer] and session.job.pid == trainer
            assert f"pid {worker} is a worker process of pid {trainer}" in session.job.note
            table = app.screen.query_one("#processes", DataTable)
            rows = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
            assert rows[str(trainer)] == "rank" and rows[str(worker)] == "dataloader-worker", rows
            groups = text_of(app.screen.query_one("#groups", Static))
            assert "no Python stacks read" not in groups and "_try_get_data" in groups + str(app.evidence.processes)
            await pilot.press("q")

    asyncio.run(scenario())


def _with_more_causes(session, knowledge, total: int):
    """The recorded report with `total` ranked causes (real playbooks), as a real job can give."""
    report = session.recorded
    known = {d.cause for d in report.diagnoses}
    spare = [name for name in knowledge.playbooks if name not in known]
    last = report.diagnoses[-1]
    while len(report.diagnoses) < total:
        cause = spare.pop(0)
        report.diagnoses.append(dataclasses.replace(last, cause=cause, title=knowledge.playbooks[cause].title))
    return report


@pytest.mark.timeout(120)
def test_diagnosis_at_80x24_shows_the_summary_every_cause_and_the_keys(knowledge, tmp_path):
    session = recorded_session(knowledge, tmp_path)
    report = _with_more_causes(session, knowledge, 7)
    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await press_settled(pilot, ANSWERED)
            screen = app.screen
            assert isinstance(screen, DiagnosisScreen)
            verdict = screen.query_one("#verdict", Static)
            lines = verdict.render_lines(verdict.region.reset_offset)
            shown = " ".join("".join(seg.text for seg in strip) for strip in lines)
            # 80x24: the verdict's first sentence, the causes in three rows that scroll, and room for
            # the tab; the whole verdict opens the Evidence tab
            first = report.verdict.summary.split(". ")[0]
            assert " ".join(first.split()) in " ".join(shown.split()), shown
            evidence = " ".join(text_of(screen.query_one("#cause-evidence", Static)).split())
            assert " ".join(report.verdict.summary.split()) in evidence  # all of it, there
            causes = screen.query_one("#causes", OptionList)
            assert causes.option_count == 7 and causes.region.height == 3 and causes.max_scroll_y > 0
            assert screen.query_one("#diag-tabs").region.height >= 10
            keys = {b.key for _, b, enabled, _ in app.active_bindings.values() if b.show and enabled}
            assert {"c", "p", "s", "b", "r", "v", "f", "m", "l", "space", "question_mark", "q"} <= keys
            # The detail scrolls with PgDn while the arrows stay on the causes.
            scroll = screen.query_one("#tab-evidence .tab-scroll")
            assert scroll.max_scroll_y > 0
            await pilot.press("pagedown")
            await settle(pilot)
            assert scroll.scroll_y > 0 and app.focused is causes
            await pilot.press("down")
            await settle(pilot)
            assert screen.cause == report.diagnoses[1].cause

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_the_evidence_pane_shows_what_each_process_does_and_scrolls_with_the_arrows(knowledge, tmp_path):
    from debug_stuck.render.text import doing_phrase

    app = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)
    narrow = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            triage = await _to_triage(pilot)
            table = triage.query_one("#processes", DataTable)
            for i, process in enumerate(app.evidence.processes):
                doing = doing_phrase(process)
                width = table.ordered_columns[5].get_render_width(table) - 2 * table.cell_padding
                rows = table.ordered_rows[i].height
                assert len(doing) <= width * rows, (doing, width, rows)  # wrapped, never cut
            assert table.region.right <= triage.query_one("#evidence").region.right
        async with narrow.run_test(size=(80, 24)) as pilot:
            triage = await _to_triage(pilot)
            await pilot.press("e")
            await settle(pilot)
            pane = triage.query_one("#evidence")
            assert pane.max_scroll_y > 0
            await pilot.press("down", "down")
            await settle(pilot)
            assert pane.scroll_y > 0

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_wording_of_the_suggestion_gpu_line_pattern_and_job_line(knowledge, tmp_path):
    session = recorded_session(knowledge, tmp_path)
    session.recorded_jobs[0] = dataclasses.replace(
        session.recorded_jobs[0], launcher="python", ranks=1, pids=[4100], command="python train.py"
    )
    session.gpu = GpuHistory()
    session.gpu.available = False
    session.gpu.note = (
        "no NVIDIA or AMD GPU found (no libnvidia-ml, no amd-smi/rocm-smi): NVML: NVML Shared Library Not Found"
    )
    session.recorded.pattern = None
    session.recorded.pattern_reason = "the answers fit no pattern of the tree"
    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            job_line = str(app.screen.query_one("#jobs", OptionList).get_option_at_index(0).prompt)
            assert "python, one process (not distributed)" in job_line and "1 rank" not in job_line
            await pilot.press("enter")
            await settle(pilot)
            triage = app.screen
            line = text_of(triage.query_one("#suggestion", Static))
            assert line.endswith("train.log shows step 4118 in this run, so the answer is mid-run -- correct?"), line
            gpu = text_of(triage.query_one("#no-gpu", Static))
            assert gpu == "no GPU: no NVIDIA or AMD GPU found (no libnvidia-ml, no amd-smi/rocm-smi)", gpu
            await pilot.press("d")
            await settle(pilot)
            verdict = text_of(app.screen.query_one("#verdict", Static))
            assert "pattern" not in verdict and "phase" not in verdict, verdict  # what is not known is left out
            await pilot.press("m")
            await settle(pilot)
            source = app.screen.query_one("#playbook", Markdown).source
            first, second = [line for line in source.splitlines() if line.strip()][:2]
            assert first.startswith("# ") and not second.startswith("# "), (first, second)

    asyncio.run(scenario())


def test_a_suggestion_does_not_say_the_evidence_twice(knowledge):
    question = knowledge.tree.questions["cpu"]
    entry = {"value": "idle", "source": "evidence", "why": "training processes use at most 0% CPU"}
    assert Session._reason(question, entry) == "training processes use at most 0% CPU, so the answer is idle"


@pytest.mark.timeout(120)
def test_copied_fixes_name_each_fix_once(knowledge, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no clipboard tool: the text is kept to print on exit
    app = DebugStuckApp(recorded_session(knowledge, tmp_path), clock=lambda: FROZEN_NOW)
    session = app.session

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            await press_settled(pilot, ANSWERED)
            await pilot.press("c")
            await wait_for(pilot, lambda: bool(session.pending_output), "the copied fixes")

    asyncio.run(scenario())
    text = session.pending_output[0]
    diagnosis = session.report.diagnoses[0]
    assert sum(len(fix.commands) for fix in diagnosis.fixes) > len(diagnosis.fixes)  # a fix with two blocks
    for fix in diagnosis.fixes:
        assert text.count(f"# {fix.title}\n") == 1, text


class GatedSession(RecordedSession):
    """A replay whose evidence collection runs until the test lets it end, as a real one runs
    its window whatever the user does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_collection = threading.Event()
        self.release = threading.Event()

    def collect_evidence(self, progress=None):
        self.in_collection.set()
        self.release.wait(60)
        return super().collect_evidence(progress)


@pytest.mark.timeout(120)
def test_quit_during_the_collection_says_what_it_stops(knowledge, tmp_path):
    base = recorded_session(knowledge, tmp_path)
    session = GatedSession(
        base.recorded, knowledge, jobs=base.recorded_jobs, gpu_history=base.gpu, save_dir=str(tmp_path)
    )
    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)
    threads_before = set(threading.enumerate())

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await wait_for(pilot, session.in_collection.is_set, "the collection")
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, StoppingScreen), "the stopping screen")
            await pilot.pause()
            shown = text_of(app.screen.query_one("#stopping", Static))
            assert shown == "Stopping the live evidence collection of pid 4100...", shown
            assert app.return_value is None  # still on screen while the collection ends
            session.release.set()  # the collection's window ends
            deadline = time.monotonic() + 30
            while app.return_value is None:  # the app exits by itself once nothing runs
                assert time.monotonic() < deadline, "the app did not exit after the work ended"
                await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert app.return_value == 0 and app.running_work() == []
    assert non_daemon_threads_besides(threads_before) == []


@pytest.mark.timeout(120)
def test_resume_without_a_checkpoint_says_it_restarts_from_step_0(knowledge, tmp_path):
    session = recorded_session(knowledge, tmp_path)
    session.recorded.resume = {
        "framework": "plain",
        "launcher": "python",
        "checkpoint": None,
        "command": "python train.py",
        "lost": "no usable checkpoint: training restarts from step 0",
        "skipped": [],
        "notes": [],
    }
    app = DebugStuckApp(session, clock=lambda: FROZEN_NOW)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await press_settled(pilot, ANSWERED + ["s"])
            assert isinstance(app.screen, RecoveryScreen)
            info = " ".join(text_of(app.screen.query_one("#resume-info", Static)).split())
            assert "last good checkpoint" not in info
            assert "No usable checkpoint: this restarts training from step 0" in info
            assert "python train.py" in info

    asyncio.run(scenario())
