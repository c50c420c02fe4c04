"""The playbooks of the knowledge base, parsed: YAML frontmatter for the machine, Markdown prose for
people. Pure: the texts come from debug_stuck.kb, the one module that reads the knowledge base.

Parsing never raises on a bad file by itself: every problem is collected as file:field: message,
so `skills check` can list them all and `diagnose` can refuse with the first one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from debug_stuck.contract import CAUSE_IDS, FIX_CONTEXT, PATTERNS, PHASES, SAFETY_LABELS, SIGNAL_SOURCES
from debug_stuck.core.problems import Problem
from debug_stuck.core.tree import Tree
from debug_stuck.yamlio import load_yaml

REQUIRED_SECTIONS = ("Why it happens", "How to confirm", "Fixes", "References")
_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)


@dataclass(frozen=True)
class Signal:
    cause: str
    index: int
    source: str
    pattern: re.Pattern[str]
    weight: float
    detail: str
    implies: Dict[str, str]
    # says where the job waits (the consumer's side: the main thread waiting for its next batch), not
    # why: the party it waits for is not seen. Alone, it names a stage, not a cause (classify: thin)
    place: bool = False

    def describe(self, match: re.Match[str]) -> str:
        groups = {k: v.strip() if v else self._absent(k) for k, v in match.groupdict().items()}
        if self.source == "fact":  # a fact line carries its fields as key=value: `{entry}` needs no group
            groups = {**dict(_FACT_FIELD.findall(match.string)), **groups}
        try:
            return self.detail.format_map(_Missing(groups))
        except (ValueError, IndexError):
            return self.detail

    def _absent(self, name: str) -> str:
        """A group that did not take part: nothing when it stands beside another ("{fifo}{pipe}": one of
        two alternatives matched), else "?"."""
        if f"{{{name}}}{{" in self.detail or f"}}{{{name}}}" in self.detail:
            return ""
        return "?"


_FACT_FIELD = re.compile(r"(?:^|\s)(\w+)=(\S+)")


class _Missing(dict):
    def __missing__(self, key):
        return "?"


@dataclass
class CodeBlock:
    language: str
    text: str
    safety: str = "edit"  # a key of contract.SAFETY_LABELS, from the fence's info string
    note: str = ""  # what exactly it writes, runs or disturbs
    labelled: bool = False  # the label was written, not defaulted


@dataclass
class Fix:
    title: str
    blocks: List[CodeBlock]
    applies: Dict[str, List[str]] = field(default_factory=dict)  # contract.FIX_CONTEXT key -> values
    flag: Optional[str] = None  # the option of the job's command the fix sets

    @property
    def commands(self) -> List[str]:
        return [b.text for b in self.blocks]


@dataclass
class Playbook:
    id: str
    title: str
    patterns: List[str]
    phase: str
    summary: str
    signals: List[Signal]
    probes: List[str]
    sources: List[str]
    path: Path
    body: str
    sections: Dict[str, str] = field(default_factory=dict)
    fixes: List[Fix] = field(default_factory=list)
    checks: List[CodeBlock] = field(default_factory=list)
    edits: List[dict] = field(default_factory=list)  # code edit rules (debug_stuck.advice.edits)

    @property
    def relative_path(self) -> str:
        return f"skills/{self.path.name}"


def parse_playbooks(texts: Dict[Path, object], probe_names: Sequence[str]):
    """({cause id: Playbook}, [Problem]) from each playbook file's text (or the error reading it)."""
    playbooks: Dict[str, Playbook] = {}
    problems: List[Problem] = []
    for path, text in sorted(texts.items()):
        if not isinstance(text, str):
            problems.append(Problem(path.name, "file", f"cannot read: {text}"))
            continue
        book, found = parse_playbook(path, text, probe_names)
        problems.extend(found)
        if book is None:
            continue
        if book.id in playbooks:
            problems.append(
                Problem(path.name, "id", f"duplicate id {book.id!r} (also in {playbooks[book.id].path.name})")
            )
            continue
        playbooks[book.id] = book
    return playbooks, problems


