"""Reports and the demo: the Markdown report keeps multi-line fixes inside their list and shows
every candidate's evidence; `demo --help` and `demo --list` name the default the command runs; a
phase is named only from evidence that means it (a validation loop, not `validate_token`; no
"step" for a lock deadlock nothing places in a step). Real zoo jobs and real hung scripts."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from zoo.fixtures import zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from debug_stuck.core.classify import Observations
from debug_stuck.core.logs import observe_tail
from debug_stuck.pipeline import DiagnoseRequest
from debug_stuck.probes.collectors.logtail import read_log_tail
from debug_stuck.render import render

REPO = Path(__file__).resolve().parents[2]


def diagnose(knowledge, pid):
    return run_diagnosis(DiagnoseRequest(pids=[pid], window=1.0), knowledge)


def section(markdown: str, heading: str) -> str:
    start = markdown.index(f"## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else None]


# -- 1 and 2: the Markdown report --------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_markdown_fix_blocks_keep_every_line_inside_the_list(knowledge, zoo):  # noqa: F811
    job = zoo("native_spin")  # cpu-spin: its playbook's fixes include multi-line, indented Python
    report = diagnose(knowledge, job.proc.pid)
    markdown = render(report, "markdown")
    top = report.diagnoses[0]
    assert top.cause == "cpu-spin", [(d.cause, d.confidence) for d in report.diagnoses]
    commands = [cmd for fix in top.fixes for cmd in fix.commands]
    assert any("\n    " in cmd for cmd in commands), commands  # a real multi-line, indented block

    tokens = MarkdownIt("commonmark").parse(markdown)
    fix_at = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == "Fix")
    lists, fences = [], []  # the ordered list that holds each fenced block of the Fix section
    for token in tokens[fix_at:]:
        if token.type == "heading_open" and token.tag in ("h2", "h3"):
            break
        if token.type == "ordered_list_open":
            lists.append(token)
        if token.type == "fence":
            fences.append((token, len(lists)))
    assert len(lists) == 1, "the fixes' numbered list is broken into several"
    assert [f.content for f, _ in fences] == [cmd + "\n" for cmd in commands]  # every line, its indentation
    assert all(f.level > 0 for f, _ in fences)  # inside the list item
    items = [t for t in tokens[fix_at:] if t.type == "list_item_open" and t.level == 1]
    assert len(items) >= len(top.fixes)


@pytest.mark.timeout(120)
def test_markdown_other_candidates_show_their_evidence(knowledge, zoo):  # noqa: F811
    job = zoo("native_spin")
    report = diagnose(knowledge, job.proc.pid)
    markdown = render(report, "markdown")
    others = section(markdown, "Other candidates")
    flat = " ".join(others.split())
    candidates = report.diagnoses[1:]
    assert any(len(d.evidence) >= 2 for d in candidates), [(d.cause, len(d.evidence)) for d in candidates]
    assert any(not e.detail.startswith("triage (") for d in candidates for e in d.evidence)
    for d in candidates:
        assert f"**{d.cause}** ({d.confidence:.0%})" in flat
        for e in d.evidence:
            assert " ".join(e.detail.split()) in flat, (d.cause, e.detail)


# -- 3: demo's default --------------------------------------------------------------------------------

NO_TORCH = "import sys; sys.modules['torch'] = None\nfrom debug_stuck.frontends.cli import main\nsys.exit(main())"


def run_cli(*args, torch: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", NO_TORCH] if not torch else [sys.executable, "-m", "debug_stuck"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def help_default(text: str) -> str:
    match = re.search(r"default here: (\w+)", " ".join(text.split()))
    assert match, text
    return match.group(1)


def list_default(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("default: ")]
    return line.split(": ", 1)[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("torch", [True, False], ids=["with-torch", "without-torch"])
def test_demo_help_and_list_name_the_same_default(torch):
    if torch:
        pytest.importorskip("torch")
    helped, listed = run_cli("demo", "--help", torch=torch), run_cli("demo", "--list", torch=torch)
    assert helped.returncode == 0 and listed.returncode == 0, helped.stderr + listed.stderr
    assert help_default(helped.stdout) == list_default(listed.stdout) == ("straggler" if torch else "deadlock")


@pytest.mark.timeout(180)
def test_demo_without_torch_runs_the_default_its_help_names():
    helped = run_cli("demo", "--help", torch=False)
    ran = run_cli("demo", "--format", "json", torch=False, timeout=150)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"starting the demo job '{help_default(helped.stdout)}'" in ran.stderr
    assert "stopped the demo job" in ran.stderr


# -- 4: phases from evidence that means them ----------------------------------------------------------


@pytest.mark.timeout(120)
def test_validate_token_is_no_validation_phase(knowledge, zoo):  # noqa: F811
    # native_spin spins in validate_token() after logging "validating a 65-character token"
    job = zoo("native_spin")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "cpu-spin"
    assert report.verdict.phase == "unknown", report.verdict.phase
    assert "- **Phase:** unknown" in render(report, "markdown")


@pytest.mark.timeout(120)
def test_a_lock_deadlock_is_not_called_a_step(knowledge, zoo):  # noqa: F811
    job = zoo("lock_deadlock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "thread-deadlock"
    assert report.verdict.phase == "unknown", report.verdict.phase


# Real scripts that hang for ever on a lock in one place; READY once the hang is certain.
DEADLOCK = """
import pathlib, sys, threading
first, second = threading.Lock(), threading.Lock()
barrier = threading.Barrier(3)

