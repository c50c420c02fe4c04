"""Bundled example scenarios: skills/examples/NAME/{example.yaml, *.log}."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import yaml

from debug_stuck.contract import UNKNOWN
from debug_stuck.core.answers import load_answers_file
from debug_stuck.core.kb import Knowledge
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.errors import BadInput
from debug_stuck.paths import examples_dir
from debug_stuck.yamlio import load_yaml


def list_examples() -> Dict[str, str]:
    out = {}
    folder = examples_dir()
    if folder.is_dir():
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            meta = _example_meta(sub)
            out[sub.name] = str(meta.get("title", ""))
    return out


def _example_meta(folder: Path) -> dict:
    try:
        data = load_yaml((folder / "example.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_example(knowledge: Knowledge, name: str) -> DiagnoseRequest:
    folder = examples_dir() / name
    if not (folder / "example.yaml").is_file():
        names = ", ".join(list_examples()) or "none installed"
        raise BadInput(f"no bundled example {name!r}", f"valid: {names}")
    answers = load_answers_file(knowledge.tree.questions, str(folder / "example.yaml"))
    logs = sorted(str(p) for p in folder.glob("*.log"))
    return DiagnoseRequest(answers={k: a for k, a in answers.items() if a.value != UNKNOWN}, logs=logs)


def expected_cause(name: str) -> Optional[str]:
    return _example_meta(examples_dir() / name).get("expect", {}).get("cause")
