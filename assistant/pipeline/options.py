"""A diagnosis request from what a person or a script gives: answers as flags or in a file (a
previous JSON report's included), a bundled example's answers and logs, hosts as one list."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from debug_stuck.core.answers import (
    ANSWERS_EXPECTED,
    MAX_ANSWERS_FILE_BYTES,
    Answer,
    answers_from_bytes,
    merge,
    parse_answer_flags,
)
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.inputs import read_input


def load_answers_file(knowledge: Knowledge, path: str) -> Dict[str, Answer]:
    """The answers of a YAML or JSON file, read bounded (a FIFO or /dev/zero is refused, exit 2)."""
    raw = read_input(path, "answers file", MAX_ANSWERS_FILE_BYTES + 1, expected=ANSWERS_EXPECTED)
    return answers_from_bytes(knowledge.tree.questions, raw, path)


def answered_request(
    knowledge: Knowledge,
    flags: Iterable[str] = (),
    answers_file: Optional[str] = None,
    example: Optional[str] = None,
) -> DiagnoseRequest:
    """A request holding the answers given: an example's first, then the file's, then the flags'
    (a later one wins, except that `unknown` never overrides a real value); an example's logs too."""
    from debug_stuck.kb import load_example

    request = DiagnoseRequest()
    if example:
        request.answers, request.logs = load_example(knowledge.tree.questions, example)
    from_file = load_answers_file(knowledge, answers_file) if answers_file else {}
    request.answers = merge(request.answers, from_file, parse_answer_flags(knowledge.tree.questions, flags))
    return request


def host_list(text: Optional[str]) -> List[str]:
    """--hosts a,b,c: each checked (never an option ssh could read), each once."""
    if not text:
        return []
    from debug_stuck.live.ssh import parse_hosts

    return parse_hosts(text)


def list_examples() -> Dict[str, str]:
    from debug_stuck.kb import list_examples as bundled

    return bundled()
