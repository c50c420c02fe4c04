"""Secrets never leave debug-stuck, and nothing harmless is blanked.

The end-to-end test plants sixteen secrets in a real process (its options, its environment, the
log line it prints) and searches every output for them: `diagnose` in all three formats,
`snapshot`, `resume` (text and JSON), `stop` (its output and the report it writes) and `watch`
(its events, its incident report and the journal behind `history`). The look-alikes beside them
(`TOKENIZERS_PARALLELISM`, `--tokenizer_name`, `--max_new_tokens`, `--session_dir`, `--author`)
must survive, and the resume command printed must still run.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debug_stuck.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_command,
    redact_env,
    redact_obj,
    redact_text,
)

TARGET = Path(__file__).resolve().parent / "targets" / "secrets_job.py"

SECRETS = {
    # options
    "password": "hunter2pw-0815",
    "api_key": "apikey-4471-zz",
    "hf_token": "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234",
    "db": "dbpass-9917",
    "client": "clientsecret-7731",
    "slack": "xoxb-123456789012-abcdefghijkl",
    # environment (the first four are variables debug-stuck collects)
    "TORCH_HUB_TOKEN": "hf_ZZtorchhubTOKENvalue0987654321",
    "ACCELERATE_API_KEY": "accel-key-5521-qq",
    "TRITON_CACHE_URL": "tritonpw-6612",
    "PYTORCH_SECRET": "pytorch-secret-3390",
    "HF_TOKEN": "hf_AAAAenvTokenBBBBBBBBBBBBBBBBBB",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY",
    "OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    # the log line the job prints
    "LOG_SECRET": "logpass-5508",
}


def job_argv(steps: int = 3, step_seconds: float = 0.1) -> list:
    return [
        sys.executable,
        str(TARGET),
        f"--password={SECRETS['password']}",
        "--api_key",
        SECRETS["api_key"],
        "--hf_token",
        SECRETS["hf_token"],
        "--db_url",
        f"postgres://dbuser:{SECRETS['db']}@db.example/runs",
        f"--client-secret={SECRETS['client']}",
        "--slack",
        SECRETS["slack"],
        "--tokenizer_name",
        "gpt2",
        "--max_new_tokens",
        "100",
        "--session_dir",
        "/tmp/sessions",
        "--author",
        "alice",
        "--steps",
        str(steps),
        "--step-seconds",
        str(step_seconds),
    ]


def job_env(ready: Path) -> dict:
    env = dict(os.environ)
    for key in ("TORCH_HUB_TOKEN", "ACCELERATE_API_KEY", "PYTORCH_SECRET", "HF_TOKEN", "WANDB_API_KEY"):
        env[key] = SECRETS[key]
    for key in ("AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "LOG_SECRET"):
        env[key] = SECRETS[key]
    env["TRITON_CACHE_URL"] = f"https://cacheuser:{SECRETS['TRITON_CACHE_URL']}@cache.example/triton"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["SECRETS_READY"] = str(ready)
    return env


def leaked(text: str) -> list:
    return [name for name, value in SECRETS.items() if value in text]


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def debug_stuck(*args, cwd=None, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "debug_stuck", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def secret_job(tmp_path, request):
    ready = tmp_path / "READY"
    log = open(tmp_path / "train.log", "wb")
    proc = subprocess.Popen(
        job_argv(), cwd=tmp_path, env=job_env(ready), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    log.close()

    def stop():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    request.addfinalizer(stop)
    wait_for(ready)
    return proc


# -- the rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["--hf_token", "--api-key", "--api_key", "--password", "--client_secret", "WANDB_API_KEY", "HF_TOKEN",
     "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "DB_PASS", "GITHUB_TOKEN", "apiKey", "--auth-token", "MY_PASSWD"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["TOKENIZERS_PARALLELISM", "--tokenizer_name", "--max_new_tokens", "--session_dir", "--author", "--pass_through",
     "NCCL_SOCKET_IFNAME", "--keyframes", "--token_budget_steps", "MASTER_PORT", "--secrets_dir", "TOKEN_FILE",
     "--password_file", "AWS_ACCESS_KEY_ID"],
)  # fmt: skip
def test_harmless_names(name):
    assert not is_secret_name(name)


def test_values_named_shaped_or_in_urls_are_replaced():
    argv = ["python", "t.py", "--password", "pw1", "--api-key=k2", "--db", "https://u:p4ss@h/x", SECRETS["slack"]]
    assert redact_argv(argv) == [
        "python", "t.py", "--password", REDACTED, f"--api-key={REDACTED}",
        "--db", f"https://u:{REDACTED}@h/x", REDACTED,
    ]  # fmt: skip
    env = {"HF_TOKEN": "x", "HTTPS_PROXY": "http://me:proxypw@proxy:3128", "TOKENIZERS_PARALLELISM": "false"}
    assert redact_env(env) == {
        "HF_TOKEN": REDACTED,
        "HTTPS_PROXY": f"http://me:{REDACTED}@proxy:3128",
        "TOKENIZERS_PARALLELISM": "false",
    }
    assert redact_text("Authorization: Bearer abcdefghijklmnopqrstuv") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("export HF_TOKEN=abc123") == f"export HF_TOKEN={REDACTED}"
    assert redact_obj({"env": {"WANDB_API_KEY": "w"}, "cmdline": ["x", "--token", "t"]}) == {
        "env": {"WANDB_API_KEY": REDACTED},
        "cmdline": ["x", "--token", REDACTED],
    }


def test_references_and_placeholders_are_not_secrets():
    for text in ("huggingface-cli login --token $HF_TOKEN", "--api-key=${OPENAI_API_KEY}", "--password <password>"):
        assert redact_text(text) == text
    assert redact_command("python t.py --tokenizer_name gpt2 --max_new_tokens 100") == (
        "python t.py --tokenizer_name gpt2 --max_new_tokens 100"
    )


def test_redaction_is_idempotent():
    once = redact_text(" ".join(job_argv()))
    assert redact_text(once) == once and not leaked(once)


def test_no_playbook_command_or_question_is_over_redacted(knowledge):
    """Redacting a playbook's printed commands would break them: none may change."""
    changed = []
    for book in knowledge.playbooks.values():
        for text in [c for f in book.fixes for c in f.commands] + [b.text for b in book.checks]:
            if redact_text(text) != text:
                changed.append(f"{book.id}: {text[:80]}")
    for question in knowledge.tree.questions.values():
        if redact_text(question.text) != question.text:
            changed.append(question.key)
    assert changed == []