def parse_playbook(path: Path, text: str, probe_names: Sequence[str]):
    """Parse one playbook file's text into (Playbook or None, [Problem])."""
    name = path.name
    problems: List[Problem] = []
    m = _FRONTMATTER.match(text)
    if not m:
        return None, [Problem(name, "frontmatter", "missing: the file must start with a '---' YAML block")]
    try:
        meta = load_yaml(m.group(1))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (frontmatter line {where.line + 1})" if where else ""
        return None, [Problem(name, "frontmatter", f"malformed YAML{line}: {getattr(exc, 'problem', exc)}")]
    if not isinstance(meta, dict):
        return None, [Problem(name, "frontmatter", "must be a YAML mapping")]

    def need(key, kind):
        value = meta.get(key)
        if not isinstance(value, kind) or (isinstance(value, (str, list)) and not value):
            problems.append(Problem(name, key, f"required, a non-empty {kind.__name__}"))
            return None
        return value

    cause = need("id", str)
    title = need("title", str)
    summary = need("summary", str)
    patterns = need("patterns", list) or []
    phase = need("phase", str)
    sources = need("sources", list) or []
    probes = meta.get("probes") or []
    if cause is not None:
        if cause not in CAUSE_IDS:
            problems.append(Problem(name, "id", f"{cause!r} is not a cause id; valid: {', '.join(CAUSE_IDS)}"))
        if path.stem != cause:
            problems.append(Problem(name, "id", f"{cause!r} does not match the file name {path.stem!r}"))
    for p in patterns:
        if p not in PATTERNS:
            problems.append(Problem(name, "patterns", f"{p!r} is not a pattern; valid: {', '.join(PATTERNS)}"))
    if phase is not None and phase not in PHASES:
        problems.append(Problem(name, "phase", f"{phase!r} is not a phase; valid: {', '.join(PHASES)}"))
    if not isinstance(probes, list) or any(p not in probe_names for p in probes):
        problems.append(Problem(name, "probes", f"must be a list of probe names: {', '.join(probe_names)}"))
        probes = []
    signals = _parse_signals(name, cause or path.stem, meta.get("signals"), problems)

    body = text[m.end() :]
    sections, fixes, checks = _parse_body(body)
    for heading in REQUIRED_SECTIONS:
        if heading not in sections:
            problems.append(Problem(name, f"## {heading}", "section missing"))
    if "Fixes" in sections and not fixes:
        problems.append(Problem(name, "## Fixes", "no '### ' fix with a fenced command block"))
    for fix in fixes:
        if not fix.blocks:
            problems.append(Problem(name, f"### {fix.title}", "fix has no fenced command block"))
    _apply_fix_rules(name, meta.get("fixes"), fixes, problems)
    for fix in fixes:
        if "stack" not in fix.applies and any(TORCH_CODE.search(b.text) for b in fix.blocks):
            fix.applies["stack"] = ["torch"]  # it calls torch: not a fix for a TensorFlow or JAX job
    edits = _parse_edits(name, meta.get("edits"), problems)
    for where, block in [("## How to confirm", b) for b in checks] + [
        (f"### {f.title}", b) for f in fixes for b in f.blocks
    ]:
        if block.safety not in SAFETY_LABELS:
            problems.append(
                Problem(name, where, f"safety label {block.safety!r} invalid; valid: {', '.join(SAFETY_LABELS)}")
            )
        elif block.safety in NOTE_REQUIRED and not block.note:
            problems.append(
                Problem(name, where, f"{block.safety} needs a note in quotes: {NOTE_REQUIRED[block.safety]}")
            )
        elif block.language in SHELL_LANGUAGES and not block.labelled:
            problems.append(
                Problem(
                    name, where, f"a shell block needs a safety label after the language: {', '.join(SAFETY_LABELS)}"
                )
            )
    if problems:
        return None, problems
    return (
        Playbook(
            id=cause,
            title=title,
            patterns=list(patterns),
            phase=phase,
            summary=" ".join(summary.split()),
            signals=signals,
            probes=list(probes),
            sources=[str(s) for s in sources],
            path=path,
            body=body,
            sections=sections,
            fixes=fixes,
            checks=checks,
            edits=edits,
        ),
        [],
    )


