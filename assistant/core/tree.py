"""The triage decision tree (skills/tree.yaml): parse it, validate it, and walk it with answers.

The engine knows nothing about hangs; the questions, branches and causes are all data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from debug_stuck.contract import CAUSE_IDS, CONTRACT_ANSWER_KEYS, PATTERNS, PHASES, UNKNOWN
from debug_stuck.core.problems import Problem
from debug_stuck.yamlio import load_yaml

ASSUMED_PRIOR_DAMPING = 0.6
TREE_FILE = "tree.yaml"


@dataclass
class Hint:
    pattern: re.Pattern[str]
    value: str
    scope: str  # "last": the last few lines of a log; "tail": the whole tail read
    implies: Dict[str, str]


@dataclass
class Question:
    key: str
    text: str
    why: str
    values: Dict[str, str]  # value -> what it means; empty for integer questions
    kind: str = "choice"  # or "integer"
    default: Optional[str] = None
    hints: List[Hint] = field(default_factory=list)
    from_causes: Dict[str, List[str]] = field(default_factory=dict)
    verdict_phase: Dict[str, str] = field(default_factory=dict)
    probes: List[str] = field(default_factory=list)  # targeted probes whose result answers it
    # answers another answer settles: {other key: {its value: this value}} (no GPU: gpu is none)
    given: Dict[str, Dict[str, str]] = field(default_factory=dict)

    def valid_values(self) -> List[str]:
        return list(self.values) + [UNKNOWN] if self.kind == "choice" else ["a positive integer", UNKNOWN]

    def to_dict(self) -> dict:
        out = {"key": self.key, "text": self.text, "why": self.why}
        out["values"] = dict(self.values) if self.kind == "choice" else {"N": "a positive integer"}
        if self.probes:
            out["probes"] = list(self.probes)
        return out


@dataclass
class Node:
    id: str
    pattern: Optional[str] = None
    ask: Optional[str] = None
    branches: Dict[str, str] = field(default_factory=dict)
    causes: Dict[str, float] = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return self.ask is None


@dataclass
class Step:
    node: str
    key: str
    value: str
    how: str  # user|evidence|log (answered), default, or assumed

    @property
    def assumed(self) -> bool:
        return self.how == "assumed"

    def to_dict(self) -> dict:
        return {"node": self.node, "key": self.key, "value": self.value, "source": self.how}


@dataclass
class Walk:
    steps: List[Step]
    leaf: str
    priors: Dict[str, float]
    pattern: Optional[str]

    @property
    def assumed_keys(self) -> List[str]:
        return [s.key for s in self.steps if s.assumed]


class Tree:
    def __init__(
        self,
        root: str,
        questions: Dict[str, Question],
        nodes: Dict[str, Node],
        run_start: Optional[re.Pattern[str]] = None,
        last_lines: int = 6,
        rank_lines: Sequence[re.Pattern[str]] = (),
        distributed_lines: Optional[re.Pattern[str]] = None,
        rank_progress_lines: Sequence[re.Pattern[str]] = (),
        rank_tagged_lines: Sequence[re.Pattern[str]] = (),
    ):
        self.root = root
        self.questions = questions
        self.nodes = nodes
        self.run_start = run_start
        self.last_lines = last_lines
        self.rank_lines = tuple(rank_lines)
        self.distributed_lines = distributed_lines
        self.rank_progress_lines = tuple(rank_progress_lines)
        self.rank_tagged_lines = tuple(rank_tagged_lines)
        self._reach: Dict[str, frozenset] = {}

    def reachable_causes(self, node_id: str) -> frozenset:
        if node_id not in self._reach:
            node = self.nodes[node_id]
            found = set(node.causes)
            self._reach[node_id] = frozenset()  # cycle guard; validate() reports cycles
            for child in node.branches.values():
                if child in self.nodes:
                    found |= self.reachable_causes(child)
            self._reach[node_id] = frozenset(found)
        return self._reach[node_id]

    def walk(self, answers: Dict[str, Tuple[str, str]]) -> Walk:
        """Walk from the root. `answers` maps key -> (value, source). Never dead-ends."""
        steps: List[Step] = []
        pattern: Optional[str] = None
        clean = True  # no assumed step so far
        node = self.nodes[self.root]
        seen = set()
        while not node.is_leaf and node.id not in seen:
            seen.add(node.id)
            if node.pattern and clean:
                pattern = node.pattern
            question = self.questions[node.ask]
            value, how = answers.get(node.ask, (UNKNOWN, "assumed"))
            if value not in node.branches:
                if question.default in node.branches:
                    value, how = question.default, "default"
                else:
                    value, how = self._widest_branch(node), "assumed"
            if how == "assumed":
                clean = False
            steps.append(Step(node.id, node.ask, value, how))
            node = self.nodes[node.branches[value]]
        if node.pattern and clean:
            pattern = node.pattern
        damping = ASSUMED_PRIOR_DAMPING ** sum(1 for s in steps if s.assumed)
        priors = {cause: round(w * damping, 4) for cause, w in node.causes.items()}
        return Walk(steps=steps, leaf=node.id, priors=priors, pattern=pattern)

    def separating_questions(self, a: str, b: str, path: List[dict]) -> List[str]:
        """The questions on the walked path whose answer would tell cause a from cause b: one branch
        favours a, another favours b (by the best prior each can reach); guessed steps first."""
        found = []
        for step in path:
            node = self.nodes.get(step.get("node"))
            if node is None or node.is_leaf:
                continue
            leans = {
                (self._best_prior(child, a) > self._best_prior(child, b))
                - (self._best_prior(child, a) < self._best_prior(child, b))
                for child in node.branches.values()
            }
            if 1 in leans and -1 in leans:
                found.append((step.get("source") == "user", step["key"]))
        return [key for _, key in sorted(found, key=lambda item: item[0])]

    def _best_prior(self, node_id: str, cause: str, seen: frozenset = frozenset()) -> float:
        node = self.nodes.get(node_id)
        if node is None or node_id in seen:
            return 0.0
        if node.is_leaf:
            return float(node.causes.get(cause, 0.0))
        return max((self._best_prior(c, cause, seen | {node_id}) for c in node.branches.values()), default=0.0)

    def _widest_branch(self, node: Node) -> str:
        # Ties go to the first branch listed, so the data decides.
        return max(node.branches, key=lambda v: len(self.reachable_causes(node.branches[v])))

    def validate(self, playbook_ids=()) -> List[Problem]:
        """Every question and node well-formed, every branch covered, every cause reachable."""
        f = TREE_FILE
        problems: List[Problem] = []
        for key, allowed in CONTRACT_ANSWER_KEYS.items():
            q = self.questions.get(key)
            if q is None:
                problems.append(Problem(f, f"questions.{key}", "missing: the contract requires this key"))
            elif allowed and sorted(q.values) != sorted(allowed):
                problems.append(
                    Problem(f, f"questions.{key}.values", f"must be exactly {', '.join(allowed)} (the contract's)")
                )
        if self.root not in self.nodes:
            problems.append(Problem(f, "root", f"{self.root!r} is not a node"))
            return problems
        for node in self.nodes.values():
            where = f"nodes.{node.id}"
            if node.pattern is not None and node.pattern not in PATTERNS:
                problems.append(Problem(f, f"{where}.pattern", f"{node.pattern!r}; valid: {', '.join(PATTERNS)}"))
            if node.is_leaf:
                if not node.causes:
                    problems.append(Problem(f, where, "a leaf must name causes"))
                for cause, weight in node.causes.items():
                    if cause not in CAUSE_IDS:
                        problems.append(Problem(f, f"{where}.causes.{cause}", "not a cause id"))
                    elif playbook_ids and cause not in playbook_ids:
                        problems.append(Problem(f, f"{where}.causes.{cause}", f"no playbook skills/{cause}.md"))
                    if not isinstance(weight, (int, float)) or not 0 < weight <= 1:
                        problems.append(Problem(f, f"{where}.causes.{cause}", "prior must be in (0, 1]"))
                continue
            question = self.questions.get(node.ask)
            if question is None:
                problems.append(Problem(f, f"{where}.ask", f"{node.ask!r} is not a question"))
                continue
            missing = [v for v in question.values if v not in node.branches]
            if missing:
                problems.append(Problem(f, f"{where}.branches", f"no branch for {', '.join(missing)}"))
            for value, child in node.branches.items():
                if value not in question.values:
                    problems.append(Problem(f, f"{where}.branches.{value}", f"not a value of {node.ask!r}"))
                if child not in self.nodes:
                    problems.append(Problem(f, f"{where}.branches.{value}", f"{child!r} is not a node"))
        problems.extend(self._cycles())
        reachable = self.reachable_causes(self.root) if not problems else frozenset()
        if not problems:
            for cause in CAUSE_IDS:
                if cause not in reachable:
                    problems.append(Problem(f, "nodes", f"cause {cause!r} is not reachable from the root"))
        return problems

    def _cycles(self) -> List[Problem]:
        problems, state = [], {}

        def visit(node_id: str) -> None:
            state[node_id] = "open"
            for child in self.nodes[node_id].branches.values():
                if child not in self.nodes:
                    continue
                if state.get(child) == "open":
                    problems.append(Problem(TREE_FILE, f"nodes.{node_id}", f"cycle through {child!r}"))
                elif child not in state:
                    visit(child)
            state[node_id] = "done"

        visit(self.root)
        return problems


def parse_tree(text, probe_names: Sequence[str]):
    """(Tree or None, [Problem]) from tree.yaml's text (or the error reading it)."""
    f = TREE_FILE
    if not isinstance(text, str):
        return None, [Problem(f, "file", f"cannot read: {text}")]
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [
            Problem(
                f,
                f"line {mark.line + 1}" if mark else "yaml",
                f"malformed YAML: {getattr(exc, 'problem', None) or exc}",
            )
        ]
    if not isinstance(data, dict):
        return None, [Problem(f, "file", "must be a YAML mapping")]
    problems: List[Problem] = []
    questions: Dict[str, Question] = {}
    for key, raw in (data.get("questions") or {}).items():
        q, found = _parse_question(str(key), raw, probe_names)
        problems.extend(found)
        if q:
            questions[q.key] = q
    nodes: Dict[str, Node] = {}
    for node_id, raw in (data.get("nodes") or {}).items():
        if not isinstance(raw, dict):
            problems.append(Problem(f, f"nodes.{node_id}", "must be a mapping"))
            continue
        ask = raw.get("ask")
        causes = raw.get("causes") or {}
        if (ask is None) == (not causes):
            problems.append(Problem(f, f"nodes.{node_id}", "needs either ask+branches or causes"))
            continue
        nodes[str(node_id)] = Node(
            id=str(node_id),
            pattern=raw.get("pattern"),
            ask=ask,
            branches={str(k): str(v) for k, v in (raw.get("branches") or {}).items()},
            causes=dict(causes),
        )
    if not data.get("root"):
        problems.append(Problem(f, "root", "required"))
    run_start = None
    if data.get("run_start"):
        try:
            run_start = re.compile(str(data["run_start"]))
        except re.error as exc:
            problems.append(Problem(f, "run_start", f"bad regular expression: {exc}"))
    last_lines = data.get("last_lines", 6)
    if not isinstance(last_lines, int) or last_lines < 1:
        problems.append(Problem(f, "last_lines", "must be a positive integer"))
    rank_lines = _pattern_list(data, "rank_lines", problems, any_of=("rank", "world"))
    rank_progress_lines = _pattern_list(data, "rank_progress_lines", problems, all_of=("rank", "count"))
    rank_tagged_lines = _pattern_list(data, "rank_tagged_lines", problems, all_of=("rank", "msg"))
    distributed_lines = None
    if data.get("distributed_lines"):
        try:
            distributed_lines = re.compile(str(data["distributed_lines"]))
        except re.error as exc:
            problems.append(Problem(f, "distributed_lines", f"bad regular expression: {exc}"))
    if problems:
        return None, problems
    tree = Tree(
        str(data["root"]),
        questions,
        nodes,
        run_start,
        last_lines,
        rank_lines,
        distributed_lines,
        rank_progress_lines,
        rank_tagged_lines,
    )
    return tree, []