# -- every exit, on a real process --------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_no_secret_reaches_any_output(secret_job, tmp_path):
    pid = secret_job.pid
    outputs = {}
    for fmt in ("json", "markdown", "text"):
        result = debug_stuck("diagnose", "--pid", pid, "--format", fmt, "--window", "0.5")
        assert result.returncode == 0, result.stderr
        outputs[f"diagnose {fmt}"] = result.stdout + result.stderr
    report = json.loads(outputs["diagnose json"].split("\ndebug-stuck")[0])
    cmdline = next(p["cmdline"] for p in report["processes"] if p["pid"] == pid)
    assert "--tokenizer_name gpt2" in cmdline and "--max_new_tokens 100" in cmdline and "--author alice" in cmdline

    snapshot = debug_stuck("snapshot", "--pid", pid, "--window", "0.5")
    assert snapshot.returncode == 0, snapshot.stderr
    outputs["snapshot"] = snapshot.stdout + snapshot.stderr

    text = debug_stuck("resume", "--pid", pid)
    as_json = debug_stuck("resume", "--pid", pid, "--format", "json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    outputs["resume text"] = text.stdout + text.stderr
    outputs["resume json"] = as_json.stdout + as_json.stderr
    plan = json.loads(as_json.stdout)
    for kept in ("--tokenizer_name gpt2", "--max_new_tokens 100", "--session_dir /tmp/sessions", "--author alice"):
        assert kept in plan["command"]
    assert any("TOKENIZERS_PARALLELISM=false" in note for note in plan["notes"]), plan["notes"]
    assert any("replaced by <redacted>" in note for note in plan["notes"])

    # The printed command still runs (argparse accepts every value, --max_new_tokens included).
    again = tmp_path / "READY-AGAIN"
    rerun = subprocess.Popen(
        ["bash", "-c", plan["command"]],
        cwd=plan["cwd"],
        env=job_env(again),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(again)
    finally:
        os.killpg(rerun.pid, signal.SIGKILL)
        rerun.wait(timeout=10)

    stop = debug_stuck(
        "stop", "--pid", pid, "--yes", "--grace", "1", "--report-dir", tmp_path / "stop", "--format", "json"
    )
    assert stop.returncode == 0, stop.stderr
    outputs["stop"] = stop.stdout + stop.stderr
    for path in json.loads(stop.stdout)["report_paths"]:
        outputs[f"stop report {Path(path).suffix}"] = Path(path).read_text()
        assert oct(Path(path).stat().st_mode & 0o777) == "0o600"

    found = {name: leaked(text) for name, text in outputs.items()}
    assert {name: names for name, names in found.items() if names} == {}
    assert len(outputs) == 9
    # Not absent by luck: the outputs that carry the job's command line show where secrets were.
    for name in ("diagnose json", "snapshot", "resume text", "resume json", "stop report .json"):
        assert REDACTED in outputs[name], name


@pytest.mark.timeout(240)
def test_no_secret_reaches_watch_events_reports_or_the_journal(tmp_path):
    state = tmp_path / "state"
    reports = tmp_path / "reports"
    env = job_env(tmp_path / "READY")
    env["DEBUG_STUCK_STATE_DIR"] = str(state)
    watch = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "watch", "--format", "json", "--quiet", "--floor", "2",
         "--on-hang", "stop", "--grace", "1", "--report-dir", str(reports), "--", *job_argv(steps=6, step_seconds=0.6)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=200, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert watch.returncode == 124, watch.stderr[-3000:]
    events = [json.loads(line) for line in watch.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert "stall" in kinds and "report" in kinds, kinds
    started = events[0]
    assert "--tokenizer_name" in started["command"] and "gpt2" in started["command"]
    outputs = {"events": watch.stdout}
    for path in reports.glob("incident-*"):
        outputs[path.name] = path.read_text()
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    history = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "history", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert history.returncode == 0 and json.loads(history.stdout)["total"] == 1
    outputs["history"] = history.stdout
    journal = next(state.glob("*.sqlite3"))
    outputs["journal"] = journal.read_bytes().decode("utf-8", "replace")
    assert oct(journal.stat().st_mode & 0o777) == "0o600"
    assert len(outputs) >= 5
    found = {name: leaked(text) for name, text in outputs.items()}
    assert {name: names for name, names in found.items() if names} == {}
    assert shlex.join(started["command"])  # the command stays a list of strings


@pytest.mark.timeout(240)
def test_no_secret_reaches_the_interactive_session(secret_job, tmp_path, monkeypatch, knowledge):
    """What the TUI and the plain prompts show, save and copy: the job list, the evidence, the
    report, the saved files and the fix commands held for printing."""
    from debug_stuck.frontends.session.core import Session
    from debug_stuck.render.text import render_text

    session = Session(knowledge, pids=[secret_job.pid], save_dir=str(tmp_path), window=0.5)
    jobs = [j for j in session.discover() if secret_job.pid in j.pids]
    assert jobs and "--tokenizer_name gpt2" in jobs[0].command
    session.attach(jobs[0])
    evidence = session.collect_evidence()
    report = session.diagnose()
    saved = session.save_report()
    monkeypatch.setenv("PATH", "/nonexistent")  # no clipboard tool: the fixes are kept to print
    session.copy_fixes()
    shown = {
        "job list": jobs[0].command + jobs[0].headline() + jobs[0].log_phrase(),
        "evidence": render_text(evidence),
        "report": render_text(report),
        "saved markdown": Path(saved.markdown).read_text(),
        "saved json": Path(saved.json).read_text(),
        "copied": session.take_pending_output(),
        "resume": session.run_recovery("resume"),
    }
    found = {name: leaked(text) for name, text in shown.items()}
    assert {name: names for name, names in found.items() if names} == {}
    assert REDACTED in shown["saved json"] and REDACTED in shown["resume"]
