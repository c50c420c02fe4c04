import shutil

import pytest

from debug_stuck.contract import CAUSE_IDS
from debug_stuck.kb import check_knowledge, skills_dir


def test_skills_check_passes(cli):
    code, out, err = cli("skills", "check")
    assert code == 0, out + err
    assert out.startswith("ok: 21 playbooks")


def test_every_cause_has_a_complete_playbook(knowledge):
    assert set(knowledge.playbooks) == set(CAUSE_IDS)
    for cause, book in knowledge.playbooks.items():
        assert book.path.name == f"{cause}.md"
        assert book.fixes, cause
        for fix in book.fixes:
            assert fix.commands and all(cmd.strip() for cmd in fix.commands), (cause, fix.title)
            assert all(b.language in ("bash", "sh", "python", "console", "text", "yaml", "ini") for b in fix.blocks), (
                cause,
                fix.title,
            )
        assert book.checks, f"{cause}: 'How to confirm' has no command"
        assert len(book.signals) >= 3, cause
        assert book.sources


def test_every_playbook_is_reachable_from_the_tree(knowledge):
    assert knowledge.tree.reachable_causes(knowledge.tree.root) == frozenset(CAUSE_IDS)


def test_no_kill_by_name_in_any_fix(knowledge):
    for book in knowledge.playbooks.values():
        for fix in book.fixes:
            for cmd in fix.commands:
                for line in cmd.splitlines():
                    if line.strip().startswith("#"):
                        continue
                    assert "pkill" not in line and "killall" not in line, (book.id, fix.title, line)


@pytest.fixture
def kb_copy(tmp_path):
    dest = tmp_path / "skills"
    shutil.copytree(skills_dir(), dest)
    return dest


def problems_of(folder):
    _, problems = check_knowledge(folder)
    return [str(p) for p in problems]


def test_malformed_frontmatter_is_reported_with_file(kb_copy, cli):
    path = kb_copy / "gc-pause.md"
    path.write_text(path.read_text().replace("title:", "title: [unclosed", 1))
    code, out, _ = cli("skills", "check", "--dir", kb_copy)
    assert code == 1
    assert "gc-pause.md:frontmatter: malformed YAML" in out


def test_bad_fields_are_named(kb_copy):
    path = kb_copy / "cpu-spin.md"
    text = path.read_text()
    text = text.replace("phase:", "phase: teatime\nold_phase:", 1)
    path.write_text(text)
    (kb_copy / "io-stall.md").write_text(
        (kb_copy / "io-stall.md").read_text().replace("match: '", "match: '(unclosed", 1)
    )
    problems = problems_of(kb_copy)
    assert any(p.startswith("cpu-spin.md:phase: 'teatime' is not a phase") for p in problems), problems
    assert any(p.startswith("io-stall.md:signals[") and "bad regular expression" in p for p in problems), problems


def test_duplicate_and_missing_ids(kb_copy):
    shutil.copy(kb_copy / "gc-pause.md", kb_copy / "gc-pause-copy.md")
    (kb_copy / "network.md").unlink()
    problems = problems_of(kb_copy)
    assert any("gc-pause-copy.md:id" in p for p in problems), problems
    assert any(p.startswith("network.md:file: missing") for p in problems), problems
    assert any("no playbook skills/network.md" in p for p in problems), problems


def test_tree_problems_are_named(kb_copy):
    tree = kb_copy / "tree.yaml"
    text = tree.read_text()
    text = text.replace("branches: {start: start, mid-run: mid_run}", "branches: {start: start, mid-run: nowhere}")
    tree.write_text(text)
    problems = problems_of(kb_copy)
    assert "tree.yaml:nodes.phase.branches.mid-run: 'nowhere' is not a node" in problems


def test_missing_section_and_fix_block(kb_copy):
    path = kb_copy / "compile.md"
    text = path.read_text().replace("## References", "## Further reading")
    path.write_text(text)
    problems = problems_of(kb_copy)
    assert "compile.md:## References: section missing" in problems


def test_diagnose_refuses_a_broken_knowledge_base(kb_copy, monkeypatch, cli):
    (kb_copy / "tree.yaml").write_text("root: [unclosed\n")
    import debug_stuck.kb as paths

    monkeypatch.setattr(paths, "skills_dir", lambda: kb_copy)
    import debug_stuck.kb as kb

    monkeypatch.setattr(kb, "skills_dir", lambda: kb_copy)
    code, _, err = cli("diagnose", "--answer", "phase=start")
    assert code == 2
    assert "tree.yaml" in err and "skills check" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "table, broken, field",
    [
        ("log-catalog.yaml", ("  fact: extension-build\n", "  fact: no-such-fact\n"), ".fact"),
        ("log-catalog.yaml", ("stall_reports: [", "stall_reports: [not-a-fact, "), "stall_reports"),
        ("log-catalog.yaml", ("  tokens: [Building extension module]\n", "  tokens: Building: [\n"), "malformed YAML"),
        ("frames.yaml", ("- id: ", "- name: "), "frames[0]"),
        ("log-catalog.yaml", ("    libraries: [jax, flax", "    libraries: [jaxx, flax"), "stacks.jax.libraries"),
        ("log-catalog.yaml", ("  paddle:\n    libraries", "  mxnet:\n    libraries"), "stacks.mxnet"),
    ],
)
def test_a_broken_library_table_is_reported_not_ignored(kb_copy, table, broken, field):
    path = kb_copy / "data" / table
    text = path.read_text()
    assert broken[0] in text
    path.write_text(text.replace(broken[0], broken[1], 1))
    problems = problems_of(kb_copy)
    assert any(table in p and field in p for p in problems), problems
