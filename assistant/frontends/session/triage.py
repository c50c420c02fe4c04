"""Step 2 of the session: the tree's questions in order, each pre-filled from the evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from debug_stuck.core.answers import Answer
from debug_stuck.core.tree import Question, Tree, Walk
from debug_stuck.frontends.session.probes import ProbeOffer

# The contract's three triage questions are asked even when the walked path does not need them:
# the classifier matches answer signals (e.g. "gpu=busy") whatever the path.
TRIAGE_KEYS = ("phase", "step", "gpu")


@dataclass
class Suggestion:
    """A pre-filled answer: the value the evidence gives, and why in one sentence."""

    key: str
    value: str
    source: str  # evidence | log
    reason: str

    @property
    def prompt(self) -> str:
        return f"{self.reason} -- correct?"


@dataclass
class QuestionView:
    """The question to ask now, with everything a front end shows beside it."""

    question: Question
    number: int
    total: int
    suggestion: Optional[Suggestion]
    choices: List[Tuple[str, str]]  # (value, "value: meaning"), "unknown" last
    probes: List[ProbeOffer]

    @property
    def key(self) -> str:
        return self.question.key

    @property
    def default(self) -> Optional[str]:
        """The value to highlight: the suggestion, else the tree's default for this question."""
        if self.suggestion is not None:
            return self.suggestion.value
        return self.question.default


class Triage:
    """Which question comes next, given the answers so far: the walked path of the tree in order,
    then the contract's triage questions the path did not need."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.answers: Dict[str, Answer] = {}
        self.order: List[str] = []

    def walk(self, suggestions: Optional[Dict[str, Suggestion]] = None) -> Walk:
        given = {k: (a.value, a.source) for k, a in self.answers.items()}
        for key, s in (suggestions or {}).items():
            given.setdefault(key, (s.value, s.source))
        return self.tree.walk(given)

    def pending(self, suggestions: Optional[Dict[str, Suggestion]] = None) -> List[str]:
        """The questions still to ask. Suggestions stand in for unanswered questions, so the
        count assumes they will be confirmed; the next question does not depend on them."""
        walk = self.walk(suggestions)
        keys = [s.key for s in walk.steps]
        phase = self.answers.get("phase") or (suggestions or {}).get("phase")
        for key in TRIAGE_KEYS:
            if key == "step" and phase is not None and phase.value == "start":
                continue  # "the same step every time" means nothing before the first step
            keys.append(key)
        return [k for k in dict.fromkeys(keys) if k not in self.answers and k in self.tree.questions]

    def record(self, answer: Answer) -> None:
        self.answers[answer.key] = answer
        if answer.key in self.order:
            self.order.remove(answer.key)
        self.order.append(answer.key)

    def back(self) -> Optional[str]:
        if not self.order:
            return None
        key = self.order.pop()
        self.answers.pop(key, None)
        return key