def _parse_signals(name: str, cause: str, raw, problems: List[Problem]) -> List[Signal]:
    if not isinstance(raw, list) or not raw:
        problems.append(Problem(name, "signals", "required, a non-empty list"))
        return []
    out = []
    for i, item in enumerate(raw):
        where = f"signals[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem(name, where, "must be a mapping with source, match, weight, detail"))
            continue
        source = item.get("source")
        if source not in SIGNAL_SOURCES:
            problems.append(Problem(name, f"{where}.source", f"{source!r} invalid; valid: {', '.join(SIGNAL_SOURCES)}"))
            continue
        try:
            pattern = re.compile(str(item.get("match", "")))
        except re.error as exc:
            problems.append(Problem(name, f"{where}.match", f"bad regular expression: {exc}"))
            continue
        if not item.get("match"):
            problems.append(Problem(name, f"{where}.match", "required"))
            continue
        weight = item.get("weight")
        if not isinstance(weight, (int, float)) or not -1.0 <= weight <= 1.0:
            problems.append(Problem(name, f"{where}.weight", "required, a number from -1 to 1"))
            continue
        detail = item.get("detail")
        if not isinstance(detail, str) or not detail:
            problems.append(Problem(name, f"{where}.detail", "required, a string"))
            continue
        implies = item.get("implies") or {}
        if not isinstance(implies, dict):
            problems.append(Problem(name, f"{where}.implies", "must be a mapping of answer key: value"))
            continue
        place = item.get("place", False)
        if not isinstance(place, bool):
            problems.append(
                Problem(name, f"{where}.place", "true or false: the signal says where the job waits, not why")
            )
            continue
        implies = {str(k): str(v) for k, v in implies.items()}
        out.append(Signal(cause, i, source, pattern, float(weight), detail, implies, place=place))
    return out


SHELL_LANGUAGES = ("bash", "sh", "shell", "console", "")
NOTE_REQUIRED = {
    "writes-temp": "where, how big, and whether it is removed after",
    "runs-code": "where it writes",
    "disturbs": "how it may disturb the job",
    "changes": "what it changes",
}


def _fence_info(info: str) -> CodeBlock:
    """```bash reads  /  ```bash writes-temp "1 MiB in {output_dir}, removed after" """
    import shlex

    try:
        words = shlex.split(info or "")
    except ValueError:
        words = (info or "").split()
    language = words[0] if words else ""
    label = words[1] if len(words) > 1 else ""
    note = " ".join(words[2:])
    return CodeBlock(language=language, text="", safety=label or "edit", note=note, labelled=bool(label))


# A fix's code that imports or calls PyTorch (torch.save, torchrun's module, a DataLoader argument),
# or sets PyTorch's own environment (TORCHINDUCTOR_*, TORCH_NCCL_*, PYTORCH_CUDA_ALLOC_CONF).
TORCH_CODE = re.compile(
    r"^\s*(?:import|from)\s+torch\b|\btorch\.\w|\btorchrun\b|\b(?:TORCH|TORCHINDUCTOR|TORCHELASTIC|PYTORCH)_[A-Z]", re.M
)


def _apply_fix_rules(name: str, raw, fixes: List[Fix], problems: List[Problem]) -> None:
    """Frontmatter `fixes:`: {fix title: {framework: [...], platform: [...], flag: --x, ...}}."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        problems.append(Problem(name, "fixes", "must map a fix title to what it applies to"))
        return
    by_title = {f.title: f for f in fixes}
    for title, rules in raw.items():
        where = f"fixes.{title}"
        fix = by_title.get(str(title))
        if fix is None:
            problems.append(Problem(name, where, "no '### ' fix has this title"))
            continue
        if not isinstance(rules, dict):
            problems.append(Problem(name, where, f"a mapping of {', '.join(FIX_CONTEXT)} or flag"))
            continue
        for key, values in rules.items():
            if key == "flag":
                if not isinstance(values, str) or not values.startswith("-"):
                    problems.append(Problem(name, f"{where}.flag", "an option such as --num-workers"))
                else:
                    fix.flag = values
                continue
            valid = FIX_CONTEXT.get(key)
            values = [values] if isinstance(values, str) else values
            if valid is None:
                problems.append(Problem(name, f"{where}.{key}", f"unknown; valid: {', '.join(FIX_CONTEXT)}, flag"))
            elif not isinstance(values, list) or not values or any(v not in valid for v in values):
                problems.append(Problem(name, f"{where}.{key}", f"a list of: {', '.join(valid)}"))
            else:
                fix.applies[key] = [str(v) for v in values]


EDIT_KINDS = ("keyword", "wrap", "replace")


def _parse_edits(name: str, raw, problems: List[Problem]) -> List[dict]:
    """Frontmatter `edits:`: [{call, keyword+value | wrap | replace, why, imports?, anywhere?}]."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(Problem(name, "edits", "must be a list of edit rules"))
        return []
    out = []
    for i, rule in enumerate(raw):
        where = f"edits[{i}]"
        kinds = [k for k in EDIT_KINDS if isinstance(rule, dict) and k in rule]
        if not isinstance(rule, dict) or not isinstance(rule.get("call"), str) or len(kinds) != 1:
            problems.append(Problem(name, where, f"needs call and exactly one of {', '.join(EDIT_KINDS)}"))
            continue
        if kinds == ["keyword"] and not isinstance(rule.get("value"), str):
            problems.append(Problem(name, f"{where}.value", "the keyword's value, as Python source in quotes"))
            continue
        if kinds == ["wrap"] and "{call}" not in rule["wrap"]:
            problems.append(Problem(name, f"{where}.wrap", "must contain {call}"))
            continue
        if not isinstance(rule.get("why"), str) or not rule["why"]:
            problems.append(Problem(name, f"{where}.why", "required: what the change does"))
            continue
        imports = rule.get("imports") or []
        if not isinstance(imports, list) or not all(isinstance(m, str) and m.isidentifier() for m in imports):
            problems.append(Problem(name, f"{where}.imports", "a list of module names"))
            continue
        out.append(dict(rule))
    return out


