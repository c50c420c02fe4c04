"""Triage answers from flags or a file, checked against the questions of the tree."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, Iterable, Optional

import yaml

from debug_stuck.contract import UNKNOWN
from debug_stuck.core.tree import Question
from debug_stuck.errors import BadInput
from debug_stuck.yamlio import load_yaml

MAX_ANSWERS_FILE_BYTES = 1024 * 1024
ANSWERS_EXPECTED = "give a YAML or JSON file of key: value"


@dataclass
class Answer:
    key: str
    value: str
    source: str  # user|evidence|log

    def to_dict(self) -> dict:
        return {"value": self.value, "source": self.source}


def normalize_value(question: Question, raw) -> str:
    """Return the canonical value for a question, or raise BadInput naming what is valid."""
    text = str(raw).strip()
    if question.kind == "integer":
        if text.lower() == UNKNOWN:
            return UNKNOWN
        if text.isdigit() and int(text) > 0:
            return str(int(text))
        raise BadInput(
            f"bad value {text!r} for answer {question.key!r}",
            f"valid: a positive integer or {UNKNOWN}",
        )
    value = text.lower().replace("_", "-").replace(" ", "-")
    if value in question.values or value == UNKNOWN:
        return value
    raise BadInput(
        f"bad value {text!r} for answer {question.key!r}",
        f"valid: {', '.join(question.valid_values())}",
    )


def check_answer(questions: Dict[str, Question], key: str, value, source: str = "user") -> Answer:
    norm_key = str(key).strip().lower().replace("-", "_")
    question = questions.get(norm_key) or questions.get(str(key).strip())
    if question is None:
        raise BadInput(f"unknown answer key {key!r}", f"valid keys: {', '.join(questions)}")
    return Answer(question.key, normalize_value(question, value), source)


def parse_answer_flags(questions: Dict[str, Question], flags: Iterable[str]) -> Dict[str, Answer]:
    out: Dict[str, Answer] = {}
    for flag in flags:
        if "=" not in flag:
            raise BadInput(
                f"--answer {flag!r} is not KEY=VALUE", f"e.g. --answer phase=start; keys: {', '.join(questions)}"
            )
        key, value = flag.split("=", 1)
        answer = check_answer(questions, key, value)
        out[answer.key] = answer
    return out


def answers_from_bytes(questions: Dict[str, Question], raw: bytes, path: str) -> Dict[str, Answer]:
    """The answers of a YAML or JSON mapping of key: value (or key: {value: ...}) read from `path`."""
    if len(raw) > MAX_ANSWERS_FILE_BYTES:
        raise BadInput(f"answers file {path} is over 1 MiB", "expected a small YAML or JSON mapping (under 1 MiB)")
    if b"\x00" in raw:
        raise BadInput(f"answers file {path} is binary", "expected a YAML or JSON mapping of key: value")
    try:
        data = load_yaml(raw.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise BadInput(
            f"answers file {path} is malformed{where}", "expected a YAML or JSON mapping of key: value"
        ) from None
    if data is None:
        return {}
    if isinstance(data, dict) and isinstance(data.get("answers"), dict):
        data = data["answers"]  # a previous JSON report's answers are accepted as they are
    if not isinstance(data, dict):
        raise BadInput(f"answers file {path} must hold a mapping, not a {type(data).__name__}", "e.g. phase: start")
    out: Dict[str, Answer] = {}
    for key, value in data.items():
        if isinstance(value, dict) and "value" in value:
            value = value["value"]
        if isinstance(value, (dict, list)) or value is None:
            raise BadInput(f"answers file {path}: {key!r} needs a single value", "e.g. phase: start")
        answer = check_answer(questions, key, value)
        out[answer.key] = answer
    return out


def dump_answers(answers: Dict[str, Answer]) -> str:
    return json.dumps({k: a.to_dict() for k, a in answers.items()}, indent=2)


def merge(*layers: Optional[Dict[str, Answer]]) -> Dict[str, Answer]:
    """Later layers override earlier ones, except that `unknown` never overrides a real value."""
    out: Dict[str, Answer] = {}
    for layer in layers:
        for key, answer in (layer or {}).items():
            if answer.value == UNKNOWN and key in out:
                continue
            out[key] = answer
    return out
