"""The incident journal (SQLite under the state directory) and `debug-stuck history`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debug_stuck.actions.journal import Incident, Journal, JournalError, journal_path, state_dir
from debug_stuck.errors import BadInput

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _incident(**fields) -> Incident:
    base = dict(time=time.time(), command="python train.py", pid=123, last_step=41, cause="collective")
    base.update(fields)
    return Incident(**base)


def test_state_dir_comes_from_the_environment_then_platformdirs(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(tmp_path / "s"))
    assert state_dir() == tmp_path / "s" and journal_path() == tmp_path / "s" / "journal.sqlite3"
    monkeypatch.delenv("DEBUG_STUCK_STATE_DIR")
    assert state_dir().name == "debug-stuck"


def test_an_incident_round_trips_and_its_action_is_updated(state):
    journal = Journal()
    incident = _incident(seconds_stalled=12.5, threshold=10.0, confidence=0.8, pattern="B", report_json="/r.json")
    incident_id = journal.record(incident)
    assert incident.id == incident_id and journal.path.is_file()
    journal.update(incident_id, action="restart", outcome="restarted as pid 456")
    [back] = journal.incidents()
    assert (back.id, back.command, back.pid, back.last_step, back.cause) == (
        incident_id,
        "python train.py",
        123,
        41,
        "collective",
    )
    assert (back.seconds_stalled, back.confidence, back.action, back.outcome) == (
        12.5,
        0.8,
        "restart",
        "restarted as pid 456",
    )
    assert back.to_dict()["when"]
    with pytest.raises(ValueError):
        journal.update(incident_id, no_such_field=1)


def test_the_journal_runs_in_wal_mode(state):
    journal = Journal()
    journal.record(_incident())
    with sqlite3.connect(str(journal.path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_patterns_group_the_same_step_and_the_same_cause_per_command(state):
    journal = Journal()
    for n in range(3):
        journal.record(_incident(time=100.0 + n, cause=None if n == 0 else "bad-sample"))  # step 41 each time
    journal.record(_incident(time=200.0, last_step=7, cause="collective"))
    journal.record(_incident(time=300.0, last_step=900, cause="collective"))
    journal.record(_incident(time=400.0, command="python other.py"))
    patterns = journal.patterns()
    same_step = [p for p in patterns if p.kind == "same-step" and p.command == "python train.py"]
    assert same_step[0].last_step == 41 and same_step[0].count == 3
    assert same_step[0].causes == ["bad-sample", "bad-sample", None]  # newest first
    same_cause = next(p for p in patterns if p.kind == "same-cause" and p.cause == "collective")
    assert same_cause.count == 2 and same_cause.steps == [900, 7] and same_cause.to_dict()["recurring"]
    other = [p for p in patterns if p.command == "python other.py"]
    assert {p.kind for p in other} == {"same-step", "same-cause"} and all(p.count == 1 for p in other)
    assert not other[0].to_dict()["recurring"]
    assert patterns[0].count == 3  # the most frequent first
    assert len(journal.incidents(limit=2)) == 2 and journal.count() == 6


def test_concurrent_watchers_all_get_their_incidents_in(state):
    writer = (
        "import sys, time\n"
        "from debug_stuck.actions.journal import Incident, Journal\n"
        "j = Journal()\n"
        "for i in range(25):\n"
        "    j.record(Incident(time=time.time(), command=sys.argv[1], last_step=i))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, f"job-{n}"], cwd=REPO, stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    reader = Journal()
    while any(p.poll() is None for p in procs):
        reader.incidents(limit=5)  # reading while they write never blocks them for long
        time.sleep(0.01)
    for p in procs:
        assert p.wait(timeout=60) == 0, p.stderr.read()
        p.stderr.close()
    assert reader.count() == 100
    assert sorted({i.command for i in reader.incidents(limit=100)}) == [f"job-{n}" for n in range(4)]


def test_an_unusable_state_directory_is_one_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DEBUG_STUCK_STATE_DIR", str(blocker / "state"))
    with pytest.raises(JournalError) as err:
        Journal().record(_incident())
    assert "journal write failed" in str(err.value) and "\n" not in str(err.value)


def _history(capsys, *argv):
    from conftest import parse_cli
    from debug_stuck.frontends.commands.history import run

    code = run(parse_cli("history", *argv))
    return code, capsys.readouterr().out


def test_history_without_a_journal_says_so(state, capsys):
    code, out = _history(capsys)
    assert code == 0 and "no incidents recorded" in out and not state.exists()
    code, out = _history(capsys, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["total"] == 0 and doc["incidents"] == [] and doc["patterns"] == []


def test_history_lists_incidents_newest_first_and_recurring_patterns(state, capsys):
    journal = Journal()
    for n in range(3):
        journal.record(_incident(time=1000.0 + n, pid=100 + n, report_markdown=f"/r/{n}.md", action="restart"))
    journal.record(_incident(time=2000.0, pid=999, command="python eval.py", last_step=None, cause=None))
    code, out = _history(capsys, "--format", "json", "--limit", "2")
    doc = json.loads(out)
    assert code == 0 and doc["total"] == 4 and [i["pid"] for i in doc["incidents"]] == [999, 102]
    top = doc["patterns"][0]
    assert (top["kind"], top["count"], top["command"], top["last_step"]) == ("same-step", 3, "python train.py", 41)
    code, out = _history(capsys)
    assert code == 0
    assert out.index("pid 999") < out.index("pid 102") < out.index("pid 100")
    assert "report: /r/2.md" in out and "-> restart" in out
    assert "recurring" in out and "3x  same step 41 (causes: collective)  python train.py" in out
    assert "3x  same cause collective (steps: 41)  python train.py" in out


def test_history_limit_must_be_positive(state, capsys):
    with pytest.raises(BadInput, match="--limit 0"):
        _history(capsys, "--limit", "0")
