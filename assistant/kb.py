"""The one way into the knowledge base: the playbooks, the triage tree, the data tables and the
worked examples under `skills/`, found inside an installed wheel or in a source checkout, read
once and checked as one. Everything that reads knowledge reads it through here; what it means is
parsed by the pure modules of debug_stuck.core (knowledge, tree, tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

from debug_stuck.contract import CAUSE_IDS, UNKNOWN
from debug_stuck.core.answers import Answer, answers_from_bytes
from debug_stuck.core.contradictions import JOB_FACTS, parse_conditions
from debug_stuck.core.knowledge import Knowledge, Problem, parse_playbooks, pattern_consistency
from debug_stuck.core.tables import CHECKS, TableProblem
from debug_stuck.core.tree import TREE_FILE, Question, parse_tree
from debug_stuck.errors import BadInput, KnowledgeError
from debug_stuck.yamlio import load_yaml

_PACKAGE_DIR = Path(__file__).resolve().parent
PROBES_TABLE = "probes.yaml"


# -- where it lives ---------------------------------------------------------------------------------


def data_dir() -> Path:
    """The folder holding `skills/` and `SKILL.md`: a wheel ships them under `debug_stuck/_data/`;
    an editable install or a checkout has them at the repository root, above this package."""
    bundled = _PACKAGE_DIR / "_data"
    if (bundled / "skills").is_dir():
        return bundled
    return _PACKAGE_DIR.parent


def skills_dir() -> Path:
    return data_dir() / "skills"


def skill_md() -> Path:
    return data_dir() / "SKILL.md"


def examples_dir() -> Path:
    return skills_dir() / "examples"


# -- the data tables (skills/data/*.yaml) -------------------------------------------------------------

_tables: Dict[Tuple[str, str], dict] = {}


def _read_table(folder: Path, name: str) -> Tuple[Optional[dict], List[TableProblem]]:
    file = f"data/{name}"
    try:
        text = (folder / "data" / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [(file, "file", f"cannot read: {exc}")]
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        return None, [(file, "file", f"malformed YAML{where}")]
    if not isinstance(data, dict):
        return None, [(file, "file", "must be a YAML mapping")]
    return data, []


def _table_problems(name: str, data: dict) -> List[TableProblem]:
    check = CHECKS.get(name)
    return check(data, f"data/{name}") if check is not None else []


def _checked_tables(folder: Path) -> Dict[str, Tuple[Optional[dict], List[TableProblem]]]:
    """Every checked table in the folder's data/, read once: {name: (data or None, its problems)}."""
    out: Dict[str, Tuple[Optional[dict], List[TableProblem]]] = {}
    for name in CHECKS:
        data, found = _read_table(folder, name)
        out[name] = (data, found + (_table_problems(name, data) if data is not None else []))
    return out


def load_table(name: str, folder: Optional[Path] = None) -> dict:
    """A checked table (cached). Raises KnowledgeError naming the first problem."""
    folder = folder or skills_dir()
    key = (str(folder), name)
    if key not in _tables:
        data, problems = _read_table(folder, name)
        if data is not None:
            problems = _table_problems(name, data)
        if problems:
            file, field, message = problems[0]
            raise KnowledgeError(
                f"knowledge base is broken: {file}:{field}: {message}",
                "run 'debug-stuck skills check' for the full list",
            )
        _tables[key] = data
    return _tables[key]


def probe_names(folder: Optional[Path] = None) -> Tuple[str, ...]:
    """The targeted probes the knowledge may name (skills/data/probes.yaml)."""
    return tuple(load_table(PROBES_TABLE, folder).get("probes") or {})


# -- playbooks and tree ---------------------------------------------------------------------------


