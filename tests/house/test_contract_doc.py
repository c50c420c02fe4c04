"""docs/contract.md is the stable interface scripts and agents rely on: it must say what the code does.

Each check reads one part of the document (a table or a list) and compares it with the code that
implements it, both ways: what the code has, the document names; what the document names exists.
"""

import json
import re

import pytest

from conftest import REPO
from debug_stuck.actions.watch.settings import EVENTS
from debug_stuck.contract import CAUSE_IDS, CONTRACT_ANSWER_KEYS
from debug_stuck.core.report import Report
from debug_stuck.frontends.cli import COMMANDS, build_parser
from debug_stuck.frontends.commands.common import EXIT_CODES

DOC = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text(encoding="utf-8"))


def section(title: str) -> str:
    """The text of one `## title` (or `### title`) section, up to the next heading of its level."""
    m = re.search(rf"^(#+) {re.escape(title)}\n(.*?)(?=^\1 |\Z)", DOC, re.S | re.M)
    assert m, f"docs/contract.md has no section {title!r}"
    return m.group(2)


def first_cells(text: str):
    """The first column of the section's first table (its header and rule rows left out)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return [row.split("|")[1].strip() for row in rows[2:]]


def test_the_commands_table_is_the_cli():
    listed = [cell.strip("`") for cell in first_cells(section("Commands"))]
    assert listed[0] == "debug-stuck"
    assert [c.split()[1] for c in listed[1:]] == list(COMMANDS)
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert list(sub.choices) == list(COMMANDS)


def test_the_cause_ids_are_the_playbooks(knowledge):
    listed = re.findall(r"`([a-z][a-z-]*)`", section("Cause ids"))
    assert listed == list(CAUSE_IDS)
    assert set(knowledge.playbooks) == set(CAUSE_IDS)
    assert SCHEMA["$defs"]["cause"]["enum"] == list(CAUSE_IDS)


def test_the_answer_keys_are_the_tree(knowledge):
    rows = [line.split("|")[1:3] for line in section("Answer keys").splitlines() if line.startswith("| `")]
    documented = {key.strip(" `"): re.findall(r"`([^`]+)`", values) for key, values in rows}
    assert list(documented) == list(CONTRACT_ANSWER_KEYS)
    for key, values in CONTRACT_ANSWER_KEYS.items():
        question = knowledge.tree.questions[key]
        if values is None:
            assert question.kind == "integer" and documented[key] == []
        else:
            assert documented[key] == list(values) == list(question.values)


def test_the_report_fields_are_what_the_report_holds():
    documented = [cell.strip("`") for cell in first_cells(section("The report (`diagnose --format json`)"))]
    emitted = list(Report().to_dict())
    assert documented == emitted
    assert set(SCHEMA["required"]) <= set(emitted)
    assert set(SCHEMA["properties"]) <= set(emitted)


def test_the_watch_events_are_what_watch_emits():
    documented = [cell.strip("`") for cell in first_cells(section("`watch --format json` events"))]
    assert documented == list(EVENTS)


def test_the_exit_codes_are_the_clis():
    documented = first_cells(section("Exit codes"))
    in_help = re.findall(r"^\s+(\d+(?:\+N)?)\s", EXIT_CODES, re.M)
    assert documented == in_help


def test_every_probe_is_named_with_its_consent():
    from debug_stuck.probes.targeted.registry import REGISTRY

    text = section("Probes")
    runs, reads = text.split(";", 1)
    assert {n for n, spec in REGISTRY.items() if spec.runs_user_code} == set(re.findall(r"`([a-z][a-z-]*)`", runs))
    assert {n for n, spec in REGISTRY.items() if not spec.runs_user_code} == set(re.findall(r"`([a-z][a-z-]*)`", reads))


@pytest.mark.parametrize("fmt", ["json"])
def test_every_documented_json_command_accepts_format_json(fmt):
    rows = first_cells(section("Other JSON documents"))
    parser = build_parser()
    for row in rows:
        words = row.strip("`").split()
        command = [w for w in words if not w.startswith("-") and w.isidentifier() or w in COMMANDS][:1]
        assert command and command[0] in COMMANDS, row
        argv = [command[0], "--format", fmt]
        if command[0] == "skills":
            argv = ["skills", "check", "--format", fmt]
        if command[0] == "stop":
            argv += ["--pid", "1"]
        if command[0] == "probe":
            argv += ["env"]
        assert parser.parse_args(argv).format == fmt
