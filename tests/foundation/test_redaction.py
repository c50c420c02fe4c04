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
    quote_markers,
    redact_argv,
    redact_command,
    redact_env,
    redact_obj,
    redact_text,
    redacted_command_line,
)

TARGET = Path(__file__).resolve().parents[1] / "targets" / "secrets_job.py"

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
def secret_job(tmp_path, session_job):
    ready = tmp_path / "READY"
    with open(tmp_path / "train.log", "wb") as log:
        proc = session_job(job_argv(), cwd=tmp_path, env=job_env(ready), stdout=log, stderr=subprocess.STDOUT)
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


def outputs_of_every_exit(pid: int) -> tuple:
    """What diagnose (json, markdown, text), snapshot and resume (text, json) print for the job,
    each exit code checked: ({exit name: stdout + stderr}, the resume plan)."""
    outputs = {}
    for fmt in ("json", "markdown", "text"):
        result = debug_stuck("diagnose", "--pid", pid, "--format", fmt, "--window", "0.5")
        assert result.returncode == 0, result.stderr
        outputs[f"diagnose {fmt}"] = result.stdout + result.stderr
    snapshot = debug_stuck("snapshot", "--pid", pid, "--window", "0.5")
    assert snapshot.returncode == 0, snapshot.stderr
    outputs["snapshot"] = snapshot.stdout + snapshot.stderr
    text = debug_stuck("resume", "--pid", pid)
    as_json = debug_stuck("resume", "--pid", pid, "--format", "json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    outputs["resume text"] = text.stdout + text.stderr
    outputs["resume json"] = as_json.stdout + as_json.stderr
    return outputs, json.loads(as_json.stdout)


@pytest.mark.timeout(240)
def test_no_secret_reaches_any_output(secret_job, tmp_path):
    pid = secret_job.pid
    outputs, plan = outputs_of_every_exit(pid)
    report = json.loads(outputs["diagnose json"].split("\ndebug-stuck")[0])
    cmdline = next(p["cmdline"] for p in report["processes"] if p["pid"] == pid)
    assert "--tokenizer_name gpt2" in cmdline and "--max_new_tokens 100" in cmdline and "--author alice" in cmdline

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


# -- secrets in every shape (issue 23, item 3) ------------------------------------------------------

SHAPES_TARGET = Path(__file__).resolve().parents[1] / "targets" / "secret_shapes_job.py"

SHAPE_SECRETS = {
    # Hydra/OmegaConf overrides
    "hydra": "hydrakey-5081",
    "hydra +": "hydrapass-5082",
    "hydra ++": "hydratok-5083",
    "hydra ~": "hydrasec-5084",
    # a URL password holding / and +: each piece must go
    "url 1": "pgA1b2",
    "url 2": "Cd3e4q",
    "url 3": "Fg5h6w",
    "wandb-key": "wandbkey-6612",
    "dash value": "hunter2-dash-7723",
    # the log
    "yaml": "yamlapikey-8801",
    "yaml quoted": "yamlhftok-8802",
    "json": "jsonpass-8803",
    "dict": "dictwandb-8804",
    "ini": "iniawssecret-8805",
    "basic": "dXNlcjpiYXNpYzg4MDY=",
    "bearer": "bear8807",
    "token": "tok8808",
    "cookie": "cookiesess-8809",
    # a YAML plain scalar of several words: every word goes
    "yaml words 1": "yamlwordA-8810",
    "yaml words 2": "yamlwordB-8811",
}

# (what the job prints, what every report must show of it)
SHAPE_LOG_LINES = [
    (f"api_key: {SHAPE_SECRETS['yaml']}", f"api_key: {REDACTED}"),
    (f'hf_token: "{SHAPE_SECRETS["yaml quoted"]}"', f'hf_token: "{REDACTED}"'),
    (f'{{"password": "{SHAPE_SECRETS["json"]}", "lr": 0.1}}', f'{{"password": "{REDACTED}", "lr": 0.1}}'),
    (f"{{'wandb_api_key': '{SHAPE_SECRETS['dict']}', 'epochs': 3}}", f"{{'wandb_api_key': '{REDACTED}', 'epochs': 3}}"),
    (f"aws_secret_access_key = {SHAPE_SECRETS['ini']}", f"aws_secret_access_key = {REDACTED}"),
    (f"Authorization: Basic {SHAPE_SECRETS['basic']}", f"Authorization: Basic {REDACTED}"),
    (f"Authorization: Bearer {SHAPE_SECRETS['bearer']}", f"Authorization: Bearer {REDACTED}"),
    (f"Authorization: token {SHAPE_SECRETS['token']}", f"Authorization: token {REDACTED}"),
    (f"Cookie: session={SHAPE_SECRETS['cookie']}; theme=dark", f"Cookie: {REDACTED}"),
    (
        f"db_password: {SHAPE_SECRETS['yaml words 1']} {SHAPE_SECRETS['yaml words 2']} third  # from the vault",
        f"db_password: {REDACTED}  # from the vault",
    ),
    ("num_tokens: 512", "num_tokens: 512"),
    ("keys: [a, b]", "keys: [a, b]"),
]

# options a training script uses for data fields, counts and paths: none may be blanked
HARMLESS_OPTIONS = [
    "--tokenizer_name", "gpt2", "--max_new_tokens", "100", "--token_budget", "5", "--password_file", "/tmp/pw.txt",
    "--key_column", "text", "--sort-key", "length", "--metric_key", "val_loss", "--label_key", "labels",
]  # fmt: skip


def shapes_argv() -> list:
    s = SHAPE_SECRETS
    return [
        sys.executable,
        str(SHAPES_TARGET),
        f"wandb.api_key={s['hydra']}",
        f"+db.password={s['hydra +']}",
        f"++trainer.hf_token={s['hydra ++']}",
        f"~x.secret={s['hydra ~']}",
        "--db_url",
        f"postgres://dbuser:{s['url 1']}/{s['url 2']}+{s['url 3']}@db.example/runs",
        "--wandb-key",
        s["wandb-key"],
        "--password",
        f"-{s['dash value']}",
        *HARMLESS_OPTIONS,
    ]


def shapes_env(ready: Path, lines: Path) -> dict:
    env = dict(os.environ)
    env.update(SHAPES_READY=str(ready), SHAPES_LINES=str(lines), TOKENIZERS_PARALLELISM="false")
    return env


def shape_leaks(text: str) -> list:
    return [name for name, value in SHAPE_SECRETS.items() if value in text]


def bare_markers(command: str) -> int:
    """How many <redacted> bash would read as a redirection (outside any quotes)."""
    words = list(shlex.shlex(command, posix=True, punctuation_chars=True))
    return sum(1 for a, b in zip(words, words[1:]) if a == "<" and b == "redacted")


def assert_printable(command: str) -> None:
    assert shlex.split(command, comments=True), command
    assert bare_markers(command) == 0, command


@pytest.fixture
def shapes_job(tmp_path, request):
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{line}\n" for line, _ in SHAPE_LOG_LINES))
    ready = tmp_path / "READY"
    log = open(tmp_path / "train.log", "wb")
    proc = subprocess.Popen(
        shapes_argv(),
        cwd=tmp_path,
        env=shapes_env(ready, lines),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["wandb.api_key=k1"], [f"wandb.api_key={REDACTED}"]),
        (["+db.password=p/1+x"], [f"+db.password={REDACTED}"]),
        (["++trainer.hf_token=t1"], [f"++trainer.hf_token={REDACTED}"]),
        (["~x.secret=s1"], [f"~x.secret={REDACTED}"]),
        (["model.tokenizer_name=gpt2", "trainer.max_steps=10"], ["model.tokenizer_name=gpt2", "trainer.max_steps=10"]),
        (["--wandb-key", "w1", "--hf_key=h1"], ["--wandb-key", REDACTED, f"--hf_key={REDACTED}"]),
        (["--password", "-hunter2", "--lr", "1"], ["--password", REDACTED, "--lr", "1"]),
        (["--password", "--verbose"], ["--password", "--verbose"]),
        (["--api-key", "--lr=1"], ["--api-key", "--lr=1"]),
        (["--db", "postgres://user:abcd/efgh+ijkl@db/x"], ["--db", f"postgres://user:{REDACTED}@db/x"]),
        (HARMLESS_OPTIONS, HARMLESS_OPTIONS),
    ],
)
def test_overrides_service_keys_dash_values_and_urls_in_argv(argv, shown):
    assert redact_argv(["python", "train.py", *argv]) == ["python", "train.py", *shown]