def _parse_body(body: str):
    """Split the prose by `## ` sections; collect fixes (### + fences) and the confirm checks."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(body)
    lines = body.splitlines()
    sections: Dict[str, str] = {}
    fixes: List[Fix] = []
    checks: List[CodeBlock] = []
    h2: Optional[str] = None
    h2_start = 0
    pending: Optional[str] = None  # the heading level being opened
    for tok in tokens:
        if tok.type == "heading_open":
            pending = tok.tag
            if tok.tag == "h2" and tok.map:
                if h2 is not None:
                    sections[h2] = "\n".join(lines[h2_start : tok.map[0]]).strip()
                h2_start = tok.map[1]
        elif tok.type == "inline" and pending:
            title = tok.content.strip()
            if pending == "h2":
                h2 = title
            elif pending == "h3" and h2 == "Fixes":
                fixes.append(Fix(title=title, blocks=[]))
            pending = None
        elif tok.type == "fence":
            block = _fence_info((tok.info or "").strip())
            block.text = tok.content.rstrip("\n")
            if h2 == "Fixes" and fixes:
                fixes[-1].blocks.append(block)
            elif h2 == "How to confirm":
                checks.append(block)
    if h2 is not None:
        sections[h2] = "\n".join(lines[h2_start:]).strip()
    return sections, fixes, checks


@dataclass
class Knowledge:
    """The knowledge base, parsed and checked (debug_stuck.kb.load_knowledge gives it)."""

    playbooks: Dict[str, Playbook]
    tree: Tree
    folder: Path
    probes: Dict[str, dict] = field(default_factory=dict)  # skills/data/probes.yaml: name -> declaration
    frames: List[dict] = field(default_factory=list)  # skills/data/frames.yaml: what a frame means as a wait
    phases: dict = field(default_factory=dict)  # skills/data/phases.yaml: long phases seen on a stack
    programs: List[dict] = field(default_factory=list)  # skills/data/programs.yaml: child programs by name
    log_catalog: List[dict] = field(default_factory=list)  # skills/data/log-catalog.yaml: library messages
    stall_reports: Tuple[str, ...] = ()  # the catalog's facts that report a wait already timed out
    distributed_log_facts: Tuple[str, ...] = ()  # the catalog's facts only a job of several processes prints
    # skills/data/calibration.yaml: per kind (evidence, answers), the points of score -> probability
    calibration: Dict[str, List[tuple]] = field(default_factory=dict)

    def probability(self, score: float, thin: bool = False) -> float:
        """What a score means as the probability that the cause is right; `thin`: only the triage
        answers point at it, no evidence of the job's own."""
        from debug_stuck.core.calibration import probability

        return round(probability(self.calibration, score, thin), 3)

    def signals(self):
        for book in self.playbooks.values():
            yield from book.signals


def pattern_consistency(tree: Tree, playbooks: Dict[str, Playbook]) -> List[Problem]:
    """A cause named under a pattern's subtree must list that pattern in its playbook."""
    problems: List[Problem] = []

    def visit(node_id: str, pattern: Optional[str]) -> None:
        node = tree.nodes.get(node_id)
        if node is None:
            return
        pattern = node.pattern or pattern
        for cause in node.causes:
            book = playbooks.get(cause)
            if book and pattern and pattern not in book.patterns:
                problems.append(
                    Problem(
                        f"{cause}.md",
                        "patterns",
                        f"lacks {pattern}: tree node {node_id!r} names it under pattern {pattern}",
                    )
                )
        for child in node.branches.values():
            visit(child, pattern)

    if tree.root in tree.nodes:
        visit(tree.root, None)
    return problems