def worker(a, b):
    with a:
        barrier.wait()
        with b:  # each worker holds the lock the other wants
            pass

def {name}(batches):
    threads = [threading.Thread(target=worker, args=pair) for pair in ((first, second), (second, first))]
    for t in threads:
        t.start()
    barrier.wait()
    pathlib.Path(sys.argv[1]).write_text("ready")
    for t in threads:
        t.join()

{name}([1, 2, 3])
"""

TOKEN = """
import pathlib, sys, threading
cache_lock = threading.Lock()
cache_lock.acquire()  # never released

def _lookup(token):
    with cache_lock:
        return token

def validate_token(token):
    pathlib.Path(sys.argv[1]).write_text("ready")
    return _lookup(token) is not None

validate_token("a" * 64)
"""

COMPILED = """
import pathlib, sys, threading
import torch
held = threading.Lock()
held.acquire()  # never released

@torch.compile(backend="eager")
def train_step(x):
    y = x * 2
    pathlib.Path(sys.argv[1]).write_text("ready")
    held.acquire()  # a graph break: the compiled step (under torch/_dynamo/eval_frame.py) waits for ever
    return y + 1

train_step(torch.ones(4))
"""

NO_GRAD = """
import pathlib, sys, threading
import torch
held = threading.Lock()
held.acquire()  # never released

def gather_metrics(output):
    pathlib.Path(sys.argv[1]).write_text("ready")
    with held:
        return output.sum()

@torch.no_grad()
def test(model, batches):
    for x in batches:
        gather_metrics(model(x))

test(torch.nn.Linear(4, 4), [torch.ones(4)])
"""


def hung_script(tmp_path: Path, source: str, session_job):
    script, ready = tmp_path / "job.py", tmp_path / "READY"
    script.write_text(textwrap.dedent(source))
    with open(tmp_path / "job.log", "w") as log:
        proc = session_job([sys.executable, script, ready], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while not ready.exists():
        assert proc.poll() is None, (tmp_path / "job.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "the script did not reach its hang"
        time.sleep(0.05)
    return proc


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "source, needs_torch, phase",
    [
        (DEADLOCK.format(name="evaluate"), False, "validation"),  # a deadlock inside the eval loop
        (DEADLOCK.format(name="train_epoch"), False, "unknown"),  # nothing names a phase
        (TOKEN, False, "unknown"),  # validate_token -> _lookup: a token check, no validation pass
        # torch.compile's eval_frame.py is in every compiled step (the cause, and its phase, may be compile's)
        (COMPILED, True, "not validation"),
        (NO_GRAD, True, "validation"),  # a torch.no_grad test loop
    ],
    ids=["deadlock-in-evaluate", "deadlock-in-train-epoch", "validate-token", "compiled-step", "no-grad-test"],
)
def test_the_phase_comes_from_the_stack_of_a_real_hung_job(
    knowledge, tmp_path, session_job, source, needs_torch, phase
):
    if needs_torch:
        pytest.importorskip("torch")
    proc = hung_script(tmp_path, source, session_job)
    report = diagnose(knowledge, proc.pid)
    if phase.startswith("not "):
        assert report.verdict.phase != phase[4:], (report.verdict.phase, report.verdict.summary)
    else:
        assert report.verdict.phase == phase, (report.verdict.phase, report.verdict.summary)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "lines, event",
    [
        (["epoch 2 step 900 loss 0.5", "Validating..."], "validation"),  # skills/examples/rocm-validation-epoch2
        (["step 3 loss 0.5", "***** Running Evaluation *****"], "validation"),  # HF Trainer
        (["step 3 loss 0.5", "Validation DataLoader 0:  45%|####5     | 45/100"], "validation"),  # Lightning
        (["step 3 loss 0.5", "validating a 65-character token"], None),
        (["step 3 loss 0.5", "[c10d - trace] validate magic:1015412686 address:[::ffff:127.0.0.1]:51052"], None),
        (["step 3 loss 0.5", "[c10d - trace] add key:init/ val:1 address:[::ffff:127.0.0.1]:51052"], None),
        (["1 validation error for TrainConfig", "lr: Input should be a valid number"], None),
    ],
)
def test_a_log_names_validation_only_for_a_validation_pass(knowledge, tmp_path, lines, event):
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    obs = Observations()
    observe_tail(knowledge.tree, read_log_tail(str(log)), obs)
    found = obs.derived.get("event")
    assert (found.value if found else None) == event, obs.derived_why.get("event")


@pytest.mark.timeout(60)
def test_the_text_report_says_why_no_pattern_is_named(cli, tmp_path):
    # issue 17: "pattern ?" said nothing; the reason is the report's pattern_reason
    log = tmp_path / "train.log"
    log.write_text("loading config\nstarting\n")
    code, out, err = cli("diagnose", "--log", log, "--format", "text")
    assert code == 0, err
    head = out.splitlines()[0]
    assert "pattern ?" not in head and "| no pattern (" in head, head
