"""Training logs as evidence: the tail's lines, the run's progress, and the answers its lines give."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations, ObservedLine
from debug_stuck.core.tree import Tree
from debug_stuck.probes.collectors.logtail import LogTail, parse_progress, read_log_tail


def observe_log(tree: Tree, path: str, obs: Observations, max_bytes: Optional[int] = None) -> LogTail:
    tail = read_log_tail(path, max_bytes=max_bytes) if max_bytes else read_log_tail(path)
    if tail.error:
        return tail
    for text, number in zip(tail.lines, tail.line_numbers):
        obs.add("log", ObservedLine(text, file=path, line=number if tail.whole_file else None))
    run = _current_run(tree, tail.lines)
    progress = parse_progress(run)
    obs.last_steps.append(progress.last_step)
    mid_run = progress.last_step is not None and progress.last_step > 0
    if mid_run:
        obs.offer_answer(
            Answer("phase", "mid-run", "log"), f"{Path(path).name} shows step {progress.last_step} in this run"
        )
    last = run[-tree.last_lines :]
    for question in tree.questions.values():
        for scope_lines, scope in ((last, "last"), (run, "tail")):
            hit = _latest_hint(question, scope_lines, scope)
            if hit is None:
                continue
            hint, line = hit
            why = f"{Path(path).name}: {line.strip()[:160]!r}"
            obs.offer_answer(Answer(question.key, hint.value, "log"), why)
            if not mid_run:
                for key, value in hint.implies.items():
                    obs.offer_answer(Answer(key, value, "log"), why)
    return tail


def _current_run(tree: Tree, lines: List[str]) -> List[str]:
    if tree.run_start is None:
        return lines
    for i in range(len(lines) - 1, -1, -1):
        if tree.run_start.search(lines[i]):
            return lines[i:]
    return lines


def _latest_hint(question, lines: List[str], scope: str):
    hints = [h for h in question.hints if h.scope == scope]
    if not hints:
        return None
    for line in reversed(lines):
        for hint in hints:
            if hint.pattern.search(line):
                return hint, line
    return None