@pytest.mark.parametrize(
    "name", ["--wandb-key", "--wandb_key", "HF_KEY", "--openai-key", "ANTHROPIC_KEY", "comet_key", "--neptune-key",
             "MLFLOW_KEY", "aws_key", "AZURE_KEY", "--gcp-key", "s3_key", "wandb.api_key", "+db.password", "~x.secret"],
)  # fmt: skip
def test_service_keys_and_key_paths_are_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["--sort-key", "--primary-key", "--key-column", "--keyframe", "--monitor_key", "--metric_key",
             "--input_key", "--text_key", "--label_key", "--image_key", "--key", "num_tokens", "keys",
             "--token_budget", "--password_file", "--key_column", "model.tokenizer_name", "pad_token", "--eos_token"],
)  # fmt: skip
def test_data_field_keys_are_not_secret_names(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("line, shown", SHAPE_LOG_LINES)
def test_config_dumps_dicts_ini_and_headers_in_log_lines(line, shown):
    assert redact_text(line) == shown
    assert redact_text(shown) == shown


@pytest.mark.parametrize(
    "text, shown",
    [
        ("postgres://user:abcd/efgh+ijkl@db/x", f"postgres://user:{REDACTED}@db/x"),
        ("db at https://me:p@ss/w+rd@db.example:5432/runs ok", f"db at https://me:{REDACTED}@db.example:5432/runs ok"),
        ("https://host:8080/users/alice@example.org", "https://host:8080/users/alice@example.org"),
        ("python t.py wandb.api_key=k1 +db.password=p2 lr=0.1", f"python t.py wandb.api_key={REDACTED} "
         f"+db.password={REDACTED} lr=0.1"),
        ("--password -hunter2 --lr 1", f"--password {REDACTED} --lr 1"),
        ("--wandb-key X --sort-key length", f"--wandb-key {REDACTED} --sort-key length"),
        ('{"Authorization": "Bearer abc", "Cookie": "s=1", "Accept": "json"}',
         f'{{"Authorization": "Bearer {REDACTED}", "Cookie": "{REDACTED}", "Accept": "json"}}'),
        ("curl -H 'Authorization: Bearer abc' https://x", f"curl -H 'Authorization: Bearer {REDACTED}' https://x"),
        ("hub_token: None", "hub_token: None"),
        ('{"pad_token": "[PAD]", "mask_token": "[MASK]"}', '{"pad_token": "[PAD]", "mask_token": "[MASK]"}'),
        ("    token = tokenizer(text)", "    token = tokenizer(text)"),
        ("TOKENIZERS_PARALLELISM=false --tokenizer_name gpt2 --max_new_tokens 100 --token_budget 5",
         "TOKENIZERS_PARALLELISM=false --tokenizer_name gpt2 --max_new_tokens 100 --token_budget 5"),
        ("--password_file /p --key_column text num_tokens: 512 keys: [a, b]",
         "--password_file /p --key_column text num_tokens: 512 keys: [a, b]"),
    ],
)  # fmt: skip
def test_free_text_shapes(text, shown):
    assert redact_text(text) == shown


def test_printed_commands_quote_the_marker_and_still_parse():
    argv = ["python", "t.py", "wandb.api_key=k1", "--password", "-hunter2", "--db", "postgres://u:a/b+c@db/x"]
    line = redacted_command_line(argv)
    assert line == (
        f"python t.py wandb.api_key='{REDACTED}' --password '{REDACTED}' --db postgres://u:'{REDACTED}'@db/x"
    )
    assert shlex.split(line) == redact_argv(argv)
    # an env prefix stays a prefix; shell syntax ($VAR, pipes) is kept as written
    assert redact_command("HF_TOKEN=abc python t.py --token $HF_TOKEN --password x | tee log") == (
        f"HF_TOKEN='{REDACTED}' python t.py --token $HF_TOKEN --password '{REDACTED}' | tee log"
    )
    nested = redacted_command_line(["bash", "-c", "python t.py --password hunter2 && echo ok"])
    assert shlex.split(shlex.split(nested)[2]) == ["python", "t.py", "--password", REDACTED, "&&", "echo", "ok"]
    for command in (line, nested, redact_command("python t.py --password <redacted>")):
        assert_printable(command)
    assert quote_markers(f"echo '{REDACTED}' \"{REDACTED}\"") == f"echo '{REDACTED}' \"{REDACTED}\""
    fix = redact_obj({"commands": ["python t.py --password hunter2 --batch-size 1"]})
    assert fix == {"commands": [f"python t.py --password '{REDACTED}' --batch-size 1"]}


def test_jobs_with_secrets_in_every_shape_show_none_and_print_runnable_commands(shapes_job, tmp_path):
    """Overrides, a URL password with / and +, --wandb-key, a -dash value on the command line;
    config dumps, JSON, dicts, ini and headers in the log, each in turn its last line."""
    pid = shapes_job.pid
    outputs, plan = outputs_of_every_exit(pid)
    from debug_stuck.live.jobs import summarize_job

    job = summarize_job(pid)
    outputs["job list"] = f"{job.command}\n{job.last_line}"

    # the log: each line in turn is the last one, as reports carry it
    for n, (_, shown) in enumerate(SHAPE_LOG_LINES, start=1):
        os.kill(pid, signal.SIGUSR1)
        wait_for(tmp_path / f"READY-{n}")
        for fmt in ("json", "markdown"):
            result = debug_stuck("diagnose", "--pid", pid, "--format", fmt, "--window", "0.2", "--no-native")
            assert result.returncode == 0, result.stderr
            outputs[f"diagnose {fmt} after line {n}"] = result.stdout + result.stderr
        report = json.loads(outputs[f"diagnose json after line {n}"].split("\ndebug-stuck")[0])
        assert [entry["last_line"] for entry in report["logs"]] == [shown]
        assert f"last line: `{shown}`" in outputs[f"diagnose markdown after line {n}"]

    found = {name: shape_leaks(text) for name, text in outputs.items()}
    assert {name: names for name, names in found.items() if names} == {}

    # every printed command parses, its markers quoted; the harmless options are kept as they were
    report = json.loads(outputs["diagnose json"].split("\ndebug-stuck")[0])
    commands = [next(p["cmdline"] for p in report["processes"] if p["pid"] == pid), report["resume"]["command"]]
    commands += [c for d in report["diagnoses"] for f in d["fixes"] for c in f["commands"] if REDACTED in c]
    commands += [c for d in report["diagnoses"] for c in d["checks"] if REDACTED in c]
    commands.append(plan["command"])
    assert job.command == redacted_command_line(shapes_argv())[:300]  # the job list cuts it short
    for name in ("diagnose markdown", "diagnose text", "resume text"):
        commands += [line.strip() for line in outputs[name].splitlines() if f"{SHAPES_TARGET} " in line]
    assert len(commands) >= 7
    for command in commands:
        assert_printable(command)
        assert " ".join(HARMLESS_OPTIONS) in command, command
    assert shlex.split(plan["command"])[-len(HARMLESS_OPTIONS) :] == HARMLESS_OPTIONS

    # and it runs: bash reads no `<redacted>` as a redirection
    again = tmp_path / "READY-AGAIN"
    rerun = subprocess.Popen(
        ["bash", "-c", plan["command"]],
        cwd=plan["cwd"],
        env=shapes_env(again, tmp_path / "lines.txt"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(again)
    finally:
        os.killpg(rerun.pid, signal.SIGKILL)
        rerun.wait(timeout=10)


@pytest.mark.timeout(240)
def test_secrets_in_every_shape_reach_no_watch_event_report_or_journal(tmp_path):
    """The shapes job under `watch`: its command line (overrides, a URL password with / and +,
    --wandb-key, a -dash value) and its log (config dumps, JSON, dicts, ini, headers, a YAML value
    of several words) reach the events, the incident report and the journal redacted."""
    state, reports = tmp_path / "state", tmp_path / "reports"
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{line}\n" for line, _ in SHAPE_LOG_LINES))
    env = shapes_env(tmp_path / "READY", lines)
    env["DEBUG_STUCK_STATE_DIR"] = str(state)
    watch = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "watch", "--format", "json", "--quiet", "--floor", "2", "--startup", "3",
         "--on-hang", "stop", "--grace", "1", "--report-dir", str(reports), "--", *shapes_argv()],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=200, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert watch.returncode == 124, watch.stderr[-3000:]
    events = [json.loads(line) for line in watch.stdout.splitlines()]
    assert {"stall", "report"} <= {e["event"] for e in events}, events
    outputs = {"events": watch.stdout, "stderr": watch.stderr}
    for path in reports.glob("incident-*"):
        outputs[path.name] = path.read_text()
    history = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "history", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    outputs["history"] = history.stdout
    outputs["journal"] = next(state.glob("*.sqlite3")).read_bytes().decode("utf-8", "replace")
    assert len(outputs) >= 5
    assert {name: shape_leaks(text) for name, text in outputs.items() if shape_leaks(text)} == {}
    # not absent by luck: the command and the log's lines are there, redacted
    assert "wandb.api_key=" in outputs["events"] and REDACTED in outputs["events"]
    report = next(text for name, text in outputs.items() if name.startswith("incident-") and name.endswith(".json"))
    assert REDACTED in report
