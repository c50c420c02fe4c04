"""The agent path over the zoo: every JSON report of a real hung job gives a summary that names the
blocker, fixes and checks filled for this job (no placeholder left that the report does not name
as unfilled, no literal PID), a truthful safety label on every command, fixes that apply to the
job's framework, and the edit in the job's own code where its blocking frame is there."""

from __future__ import annotations

import json
import re

import pytest
from zoo.fixtures import zoo  # noqa: F401

from debug_stuck.advice.fill import placeholders_in
from debug_stuck.contract import SAFETY_LABELS
from debug_stuck.pipeline import DiagnoseRequest, diagnose

ALWAYS_KNOWN_LIVE = {"pid", "main_pid", "launch_command", "cwd"}
LITERAL_PID = re.compile(r"(--pid |-p |-P |/proc/)(MAIN_|RANK_)?PIDS?\b")  # the job's own pids are known

# program, args, options, needs torch, (the blocking call the edit changes, text the diff adds) or None
ZOO = [
    ("future_result", [], {}, False, ("result", "timeout=600")),
    ("lock_deadlock", [], {}, False, None),
    ("stdout_pipe", [], {"stdout": "pipe"}, False, None),
    ("blocked_on", ["http"], {}, False, ("urlopen", "timeout=60")),
    ("blocked_on", ["fifo_write"], {}, False, None),
    ("dataloader_io", [], {}, True, ("DataLoader", "timeout=600")),
    ("torch_save_blocked", [], {}, True, ("torch.save", "os.replace(")),
    ("gloo_straggler", [], {}, True, None),
]


def _ids(case):
    return "-".join([case[0]] + case[1])


@pytest.mark.timeout(240)
@pytest.mark.parametrize("program, args, options, torch_needed, edit", ZOO, ids=[_ids(c) for c in ZOO])
def test_every_zoo_report_is_advice_for_this_job(knowledge, zoo, program, args, options, torch_needed, edit):  # noqa: F811
    if torch_needed:
        pytest.importorskip("torch")
    job = zoo(program, args=args, **options)
    pid = job.rank(0).pid if program == "gloo_straggler" else job.proc.pid
    report = diagnose(DiagnoseRequest(pids=[pid], window=1.0), knowledge)
    data = report.to_dict()
    verdict = data["verdict"]
    assert verdict["hung"] is True and verdict["cause"], verdict
    terminal = next((h for h in data["chain"] if h.get("terminal")), None)
    if data["culprit"]:
        assert str(data["culprit"]["pid"]) in verdict["summary"]
    elif terminal is not None:
        # the chain's end leads the summary: who is blocked, and on what (a path, or the peer's pid)
        obj = str(terminal["waits_on"].get("object") or "")
        assert f"pid {terminal['pid']}" in verdict["summary"]
        assert obj in verdict["summary"] or " pid " in verdict["summary"].split(".")[0].split(" is ", 1)[1]

    top = data["diagnoses"][0]
    assert top["fixes"], top
    # the first fix is written for what the wait ends at; every check looks at the process there
    assert top["fixes"][0]["origin"] == "finding" and top["fixes"][0]["why"], top["fixes"][0]["title"]
    end = next(h for h in reversed(data["chain"]) if h.get("pid"))
    for check in top["check_items"]:
        # ... or, for a pipe, the process holding its other end (the job's `reader_pid`)
        looked_at = {end["pid"], int((data.get("job") or {}).get("values", {}).get("reader_pid") or end["pid"])}
        for pid in re.findall(r"(?:--pid\s+|/proc/|-p\s+)(\d+)", check["command"]):
            assert int(pid) in looked_at, (check["command"], looked_at)
    for diagnosis in data["diagnoses"][:3]:
        for fix in diagnosis["fixes"]:
            assert len(fix["safety"]) == len(fix["commands"]) and all(
                s["label"] in SAFETY_LABELS for s in fix["safety"]
            )
            _filled_for_this_job(fix["commands"], fix["unfilled"], fix["title"])
        for check in diagnosis["check_items"]:
            assert check["safety"]["label"] in SAFETY_LABELS
            _filled_for_this_job([check["command"]], check["unfilled"], check["command"][:40])
        for probe in diagnosis["probe_items"]:
            assert probe["safety"]["label"] in SAFETY_LABELS and probe["safety"]["note"]
            if "--pid" in probe["command"]:
                assert f"--pid {data['job']['values']['pid']}" in probe["command"]
    first_fix = top["fixes"][0]
    framework = data["job"]["context"].get("framework")
    assert framework, data["job"]
    assert framework in first_fix["applies"].get("framework", [framework]), (framework, first_fix)
    first_check = top["check_items"][0]
    assert first_check["withheld"] is None

    if edit is None:
        return
    call, added = edit
    edits = [e for e in data["edits"] if e["call"].endswith(call)]
    assert edits, (data["edits"], [t["frames"][:6] for p in data["processes"] for t in p["threads"]][:2])
    change = edits[0]
    assert change["file"].endswith(f"{program}.py") and change["line"] > 0
    assert any(line.startswith("+") and added in line for line in change["diff"].splitlines()), change["diff"]


def _filled_for_this_job(commands, unfilled, where):
    left = {name for text in commands for name in placeholders_in(text)}
    assert left <= set(unfilled), (where, left, unfilled)
    assert not (set(unfilled) & ALWAYS_KNOWN_LIVE), (where, unfilled)
    for text in commands:
        assert not LITERAL_PID.search(text), (where, text)


@pytest.mark.timeout(240)
def test_fix_shows_the_diff_and_refuses_to_write_while_the_job_runs(zoo, cli, tmp_path):  # noqa: F811
    job = zoo("future_result")
    saved = tmp_path / "report.json"
    code, out, err = cli("fix", "--pid", str(job.proc.pid), "--output", str(saved))
    assert code == 0, err
    assert "future.result(timeout=600)" in out and "Nothing was written" in out
    script = json.loads(saved.read_text())["edits"][0]["file"]
    before = open(script).read()
    code, out, err = cli("fix", "--report", str(saved), "--apply", "--yes")
    assert code == 2 and "still runs" in err and f"debug-stuck stop --pid {job.proc.pid}" in err
    assert open(script).read() == before
