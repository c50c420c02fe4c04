"""The playbooks are written for the person at the terminal: every snippet is valid code with its
names defined, and the prose speaks about their job, not about the documents the knowledge came from.

A Python snippet that edits the user's own code names the objects it takes from that code in a
`# uses: model, loader` comment; every other name must be imported or defined in the snippet.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess

import pytest

PLACEHOLDER = re.compile(r"\{(\w+)\}")
USES = re.compile(r"^\s*#\s*uses:\s*(.+)$", re.M)
# what a user must never read in a playbook: notes about where the knowledge came from (nanochat
# itself is a framework its fixes may name; its "debug skill" document is a source)
SOURCE_DOCUMENTS = re.compile(
    r"(?i)\bseeds?\b|write-?ups?\b|hang catalog|the (?:source|original) (?:document|report)s?\b"
    r"|\bthe (?:latent[- ]cache|sd-scripts) (?:analysis|report|hang)\b|debug skill"
)
SHELL = ("bash", "sh", "shell", "")


def _blocks(knowledge, languages):
    for cause, book in sorted(knowledge.playbooks.items()):
        placed = [(f"### {fix.title}", b) for fix in book.fixes for b in fix.blocks]
        placed += [("## How to confirm", b) for b in book.checks]
        for where, block in placed:
            if block.language in languages:
                yield cause, where, PLACEHOLDER.sub(lambda m: f"PLACEHOLDER_{m.group(1)}", block.text)


def _python_blocks(knowledge):
    return list(_blocks(knowledge, ("python", "py")))


def test_every_python_snippet_parses(knowledge):
    bad = []
    for cause, where, text in _python_blocks(knowledge):
        try:
            ast.parse(text)
        except SyntaxError as exc:
            bad.append(f"{cause} {where}: {exc}")
    assert not bad, "\n".join(bad)


def test_every_python_snippet_defines_or_declares_its_names(knowledge, tmp_path):
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the test extra)")
    where_of = {}
    for i, (cause, where, text) in enumerate(_python_blocks(knowledge)):
        declared = [n.strip() for line in USES.findall(text) for n in line.split("(")[0].split(",") if n.strip()]
        # a placeholder is a value the advice fills in for the job (its cores, its PID): defined by then
        declared += sorted(set(re.findall(r"\bPLACEHOLDER_\w+", text)))
        stubs = "".join(f"{name} = None\n" for name in declared if name.isidentifier())
        path = tmp_path / f"snippet_{i}.py"
        path.write_text(stubs + text, encoding="utf-8")
        where_of[path.name] = (f"{cause} {where}", stubs.count("\n"))
    result = subprocess.run(
        [ruff, "check", "--no-cache", "--isolated", "--select", "F821", "--output-format", "concise", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    problems = []
    for line in result.stdout.splitlines():
        m = re.match(r".*?(snippet_\d+\.py):(\d+):\d+: (F821 .*)", line)
        if m:
            where, offset = where_of[m.group(1)]
            problems.append(f"{where} (line {int(m.group(2)) - offset}): {m.group(3)}")
    assert not problems, "undefined names (import them, or declare the user's own objects in '# uses:'):\n" + "\n".join(
        problems
    )


def test_every_shell_snippet_parses(knowledge, tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine")
    bad = []
    for cause, where, text in _blocks(knowledge, SHELL):
        script = tmp_path / "snippet.sh"
        script.write_text(text, encoding="utf-8")
        result = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            bad.append(f"{cause} {where}: {result.stderr.strip()}")
    assert not bad, "\n".join(bad)


def test_no_playbook_talks_about_the_documents_its_knowledge_came_from(knowledge):
    found = []
    for cause, book in sorted(knowledge.playbooks.items()):
        for number, line in enumerate(book.body.splitlines(), 1):
            match = SOURCE_DOCUMENTS.search(line)
            if match:
                found.append(f"skills/{cause}.md body line {number}: {match.group(0)!r}: {line.strip()[:100]}")
    assert not found, "\n".join(found)