def check_knowledge(folder: Optional[Path] = None):
    """(Knowledge or None, [Problem]): every problem in the folder, not just the first."""
    folder = folder or skills_dir()
    if not folder.is_dir():
        return None, [Problem(str(folder), "folder", "the knowledge base folder does not exist")]
    try:
        probes = dict(load_table(PROBES_TABLE, folder).get("probes") or {})
    except KnowledgeError as exc:
        return None, [Problem(f"data/{PROBES_TABLE}", "file", str(exc))]
    names = tuple(probes)
    texts: Dict[Path, object] = {}
    for path in sorted(folder.glob("*.md")):
        if path.name != "README.md":
            texts[path] = _text(path)
    playbooks, problems = parse_playbooks(texts, names)
    job_conditions, found = parse_conditions(texts)  # requires_any / excluded_when, on the job's facts
    problems.extend(found)
    problems.extend(
        Problem(f"data/{PROBES_TABLE}", f"probes.{name}.excluded_when", f"unknown job fact {fact!r}")
        for name, spec in probes.items()
        for fact in (spec or {}).get("excluded_when") or ()
        if fact not in JOB_FACTS
    )
    for cause in CAUSE_IDS:
        if cause not in playbooks and not any(p.file == f"{cause}.md" for p in problems):
            problems.append(Problem(f"{cause}.md", "file", f"missing: no playbook for cause {cause!r}"))
    tree, tree_problems = parse_tree(_text(folder / TREE_FILE), names)
    problems.extend(tree_problems)
    tables = _checked_tables(folder)
    problems.extend(Problem(file, field, message) for _, found in tables.values() for file, field, message in found)
    if tree is not None:
        problems.extend(tree.validate(playbook_ids=set(playbooks)))
        problems.extend(pattern_consistency(tree, playbooks))
    if tree is None:
        return None, problems
    frames = list(_usable(tables["frames.yaml"]).get("frames") or [])
    catalog_table = _usable(tables["log-catalog.yaml"])
    catalog = list(catalog_table.get("entries") or [])
    knowledge = Knowledge(playbooks=playbooks, tree=tree, folder=folder, probes=probes)
    knowledge.frames, knowledge.log_catalog = frames, catalog
    _fixes_follow_their_framework(playbooks, catalog_table.get("stacks") or {})
    knowledge.stall_reports = tuple(catalog_table.get("stall_reports") or ())
    knowledge.distributed_log_facts = tuple(catalog_table.get("distributed_facts") or ())
    knowledge.job_conditions = job_conditions
    maps = _optional_table(folder, "calibration.yaml").get("maps") or {}
    knowledge.phases = _optional_table(folder, "phases.yaml")
    knowledge.programs = list(_optional_table(folder, "programs.yaml").get("programs") or [])
    knowledge.calibration = {kind: [(float(x), float(p)) for x, p in points] for kind, points in maps.items()}
    return knowledge, problems


def _fixes_follow_their_framework(playbooks, stacks: dict) -> None:
    """A fix for frameworks or launchers that exist on one stack only (the Hugging Face Trainer,
    accelerate, torchrun: torch) is for that stack's jobs (a JAX job's report leaves it out)."""
    for playbook in playbooks.values():
        for fix in playbook.fixes:
            named = list(fix.applies.get("framework") or ()) + list(fix.applies.get("launcher") or ())
            if "stack" in fix.applies or not named:
                continue
            owners = [stack for stack, spec in stacks.items() if set(named) <= set(spec.get("frameworks") or ())]
            if len(owners) == 1:
                fix.applies["stack"] = owners


def _optional_table(folder: Path, name: str) -> dict:
    return _usable(_read_table(folder, name))


def _usable(read: Tuple[Optional[dict], list]) -> dict:
    """A table's data when it was read without a problem, else nothing (its problems are reported)."""
    data, problems = read
    return data if data is not None and not problems else {}


def _text(path: Path):
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return exc


_knowledge: Dict[Path, Knowledge] = {}


def load_knowledge(folder: Optional[Path] = None) -> Knowledge:
    """Load and check; raise KnowledgeError naming file:field of the first problem."""
    folder = (folder or skills_dir()).resolve()
    if folder in _knowledge:
        return _knowledge[folder]
    knowledge, problems = check_knowledge(folder)
    if problems or knowledge is None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise KnowledgeError(
            f"knowledge base is broken: {problems[0]}{more}",
            "run 'debug-stuck skills check' for the full list",
        )
    _knowledge[folder] = knowledge
    return knowledge


# -- the worked examples (skills/examples/NAME/{example.yaml, *.log}) ----------------------------------


def list_examples() -> Dict[str, str]:
    out = {}
    folder = examples_dir()
    if folder.is_dir():
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            out[sub.name] = str(_example_meta(sub).get("title", ""))
    return out


def _example_meta(folder: Path) -> dict:
    try:
        data = load_yaml((folder / "example.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_example(questions: Dict[str, Question], name: str) -> Tuple[Dict[str, Answer], List[str]]:
    """An example's answers (its unknowns left out) and its log files."""
    folder = examples_dir() / name
    path = folder / "example.yaml"
    if not path.is_file():
        names = ", ".join(list_examples()) or "none installed"
        raise BadInput(f"no bundled example {name!r}", f"valid: {names}")
    answers = answers_from_bytes(questions, path.read_bytes(), str(path))
    logs = sorted(str(p) for p in folder.glob("*.log"))
    return {k: a for k, a in answers.items() if a.value != UNKNOWN}, logs


def expected_cause(name: str) -> Optional[str]:
    return _example_meta(examples_dir() / name).get("expect", {}).get("cause")