def _pattern_list(data: dict, key: str, problems: List[Problem], any_of=(), all_of=()) -> List[re.Pattern[str]]:
    """The regular expressions of a top-level list, each with the named groups the reader uses
    (one of `any_of`, all of `all_of`); every bad one becomes a Problem naming it."""
    out = []
    for i, raw in enumerate(data.get(key) or []):
        try:
            pattern = re.compile(str(raw))
        except re.error as exc:
            problems.append(Problem(TREE_FILE, f"{key}[{i}]", f"bad regular expression: {exc}"))
            continue
        groups = set(pattern.groupindex)
        if any_of and not set(any_of) & groups:
            needs = " or ".join(f"`{g}`" for g in any_of)
            problems.append(Problem(TREE_FILE, f"{key}[{i}]", f"needs a named group {needs}"))
        if all_of and not set(all_of) <= groups:
            needs = " and ".join(f"`{g}`" for g in all_of)
            problems.append(Problem(TREE_FILE, f"{key}[{i}]", f"needs named groups {needs}"))
        out.append(pattern)
    return out


def _parse_question(key: str, raw, probe_names: Sequence[str]) -> Tuple[Optional[Question], List[Problem]]:
    f, where = TREE_FILE, f"questions.{key}"
    if not isinstance(raw, dict) or not raw.get("text") or not raw.get("why"):
        return None, [Problem(f, where, "needs text and why")]
    kind = raw.get("type", "choice")
    values = raw.get("values") or {}
    if kind == "choice" and (not isinstance(values, dict) or not values):
        return None, [Problem(f, f"{where}.values", "a mapping of value: meaning is required")]
    problems = []
    hints = []
    for i, h in enumerate(raw.get("hints") or []):
        try:
            pattern = re.compile(h["match"])
        except (KeyError, TypeError, re.error) as exc:
            problems.append(Problem(f, f"{where}.hints[{i}].match", f"bad regular expression: {exc}"))
            continue
        if h.get("value") not in values:
            problems.append(Problem(f, f"{where}.hints[{i}].value", f"not a value of {key!r}"))
            continue
        hints.append(Hint(pattern, h["value"], h.get("scope", "last"), dict(h.get("implies") or {})))
    default = raw.get("default")
    if default is not None and default not in values:
        problems.append(Problem(f, f"{where}.default", f"{default!r} is not one of its values"))
    from_causes = {str(k): list(v) for k, v in (raw.get("from_causes") or {}).items()}
    for value, causes in from_causes.items():
        if value not in values or any(c not in CAUSE_IDS for c in causes):
            problems.append(Problem(f, f"{where}.from_causes.{value}", "needs a valid value and cause ids"))
    probes = [str(p) for p in (raw.get("probes") or [])]
    for name in probes:
        if name not in probe_names:
            problems.append(Problem(f, f"{where}.probes", f"{name!r} is not a probe; valid: {', '.join(probe_names)}"))
    verdict_phase = {str(k): str(v) for k, v in (raw.get("verdict_phase") or {}).items()}
    for value, phase in verdict_phase.items():
        if value not in values or phase not in PHASES:
            problems.append(
                Problem(f, f"{where}.verdict_phase.{value}", f"needs a value and a phase ({', '.join(PHASES)})")
            )
    given = {str(k): {str(a): str(b) for a, b in (v or {}).items()} for k, v in (raw.get("given") or {}).items()}
    for other, mapping in given.items():
        if any(value not in values for value in mapping.values()):
            problems.append(Problem(f, f"{where}.given.{other}", f"maps to values of {key!r}: {', '.join(values)}"))
    if problems:
        return None, problems
    return (
        Question(
            key=key,
            text=" ".join(str(raw["text"]).split()),
            why=" ".join(str(raw["why"]).split()),
            values={str(k): str(v) for k, v in values.items()},
            kind=kind,
            default=default,
            hints=hints,
            from_causes=from_causes,
            verdict_phase=verdict_phase,
            probes=probes,
            given=given,
        ),
        [],
    )
