"""The house: one import package, layers as folders, no import cycles, one redactor, one writer.

The module graph is read from the source (every import, at module level or inside a function),
so a cycle or a layer crossing cannot hide behind a lazy import.
"""

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO

# Folder in the repository -> import package once installed.
ROOTS = {"assistant": "debug_stuck", "probes": "debug_stuck.probes"}

# Bottom to top: a module may import only from its own layer or the layers below it.
LAYERS = [
    (
        "foundation",
        re.compile(r"^debug_stuck(\.(contract|errors|bounded|inputs|redact|writer|interpreter|yamlio|hook))?$"),
    ),
    ("core", re.compile(r"^debug_stuck\.core(\.|$)")),
    ("kb", re.compile(r"^debug_stuck\.kb$")),
    ("probes", re.compile(r"^debug_stuck\.probes(\.|$)")),
    ("render", re.compile(r"^debug_stuck\.render(\.|$)")),
    ("recovery", re.compile(r"^debug_stuck\.recovery(\.|$)")),
    ("live", re.compile(r"^debug_stuck\.live(\.|$)")),
    ("advice", re.compile(r"^debug_stuck\.advice(\.|$)")),
    ("pipeline", re.compile(r"^debug_stuck\.pipeline(\.|$)")),
    ("actions", re.compile(r"^debug_stuck\.actions(\.|$)")),
    ("frontends", re.compile(r"^debug_stuck\.(frontends|zoo|__main__)(\.|$)")),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    parts[0] = ROOTS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files():
    for folder in ROOTS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(path: Path, name: str):
    """(imported module, line) for every import of a debug_stuck module (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    known = {module_name(p) for p in source_files()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = package_of(name, path).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in known else base), node.lineno


def graph():
    out = {}
    for path in source_files():
        name = module_name(path)
        deps = set()
        for target, _ in imports_of(path, name):
            if target.startswith("debug_stuck") and target != name:
                deps.add(target)
        out[name] = deps
    return out


def layer_of(name: str) -> int:
    for index, (_, pattern) in enumerate(LAYERS):
        if pattern.search(name):
            return index
    raise AssertionError(f"{name} belongs to no layer: add its folder to LAYERS")


def test_every_module_imports_the_package_by_its_installed_name():
    offenders = []
    for path in source_files():
        for target, line in imports_of(path, module_name(path)):
            if target.split(".")[0] in ("assistant", "probes"):
                offenders.append(f"{path.relative_to(REPO)}:{line}: import {target}")
    assert offenders == []


def test_no_import_cycles():
    edges = graph()
    names = set(edges)
    state: dict = {}
    cycles = []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(d for d in edges[node] if d in names):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(names):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_layers_only_import_downwards():
    crossings = []
    for name, deps in graph().items():
        if name.startswith("debug_stuck.zoo.") and name != "debug_stuck.zoo.spawn":
            continue  # the zoo's programs are jobs, not the tool
        for dep in deps:
            if layer_of(dep) > layer_of(name):
                crossings.append(f"{name} ({LAYERS[layer_of(name)][0]}) imports {dep} ({LAYERS[layer_of(dep)][0]})")
    assert crossings == []


def test_probes_are_collectors_or_targeted():
    folders = {
        p.relative_to(REPO / "probes").parts[0] for p in (REPO / "probes").rglob("*.py") if p.parent.name != "probes"
    }
    assert folders == {"collectors", "targeted"}


def test_no_module_is_a_house_of_several_jobs():
    """Big modules are where several jobs pile up: none of the tool's may pass 900 lines."""
    big = [
        f"{p.relative_to(REPO)} ({n} lines)"
        for p in source_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 900
    ]
    assert big == []


FORBIDDEN = {
    # one redactor: debug_stuck/redact.py
    "secret-name patterns": (re.compile(r"re\.compile\([^)]*(passw|api_?key|secret)", re.I), {"assistant/redact.py"}),
    # one writer: debug_stuck/writer.py
    "rename into place": (re.compile(r"\bos\.replace\("), {"assistant/writer.py"}),
    "tmp-PID names": (re.compile(r"\.tmp-\{?os\.getpid"), set()),
}


@pytest.mark.parametrize("what", list(FORBIDDEN))
def test_one_redactor_and_one_writer(what):
    pattern, allowed = FORBIDDEN[what]
    found = []
    for path in source_files():
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("assistant/zoo/") or rel in allowed:
            continue  # the zoo's programs imitate training jobs
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []


def test_nothing_points_outside_the_repository():
    """A user's clone has nothing beside it: no code, test, doc or data file may reach outside."""
    pattern = re.compile(r"\.\./shared|parent\s*/\s*[\"']shared[\"']")
    found = []
    for path in REPO.rglob("*"):
        if ".git" in path.parts or "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix not in (".py", ".md", ".toml", ".yaml", ".yml", ".json", ".cfg", ".txt") and path.name != "run":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if pattern.search(text):
            found.append(str(path.relative_to(REPO)))
    assert found == []


def test_one_entry_for_the_diagnosis():
    """Every front end and action reaches the pipeline through `debug_stuck.pipeline.diagnose`: no
    module outside the pipeline imports its stages, or the analysis and advice it composes."""
    inner = re.compile(r"^debug_stuck\.(pipeline\.(gather|judge)|live\.(assess|merge|observe))$")
    offenders = []
    for name, deps in graph().items():
        if name.startswith(("debug_stuck.pipeline", "debug_stuck.live")):
            continue
        offenders += [f"{name} imports {dep}" for dep in deps if inner.match(dep)]
    assert offenders == []


# What only the pipeline composes: the analysis of a live job, the classification, the verdict's
# sentence, the advice. (Renderers phrase the verdict; applying an edit re-derives it by its rule.)
COMPOSED = re.compile(
    r"^debug_stuck\.(live\.(assess|merge|observe|chain|culprit|progress)|core\.(classify|assemble|verdict|facts"
    r"|logs|calibration|contradictions)|advice(\.(?!edits$)\w+)?)$"
)


def test_front_ends_and_actions_get_the_analysis_only_from_the_pipeline():
    offenders = []
    for name, deps in graph().items():
        if not name.startswith(("debug_stuck.frontends", "debug_stuck.actions")):
            continue
        offenders += [f"{name} imports {dep}" for dep in deps if COMPOSED.match(dep)]
    for path in source_files():
        name = module_name(path)
        if name.startswith(("debug_stuck.frontends", "debug_stuck.actions")):
            text = path.read_text(encoding="utf-8")
            offenders += [f"{name} calls add_resume" for _ in re.finditer(r"\badd_resume\(", text)]
    assert offenders == []


def test_only_the_verdict_module_writes_the_verdict_s_sentence():
    """`verdict.summary` is set once, from its parts (core/verdict.py, called by the judge stage);
    no other module writes or edits it, and none tests what it starts with."""
    writes = re.compile(r"verdict\.summary\s*\+?=(?!=)|verdict\.summary\.(startswith|endswith|replace|split)\(")
    offenders = []
    for path in source_files():
        name = module_name(path)
        if name in ("debug_stuck.core.verdict", "debug_stuck.pipeline.judge"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (
                "verdict.summary" in line and writes.search(line) and "redact_text(" not in line
            ):  # redaction: every exit
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


def test_one_module_reads_the_knowledge_base():
    """Only debug_stuck.kb reads the skills folder; everything else asks it."""
    offenders = []
    for path in source_files():
        name = module_name(path)
        if name in ("debug_stuck.kb", "debug_stuck.core.tables"):
            continue  # core.tables checks the tables kb hands it, reading nothing
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if re.search(r"skills_dir\(\)\s*/|/ ?\"skills\"|_data/skills", line) and "import" not in line:
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


def test_core_is_pure():
    """core gets logs, stacks and probe results as data: it imports nothing that reads, writes or
    runs (no probes, no other layer, no os/subprocess/socket/psutil) and opens no file."""
    allowed = re.compile(r"^debug_stuck\.(core(\.|$)|contract$|errors$|redact$|yamlio$)|^debug_stuck$")
    io_modules = {"os", "subprocess", "socket", "psutil", "shutil", "tempfile", "io", "glob", "mmap", "fcntl"}
    offenders = []
    for path in source_files():
        name = module_name(path)
        if not name.startswith("debug_stuck.core"):
            continue
        for target, line in imports_of(path, name):
            top = target.split(".")[0]
            if target.startswith("debug_stuck") and not allowed.match(target):
                offenders.append(f"{path.relative_to(REPO)}:{line}: imports {target}")
            elif top in io_modules:
                offenders.append(f"{path.relative_to(REPO)}:{line}: imports {target}")
        text = path.read_text(encoding="utf-8")
        for number, source_line in enumerate(text.splitlines(), 1):
            if re.search(
                r"(?<![\w.])open\(|\.(read_text|read_bytes|write_text|write_bytes|open|exists|is_file|is_dir"
                r"|stat|glob|rglob|iterdir|resolve|mkdir|unlink)\(",
                source_line,
            ):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {source_line.strip()}")
    assert offenders == []


# What a front end may use: the entry (and how a request is built), the report model, the
# renderers, the session, the foundation; and, for the commands that are actions or tools of their
# own, the actions, the resume plan, the probe registry, the knowledge base and the zoo.
FRONTEND_MAY_IMPORT = re.compile(
    r"^debug_stuck(\.(pipeline|render|frontends|actions|zoo)(\.|$)"
    r"|\.core\.report$|\.kb$|\.recovery\.(plan|jobtree)$|\.probes\.targeted\.(registry|base)$"
    r"|\.(contract|errors|bounded|inputs|redact|writer|interpreter|yamlio|hook)$|$)"
)
# triage works on them; what a library's frames and settings say of the job is core.libfacts' one rule
SESSION_MAY_ALSO_IMPORT = re.compile(r"^debug_stuck\.core\.(answers|knowledge|tree|libfacts)$")


def test_front_ends_import_only_the_entry_the_model_the_renderers_and_the_session():
    offenders = []
    for name, deps in graph().items():
        if not name.startswith("debug_stuck.frontends"):
            continue
        session = name.startswith("debug_stuck.frontends.session")
        for dep in deps:
            if FRONTEND_MAY_IMPORT.match(dep) or (session and SESSION_MAY_ALSO_IMPORT.match(dep)):
                continue
            offenders.append(f"{name} imports {dep}")
    assert offenders == []


def test_tests_are_grouped_by_layer_and_no_test_module_imports_another():
    """tests/<layer>/test_*.py, named by behaviour; shared helpers live in helper modules
    (tests/*.py) or conftest, never in another test module."""
    tests = REPO / "tests"
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert loose == [], f"a test module outside a layer folder: {loose}"
    offenders = []
    for path in tests.rglob("test_*.py"):
        assert not re.search(r"issue\d", path.stem), f"{path}: named by issue, not by behaviour"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [
                f"{path.relative_to(REPO)} imports {n}" for n in names if n.split(".")[-1].startswith("test_")
            ]
    assert offenders == []
