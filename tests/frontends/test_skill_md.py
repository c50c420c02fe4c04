import re
from pathlib import Path

import yaml

from conftest import REPO
from debug_stuck.contract import CAUSE_IDS

ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}


def split(path: Path):
    text = path.read_text(encoding="utf-8")
    m = re.match(r"\A---\n(.*?)\n---\n(.*)\Z", text, re.S)
    assert m, "SKILL.md must start with YAML frontmatter"
    return yaml.safe_load(m.group(1)), m.group(2)


def check_skill_folder(folder: Path):
    meta, body = split(folder / "SKILL.md")
    assert set(meta) <= ALLOWED_KEYS, set(meta) - ALLOWED_KEYS
    name = meta["name"]
    assert name == "debug-stuck"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) and len(name) <= 64
    desc = meta["description"]
    assert isinstance(desc, str) and 1 <= len(desc) <= 1024
    assert "<" not in desc and ">" not in desc
    assert desc.lower().startswith("use when")
    for symptom in ("hang", "stuck", "GPU", "NCCL", "DataLoader"):
        assert symptom.lower() in desc.lower()
    if "compatibility" in meta:
        assert 1 <= len(meta["compatibility"]) <= 500
    if "metadata" in meta:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta["metadata"].items())
    assert len(body.splitlines()) < 500
    links = re.findall(r"\]\(([^)]+)\)", body)
    assert links
    for link in links:
        assert (folder / link).is_file(), f"broken link {link}"
    for cause in CAUSE_IDS:
        assert f"skills/{cause}.md" in body
    return body


def test_repo_skill_md_is_valid():
    body = check_skill_folder(REPO)
    assert "debug-stuck diagnose --format json" in body


def test_skills_install_is_idempotent(tmp_path, cli):
    dest = tmp_path / "agent" / "debug-stuck"
    code, out, _ = cli("skills", "install", "--dest", dest)
    assert code == 0 and "written" in out
    check_skill_folder(dest)
    assert (dest / "skills" / "tree.yaml").is_file()
    first = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    code, out, _ = cli("skills", "install", "--dest", dest)
    assert code == 0 and " 0 written" in out
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == first


def test_install_removes_only_its_own_stale_files(tmp_path, cli):
    dest = tmp_path / "skill"
    cli("skills", "install", "--dest", dest)
    (dest / "notes-of-the-user.md").write_text("mine")
    manifest = dest / ".debug-stuck-files"
    manifest.write_text(manifest.read_text() + "skills/retired-cause.md\n")
    (dest / "skills" / "retired-cause.md").write_text("old")
    code, out, _ = cli("skills", "install", "--dest", dest)
    assert code == 0 and "1 stale removed" in out
    assert not (dest / "skills" / "retired-cause.md").exists()
    assert (dest / "notes-of-the-user.md").read_text() == "mine"


def test_install_onto_a_file_is_exit_2(tmp_path, cli):
    target = tmp_path / "file"
    target.write_text("x")
    code, _, err = cli("skills", "install", "--dest", target)
    assert code == 2 and "not a folder" in err


def test_default_destination(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, _ = cli("skills", "install")
    assert code == 0
    assert (tmp_path / ".claude" / "skills" / "debug-stuck" / "SKILL.md").is_file()


def test_an_undecided_jobs_agent_fix_only_reads():
    """A job watched and not told apart from a slow one: the agent is handed the first fix that only
    reads (the seventh hunt's h_poll led with "Stop the stuck job safely", h_threadtok with a thread
    setting and an edit putting a 600 s timeout on a long, correct call), and no edit; a hung one
    keeps its first fix, whatever it does, and its edits."""
    from debug_stuck.core.report import Diagnosis, FixItem, Report, Verdict, safety_dict
    from debug_stuck.render.agent import agent_view

    stop = FixItem(title="Stop the stuck job safely", commands=["debug-stuck stop --pid 7"])
    stop.safety = [safety_dict("stops-job", "stops pid 7")]
    edit = FixItem(title="Give the wait a timeout", commands=["q.get(timeout=600)"])
    edit.safety = [safety_dict("edit")]
    look = FixItem(title="See where it waits", commands=["py-spy dump --pid 7"])
    look.safety = [safety_dict("reads")]
    top = Diagnosis("io-stall", "File I/O blocked", 0.3, [], [stop, edit, look], "skills/io-stall.md")
    diff = {"file": "train.py", "line": 9, "call": "q.get", "why": "w", "diff": "-q.get()\n+q.get(timeout=600)"}
    undecided = Report(verdict=Verdict(hung=None, state_reasons=["watched: sleeps in its own loop"]), diagnoses=[top])
    undecided.edits = [diff]
    assert agent_view(undecided)["fix"]["title"] == "See where it waits"
    assert "edits" not in agent_view(undecided)
    hung = Report(verdict=Verdict(hung=True, state="hung", cause="io-stall"), diagnoses=[top])
    hung.edits = [diff]
    assert agent_view(hung)["fix"]["title"] == "Stop the stuck job safely"
    assert agent_view(hung)["edits"][0]["file"] == "train.py"
    only_stop = Report(verdict=undecided.verdict, diagnoses=[Diagnosis("io-stall", "t", 0.3, [], [stop, edit], "p")])
    assert "fix" not in agent_view(only_stop)


def test_no_cause_named_hands_the_agent_no_priors_fix():
    """Too little known to name a cause: the top candidate is a prior's (compile first on a thin log,
    "Compile in-process" handed to the agent as the fix). Only a fix written for what the job waits
    on, else one that only reads; none when there is neither."""
    from debug_stuck.core.report import Diagnosis, FixItem, Report, Verdict, safety_dict
    from debug_stuck.render.agent import agent_view

    config = FixItem(title="Compile in-process (no worker pool)", commands=["export TORCHINDUCTOR_COMPILE_THREADS=1"])
    config.safety = [safety_dict("config")]
    look = FixItem(title="See where it compiles", commands=["py-spy dump --pid 7"])
    look.safety = [safety_dict("reads")]
    written = FixItem(title="Nothing will ever read /tmp/m.fifo", commands=["cat /tmp/m.fifo"], origin="finding")
    written.safety = [safety_dict("disturbs")]

    def view(cause, fixes):
        top = Diagnosis("compile", "Compiling", 0.45, [], fixes, "skills/compile.md")
        return agent_view(Report(verdict=Verdict(hung=True, state="hung", cause=cause), diagnoses=[top]))

    assert "fix" not in view(None, [config])
    assert view(None, [config, look])["fix"]["title"] == "See where it compiles"
    assert view(None, [config, written, look])["fix"]["title"] == "Nothing will ever read /tmp/m.fifo"
    assert view("compile", [config, look])["fix"]["title"] == "Compile in-process (no worker pool)"
