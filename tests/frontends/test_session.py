"""The interactive session's core (debug_stuck.frontends.session), without any UI: job discovery on a real
hung process, the order of the questions, pre-fills and their reasons, probes in a child process
(consent, cancel), saving, copying, recovery actions."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from zoo.fixtures import zoo  # noqa: F401

from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.frontends.session.core import Session
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.frontends.session.triage import Suggestion, Triage
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus

HERE = Path(__file__).parents[1]
PROBE_HOST = [sys.executable, str(HERE / "probe_plugins" / "probe_host.py")]


@pytest.fixture
def session(knowledge, tmp_path):
    s = Session(knowledge, save_dir=str(tmp_path))
    yield s
    s.shutdown()


@pytest.mark.timeout(120)
def test_attach_pid_summarizes_the_job_with_its_log_line(session, zoo):  # noqa: F811
    job = zoo("future_result")
    summary = session.attach_pid(str(job.proc.pid))
    assert summary.pid == job.proc.pid and summary.launcher == "python" and summary.ranks == 1
    assert summary.log_path.endswith("log.txt")
    assert summary.last_line == "waiting for the prefetch"
    assert summary.log_quiet() is not None and summary.age() >= 0
    assert "waiting for the prefetch" in summary.log_phrase()
    assert session.pids == [job.proc.pid]


@pytest.mark.timeout(120)
def test_discover_lists_the_jobs_it_is_given(knowledge, zoo):  # noqa: F811
    job = zoo("future_result")
    session = Session(knowledge, pids=[job.proc.pid])
    found = [j for j in session.discover() if job.proc.pid in j.pids]
    assert len(found) == 1 and found[0].last_line == "waiting for the prefetch"


def test_bad_pid_is_one_clear_line(session):
    with pytest.raises(BadInput) as err:
        session.attach_pid("12ab")
    assert "'12ab' is not a PID" in err.value.one_line()
    with pytest.raises(NotInspectable):
        session.attach_pid(str(2**22 + 12345))  # above pid_max: never a process


def test_describe_checks_the_log_paths(session, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 10/100 loss 2.0\n")
    session.describe([str(log)])
    assert session.logs == [str(log)] and not session.attached
    with pytest.raises(BadInput, match="no log file"):
        session.describe([str(tmp_path / "missing.log")])


def test_questions_follow_the_tree_then_the_triage_keys(knowledge):
    triage = Triage(knowledge.tree)
    assert triage.pending()[0] == "phase"
    triage.record(_answer("phase", "mid-run"))
    assert triage.pending()[0] == "step"
    triage.record(_answer("step", "random"))
    assert triage.pending()[:2] == ["errors", "gpu"]
    triage.record(_answer("errors", "none"))
    triage.record(_answer("gpu", "idle"))
    assert triage.pending() == ["event", "cpu"]
    assert triage.back() == "gpu" and triage.pending()[0] == "gpu"


def test_a_start_hang_does_not_ask_about_steps(knowledge):
    triage = Triage(knowledge.tree)
    triage.record(_answer("phase", "start"))
    assert "step" not in triage.pending()
    assert triage.pending()[0] == "stuck_at"


def test_suggestions_count_toward_the_questions_left(knowledge):
    triage = Triage(knowledge.tree)
    start = {"phase": Suggestion("phase", "start", "log", "x")}
    mid = {"phase": Suggestion("phase", "mid-run", "log", "x")}
    assert "stuck_at" in triage.pending(start) and "stuck_at" not in triage.pending(mid)
    assert triage.pending(start)[0] == triage.pending(mid)[0] == "phase"


def test_confirmed_suggestion_keeps_its_source_an_override_is_the_users(session):
    session.suggestions = {"gpu": Suggestion("gpu", "idle", "evidence", "GPU util has been 0%")}
    assert session.answer("gpu", "idle").source == "evidence"
    assert session.answer("gpu", "busy").source == "user"
    with pytest.raises(BadInput) as err:
        session.answer("gpu", "sideways")
    assert "valid: idle, busy, none, unknown" in err.value.one_line()


def test_gpu_history_says_how_long_the_gpus_have_been_idle():
    snapshot = collect_gpus(backend=RecordedBackend(HERE / "fixtures" / "gpu" / "nvml-v100-nccl-spin.json"))
    history = GpuHistory()
    for i in range(21):
        history.add_snapshot(snapshot, at=1000.0 + 2 * i)
    assert history.describe_util([0, 1]) == ("busy", "GPU util has been 100% on all 2 GPUs for 40 s")
    assert history.describe_util([2]) == ("idle", "GPU util has been 0% on GPU 2 for 40 s")
    value, sentence = history.describe_power([0, 1])
    assert value == "low" and "44 W, 44 W of a 250 W limit" in sentence
    assert history.util_series(0) == [100.0] * 21 and history.power_series(2) == [26.0] * 21


def test_gpu_history_only_counts_the_readings_that_agree():
    history = GpuHistory()
    history.add_devices([{"index": 0, "util": 90.0}], at=0.0)
    for t in (10.0, 20.0, 50.0):
        history.add_devices([{"index": 0, "util": 0.0}], at=t)
    assert history.describe_util() == ("idle", "GPU util has been 0% on GPU 0 for 40 s")


@pytest.mark.timeout(120)
def test_live_evidence_prefills_from_the_job(session, zoo):  # noqa: F811
    job = zoo("future_result")
    session.attach_pid(str(job.proc.pid))
    report = session.collect_evidence()
    assert report.processes and report.processes[0]["pid"] == job.proc.pid
    cpu = session.suggestions["cpu"]
    assert cpu.value == "idle" and cpu.source == "evidence" and "CPU" in cpu.reason
    assert cpu.prompt.endswith("-- correct?")
    view = session.next_question()
    assert view.key == "phase" and view.question.why


def test_save_report_writes_markdown_and_json_with_a_timestamp(session, knowledge, tmp_path):
    from conftest import diagnosed as run_diagnosis
    from conftest import example_request as load_example

    session.report = run_diagnosis(load_example(knowledge, "nanochat-collective"), knowledge)
    first = session.save_report(now=1_790_000_000.0)
    second = session.save_report(now=1_790_000_000.0)
    assert Path(first.markdown).name.startswith("debug-stuck-report-") and first.markdown.endswith(".md")
    assert json.loads(Path(first.json).read_text())["verdict"]["cause"] == "collective"
    assert "# Hang report" in Path(first.markdown).read_text()
    assert second.json != first.json and second.json.endswith("-2.json")
    with pytest.raises(BadInput, match="not a directory"):
        session.save_report(directory=str(tmp_path / "nope"))


def test_fix_commands_are_kept_for_the_exit_without_a_clipboard(session, knowledge, monkeypatch):
    from conftest import diagnosed as run_diagnosis
    from conftest import example_request as load_example

    monkeypatch.setenv("PATH", "/nonexistent")  # no wl-copy, xclip or pbcopy
    session.report = run_diagnosis(load_example(knowledge, "nanochat-collective"), knowledge)
    message = session.copy_fixes()
    assert message.startswith("no clipboard tool")
    text = session.take_pending_output()
    assert "dist.monitored_barrier" in text and text.startswith("Fix commands")
    assert session.take_pending_output() == ""


def test_recovery_actions_need_a_live_job(session):
    session.pids = [1]
    assert session.recovery_actions() == ["stop", "resume"]
    session.pids = []
    assert session.recovery_actions() == []
    with pytest.raises(BadInput):
        session.run_recovery("stop")


@pytest.mark.timeout(120)
def test_probe_runs_in_a_child_process_and_its_findings_reach_the_ranking(session, zoo):  # noqa: F811
    # a warning, not only info notes: info notes are no evidence (issue 15); more OpenMP threads
    # than cores warns of cpu-spin, a cause one process can have
    job = zoo("future_result", env={"OMP_NUM_THREADS": str(4 * (os.cpu_count() or 1))})
    session.attach_pid(str(job.proc.pid))
    outcome = session.run_probe("env")
    assert outcome.completed and outcome.result["name"] == "env", outcome
    assert any(f.get("cause") for f in outcome.findings)
    said = []
    report = session.diagnose(progress=said.append)
    assert [p["name"] for p in report.probes] == ["env"]
    evidence = [e.detail for d in report.diagnoses for e in d.evidence if e.source == "probe"]
    assert evidence, "the probe's findings are evidence in the ranking"
    # issue 17: the probe the user ran is reused, not run again by the diagnosis
    assert not any("running probe" in line for line in said), said
    assert report.probes[0] == outcome.result


def _registered_test_probe(monkeypatch):
    from debug_stuck.probes.targeted.registry import REGISTRY

    monkeypatch.syspath_prepend(str(HERE / "probe_plugins"))
    import slow_user_probe

    monkeypatch.setitem(REGISTRY, slow_user_probe.NAME, slow_user_probe.SPEC)


def test_a_probe_that_runs_code_needs_consent(knowledge, tmp_path, monkeypatch):
    _registered_test_probe(monkeypatch)
    session = Session(knowledge, save_dir=str(tmp_path), probe_launcher=PROBE_HOST)
    offer = session.probe_offer("slow-user-code")
    assert offer.available and offer.runs_user_code
    with pytest.raises(BadInput, match="runs your code"):
        session.run_probe("slow-user-code")
    assert session.probe_results == {}


@pytest.mark.timeout(120)
def test_cancel_kills_the_probe_and_everything_it_started(knowledge, tmp_path, monkeypatch, request):
    _registered_test_probe(monkeypatch)
    session = Session(knowledge, save_dir=str(tmp_path), probe_launcher=PROBE_HOST)
    cancel = threading.Event()
    seen = {}

    def watch(elapsed, limit):
        # The probe's child process tree, found from this process: the probe host and its sleep.
        for child in psutil.Process().children(recursive=True):
            try:
                if child.name() == "sleep":
                    seen[child.pid] = child
            except psutil.Error:
                pass
        if seen:
            cancel.set()

    def cleanup():
        for proc in seen.values():
            try:
                proc.kill()  # psutil checks the PID is still that process
            except psutil.Error:
                pass

    request.addfinalizer(cleanup)
    started = time.monotonic()
    outcome = session.run_probe("slow-user-code", consent=True, cancel=cancel, progress=watch)
    assert outcome.status == "cancelled", outcome
    assert seen, "the probe's command was running"
    assert time.monotonic() - started < 60
    for proc in seen.values():
        assert not _alive(proc), f"sleep {proc.pid} survived the cancel"


def _pid_alive(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def _alive(proc) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _answer(key, value):
    from debug_stuck.core.answers import Answer

    return Answer(key, value, "user")


@pytest.mark.timeout(180)
def test_recovery_resume_and_stop_act_on_the_attached_job(session, zoo, tmp_path):  # noqa: F811
    job = zoo("future_result")
    session.attach_pid(str(job.proc.pid))
    session.diagnose()
    assert session.recovery_actions() == ["stop", "resume"]
    plan = session.run_recovery("resume")
    assert plan and session.report.resume is not None
    pids = job.pids()
    said = session.run_recovery("stop")
    assert "stopped" in said, said
    assert not any(_pid_alive(p) for p in pids)
    assert list(tmp_path.glob("*.json")), "the report is written before the job is stopped"
