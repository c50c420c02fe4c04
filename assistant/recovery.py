"""Get a hung job going again: find its newest usable checkpoint, build the resume command, stop it safely.

``plan_resume`` reads the command line (launcher, script, arguments), the script's source (as
text: never imported or run), the environment and the files the job wrote, and returns a
``ResumePlan``: the framework, the newest checkpoint that passes the format checks of
``probes.checkpoints``, the broken ones it skipped (named, with why), the exact command that
resumes, and what is lost. ``stop_job`` writes the diagnosis report first (evidence before
teardown), then ends the job's process tree by PID: SIGINT, SIGTERM, SIGKILL, with waits between.

Resume conventions (``hang-catalog.md``): Ultralytics ``yolo train resume model=.../last.pt``;
HF Trainer ``resume_from_checkpoint``; Lightning ``ckpt_path``; accelerate
``accelerator.load_state(dir)``; kohya ``--resume <state dir>``; nanochat ``--resume-from-step N``;
plain torchrun scripts load their own checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import psutil

from assistant.errors import BadInput, NotInspectable
from probes import checkpoints as ck
from probes.bounded import CallTimedOut, call_with_timeout

FRAMEWORKS = ("ultralytics", "hf-trainer", "lightning", "accelerate", "kohya", "nanochat", "pytorch")
LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "python")

SOURCE_MAX_BYTES = 2 * 1024 * 1024
READ_SECONDS = 5.0
SCAN_SECONDS = 10.0
SCAN_MAX_ENTRIES = 20_000
SCAN_MAX_DEPTH = 4  # cwd/lightning_logs/version_0/checkpoints/x.ckpt
MAX_CANDIDATES = 50  # checked per plan, newest first: a results folder may hold thousands of .pt files
SKIPPED_SHOWN = 20

NO_CHECKPOINT = "no usable checkpoint: training restarts from step 0"


# -- the model -------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    path: str
    kind: str  # torch-zip|safetensors|hf-dir|accelerate-dir|lightning|kohya-state|ultralytics|nanochat
    step: Optional[int]
    mtime: float
    valid: bool
    problem: Optional[str]  # why it is not usable, e.g. "truncated: zip central directory missing"
    epoch: Optional[int] = None

    def label(self) -> str:
        where = []
        if self.step is not None:
            where.append(f"step {self.step}")
        if self.epoch is not None:
            where.append(f"epoch {self.epoch}")
        return f"{self.path} ({', '.join(where)})" if where else self.path

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "kind": self.kind,
            "step": self.step,
            "epoch": self.epoch,
            "mtime": self.mtime,
            "valid": self.valid,
            "problem": self.problem,
        }


@dataclass
class ResumePlan:
    framework: str
    launcher: str  # torchrun|accelerate|deepspeed|python
    checkpoint: Optional[Checkpoint]
    skipped: List[Checkpoint]  # invalid ones, newest first, each with its problem
    command: Optional[str]
    notes: List[str]
    lost: Optional[str]  # "no usable checkpoint: training restarts from step 0", or "steps after N"
    argv: Optional[List[str]] = None  # the command as a list, to run in cwd with env added
    cwd: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)  # variables the command needs (already in `command`)

    def summary(self) -> str:
        """What to run, in a few lines (front ends that show one block of text)."""
        lines = [f"{self.framework} (launcher: {self.launcher})"]
        lines.append(f"checkpoint: {self.checkpoint.label() if self.checkpoint else 'none usable'}")
        lines += [f"skipped: {c.path}: {c.problem}" for c in self.skipped]
        if self.lost:
            lines.append(f"lost: {self.lost}")
        lines += [f"note: {n}" for n in self.notes]
        if self.command:
            lines.append(f"cd {shlex.quote(self.cwd)} && {self.command}" if self.cwd else self.command)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The report's ``resume`` object."""
        return {
            "framework": self.framework,
            "checkpoint": self.checkpoint.path if self.checkpoint else None,
            "command": self.command,
            "launcher": self.launcher,
            "step": self.checkpoint.step if self.checkpoint else None,
            "epoch": self.checkpoint.epoch if self.checkpoint else None,
            "cwd": self.cwd,
            "skipped": [{"path": c.path, "kind": c.kind, "step": c.step, "problem": c.problem} for c in self.skipped],
            "notes": list(self.notes),
            "lost": self.lost,
        }


# -- the command line ------------------------------------------------------------------------------

PYTHON = re.compile(r"^python[\d.]*$")
CONSOLE_LAUNCHERS = {"torchrun": "torchrun", "accelerate": "accelerate", "deepspeed": "deepspeed"}
MODULE_LAUNCHERS = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate.commands.launch": "accelerate",
    "accelerate.commands.accelerate_cli": "accelerate",
    "deepspeed.launcher.runner": "deepspeed",
    "deepspeed.launcher.launch": "deepspeed",
}
LAUNCHER_FLAGS = {
    "torchrun": {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "--use-env", "--use_env"},
    "accelerate": {
        "--cpu",
        "--multi_gpu",
        "--tpu",
        "--use_deepspeed",
        "--use_fsdp",
        "--use_megatron_lm",
        "--use_xpu",
        "--no_python",
        "--debug",
        "-q",
        "--quiet",
        "--same_network",
        "--enable_cpu_affinity",
        "--downcast_bf16",
        "--dynamo_use_fullgraph",
        "--dynamo_use_dynamic",
    },
    "deepspeed": {"--no_local_rank", "--no_python", "--force_multi", "--bind_cores_to_rank", "--no_ssh_check"},
}
PYTHON_VALUE_OPTS = {"-X", "-W", "-Q"}

KOHYA_SCRIPT = re.compile(
    r"^(train_network|sdxl_train\w*|flux_train\w*|sd3_train\w*|lumina_train\w*|train_db|fine_tune|"
    r"train_textual_inversion\w*|train_control\w*|sdxl_train_control\w*|hunyuan\w*train\w*)\.py$"
)
NANOCHAT_CHECKPOINT_DIRS = {
    "base_train": "base_checkpoints",
    "mid_train": "mid_checkpoints",
    "chat_sft": "chatsft_checkpoints",
    "chat_rl": "chatrl_checkpoints",
}
# option names whose directory values are where a job writes (a --data_dir is not walked)
NOT_OUTPUT_OPTION = re.compile(r"data|cache|pretrained|model_name|tokenizer|vocab|config|dataset|model$|weights$", re.I)


@dataclass
class Launch:
    """A training command line taken apart."""

    argv: List[str]
    launcher: str = "python"
    launcher_index: int = 0  # where the launcher (or python) sits in argv
    program_index: Optional[int] = None  # index of the script or module name
    script: Optional[str] = None
    module: Optional[str] = None
    console: Optional[str] = None  # "yolo" for the Ultralytics CLI
    nproc: Optional[int] = None

    @property
    def program_args(self) -> List[str]:
        if self.console:
            return self.argv[self.launcher_index + 1 :]
        if self.program_index is None:
            return []
        return self.argv[self.program_index + 1 :]

    @property
    def script_name(self) -> Optional[str]:
        if self.script:
            return os.path.basename(self.script)
        if self.module:
            return self.module.rsplit(".", 1)[-1] + ".py"
        return None


def parse_launch(cmdline: List[str]) -> Launch:
    """Find the launcher, the script (or module) and its arguments in a command line."""
    argv = [str(a) for a in cmdline]
    launch = Launch(argv=argv)
    for i, token in enumerate(argv):
        base = os.path.basename(token)
        if base in ("yolo", "ultralytics"):
            launch.console, launch.launcher_index = "yolo", i
            return launch
        if base in CONSOLE_LAUNCHERS:
            launch.launcher, launch.launcher_index = CONSOLE_LAUNCHERS[base], i
            _parse_launcher_args(launch, i + 1)
            return launch
        if PYTHON.match(base):
            launch.launcher_index = i
            _parse_python_args(launch, i + 1)
            return launch
    # no interpreter named (an executable script): the first token is the program
    if argv:
        launch.script, launch.program_index = argv[0], 0
    return launch


def _parse_python_args(launch: Launch, start: int) -> None:
    argv = launch.argv
    i = start
    while i < len(argv):
        token = argv[i]
        if token == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module in MODULE_LAUNCHERS:
                launch.launcher = MODULE_LAUNCHERS[module]
                nxt = i + 2
                if launch.launcher == "accelerate" and nxt < len(argv) and argv[nxt] == "launch":
                    nxt += 1
                _parse_launcher_args(launch, nxt)
                return
            if module == "accelerate" and i + 2 < len(argv) and argv[i + 2] == "launch":
                launch.launcher = "accelerate"
                _parse_launcher_args(launch, i + 3)
                return
            launch.module, launch.program_index = module, i + 1
            return
        if token == "-c":
            return
        if token in PYTHON_VALUE_OPTS:
            i += 2
            continue
        if token.startswith("-"):
            i += 1
            continue
        base = os.path.basename(token)
        if base in ("yolo", "ultralytics"):
            launch.console, launch.launcher_index = "yolo", i
            return
        if base in CONSOLE_LAUNCHERS:  # python /usr/bin/torchrun ... (how /proc shows console scripts)
            launch.launcher = CONSOLE_LAUNCHERS[base]
            _parse_launcher_args(launch, i + 1)
            return
        launch.script, launch.program_index = token, i
        return


def _parse_launcher_args(launch: Launch, start: int) -> None:
    argv = launch.argv
    i = start
    if launch.launcher == "accelerate" and i < len(argv) and argv[i] == "launch":
        i += 1
    flags = LAUNCHER_FLAGS.get(launch.launcher, set())
    module_mode = False
    while i < len(argv):
        token = argv[i]
        if token in ("-m", "--module"):
            module_mode = True
            i += 1
            continue
        if token.startswith("-"):
            name, has_value, value = token.partition("=")
            if name in ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num_gpus"):
                raw = value if has_value else (argv[i + 1] if i + 1 < len(argv) else "")
                launch.nproc = int(raw) if raw.isdigit() else launch.nproc
            if has_value or token in flags:
                i += 1
            elif i + 1 < len(argv) and argv[i + 1].endswith(".py"):
                i += 1  # an unknown flag followed by the script: the flag takes no value
            else:
                i += 2
            continue
        if module_mode or (not token.endswith(".py") and re.match(r"^[A-Za-z_][\w.]*$", token) and "." in token):
            launch.module = token
        else:
            launch.script = token
        launch.program_index = i
        return


def option_value(args: List[str], *names: str) -> Optional[str]:
    """The value of --name (``--name v``, ``--name=v``, or ``name=v`` for yolo-style), last one wins."""
    found = None
    variants = set()
    for name in names:
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    for i, token in enumerate(args):
        key, eq, value = token.partition("=")
        bare = key.lstrip("-")
        if bare not in variants:
            continue
        if eq:
            found = value
        elif key.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            found = args[i + 1]
    return found


def has_option(args: List[str], *names: str) -> bool:
    variants = set()
    for name in names:
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    return any(t.startswith("-") and t.lstrip("-").partition("=")[0] in variants for t in args)


def set_option(argv: List[str], flag: str, value: Optional[str], aliases: Iterable[str] = ()) -> List[str]:
    """argv without any earlier occurrence of flag (or an alias), with ``flag [value]`` appended."""
    variants = set()
    for name in (flag, *aliases):
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    out: List[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        key, eq, _ = token.partition("=")
        if token.startswith("-") and key.lstrip("-") in variants:
            if not eq and value is not None and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1  # its old value goes too
            i += 1
            continue
        out.append(token)
        i += 1
    out.append(flag)
    if value is not None:
        out.append(value)
    return out


# -- reading, bounded ------------------------------------------------------------------------------


def _bounded(fn, what: str, default=None, seconds: float = READ_SECONDS):
    try:
        return call_with_timeout(fn, seconds, what)
    except (CallTimedOut, OSError, psutil.Error, ValueError):
        return default


def read_source(path: Optional[str]) -> str:
    """A script's text (never imported or run), bounded in size and time; "" when unreadable."""
    if not path:
        return ""

    def read():
        if not os.path.isfile(path):
            return ""
        with open(path, "rb") as fh:
            return fh.read(SOURCE_MAX_BYTES).decode("utf-8", "replace")

    return _bounded(read, f"reading {path}", "") or ""


def script_path(launch: Launch, cwd: str, env: Dict[str, str]) -> Optional[str]:
    if launch.script:
        return launch.script if os.path.isabs(launch.script) else os.path.join(cwd, launch.script)
    if launch.module:
        rel = launch.module.replace(".", os.sep)
        roots = [cwd] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        for root in roots:
            root = root if os.path.isabs(root) else os.path.join(cwd, root)
            for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__main__.py")):
                if _bounded(lambda c=candidate: os.path.isfile(c), f"stat {candidate}", False):
                    return candidate
    return None


@dataclass
class ArgFlag:
    flag: str  # as the script declares it, e.g. --resume_from_checkpoint
    store_true: bool = False
    int_value: bool = False


RESUME_FLAG = re.compile(
    r"^--(resume[\w-]*|restore[\w-]*|ckpt[_-]?path|load[_-]?(checkpoint|ckpt)[\w-]*|from[_-]checkpoint)$"
)


def declared_flags(source: str) -> List[ArgFlag]:
    """Options a script declares with argparse's add_argument, read from its text."""
    out: List[ArgFlag] = []
    for m in re.finditer(r"add_argument\(", source):
        call = _call_text(source, m.end())
        names = re.match(r"""\s*((?:[rbuRBU]?['"]-{1,2}[\w-]+['"]\s*,\s*)*[rbuRBU]?['"]-{1,2}[\w-]+['"])""", call)
        if not names:
            continue
        opts = re.findall(r"""['"](-{1,2}[\w-]+)['"]""", names.group(1))
        long_opts = [o for o in opts if o.startswith("--")] or opts
        store_true = bool(re.search(r"action\s*=\s*['\"]store_(true|false)['\"]|BooleanOptionalAction", call))
        int_value = bool(re.search(r"type\s*=\s*int\b", call))
        for opt in long_opts:
            out.append(ArgFlag(opt, store_true, int_value))
    return out


def _call_text(source: str, start: int, limit: int = 800) -> str:
    depth = 1
    quote = None
    end = min(len(source), start + limit)
    for i in range(start, end):
        ch = source[i]
        if quote:
            if ch == quote and source[i - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return source[start:i]
    return source[start:end]


def resume_flag(source: str) -> Optional[ArgFlag]:
    """The script's own resume option, if its argparse declares one (--resume first)."""
    flags = [f for f in declared_flags(source) if RESUME_FLAG.match(f.flag)]
    flags.sort(key=lambda f: (not f.flag.startswith("--resume"), len(f.flag)))
    return flags[0] if flags else None


def _imports(source: str, *modules: str) -> bool:
    pattern = "|".join(re.escape(m) for m in modules)
    return bool(re.search(rf"^\s*(import|from)\s+({pattern})\b", source, re.M))


# -- walking the job's folders, bounded ------------------------------------------------------------

SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    "node_modules",
    "site-packages",
    "dist-packages",
    "venv",
    ".venv",
    "wandb",
    ".ipynb_checkpoints",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
}
SKIP_ROOTS = ("/proc", "/sys", "/dev", "/run")


@dataclass
class Entry:
    path: str
    is_dir: bool
    mtime: float
    names: List[str] = field(default_factory=list)  # a directory's entries


@dataclass
class Scan:
    entries: List[Entry] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def dirs(self) -> List[Entry]:
        return [e for e in self.entries if e.is_dir]

    def files(self) -> List[Entry]:
        return [e for e in self.entries if not e.is_dir]


def walk(roots: Iterable[str], max_depth: int = SCAN_MAX_DEPTH, seconds: float = SCAN_SECONDS) -> Scan:
    """Files and directories under roots (depth- and count-limited, never following links), bounded
    in time: a walk on a hung mount returns what it found so far, with a note saying so."""
    scan = Scan()
    seen: set = set()
    stop = threading.Event()
    found: List[Entry] = []

    def visit(path: str, depth: int) -> None:
        if stop.is_set() or len(found) >= SCAN_MAX_ENTRIES:
            return
        try:
            with os.scandir(path) as it:
                children = list(it)
        except OSError:
            return
        names = sorted(c.name for c in children)
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = 0.0
        found.append(Entry(path, True, mtime, names))
        if "pyvenv.cfg" in names:
            return
        for child in sorted(children, key=lambda c: c.name):
            if stop.is_set() or len(found) >= SCAN_MAX_ENTRIES:
                return
            try:
                if child.is_dir(follow_symlinks=False):
                    if child.name in SKIP_DIRS or (child.name.startswith(".") and child.name != ".cache"):
                        continue
                    if depth < max_depth:
                        visit(child.path, depth + 1)
                    else:
                        found.append(Entry(child.path, True, child.stat(follow_symlinks=False).st_mtime))
                elif child.is_file():
                    found.append(Entry(child.path, False, child.stat().st_mtime))
                elif not child.is_symlink():
                    found.append(Entry(child.path, False, child.stat(follow_symlinks=False).st_mtime))
            except OSError:
                continue

    def run() -> None:
        for root in roots:
            real = os.path.realpath(root)
            if real in seen or real.startswith(SKIP_ROOTS) or real == "/":
                continue
            seen.add(real)
            visit(root, 0)

    try:
        call_with_timeout(run, seconds, "walking the job's folders")
    except CallTimedOut:
        stop.set()
        scan.notes.append(
            f"walking {', '.join(roots)} did not finish within {seconds:g} s (a hung mount?): "
            "only what was found by then was considered"
        )
    if len(found) >= SCAN_MAX_ENTRIES:
        scan.notes.append(f"looked at the first {SCAN_MAX_ENTRIES} files and folders only")
    scan.entries = list(found)
    return scan


# -- the context one plan is made in ---------------------------------------------------------------


class _Job:
    """Everything read about one job once: command line, script source, folders."""

    def __init__(self, cmdline: List[str], cwd: str, env: Dict[str, str]):
        self.cmdline = [str(a) for a in cmdline]
        self.cwd = os.path.abspath(cwd)
        self.env = env
        self.launch = parse_launch(self.cmdline)
        self.args = self.launch.program_args
        self.script_file = script_path(self.launch, self.cwd, env)
        self.source = read_source(self.script_file)
        self.config = _config_values(self.args, self.cwd)
        self._scan: Optional[Scan] = None
        self.notes: List[str] = []

    def opt(self, *names: str) -> Optional[str]:
        value = option_value(self.args, *names)
        if value is None:
            for name in names:
                bare = name.lstrip("-")
                for key in (bare, bare.replace("-", "_")):
                    if key in self.config and not isinstance(self.config[key], (dict, list)):
                        return str(self.config[key])
        return value

    def flag(self, *names: str) -> bool:
        if has_option(self.args, *names):
            return True
        for name in names:
            key = name.lstrip("-").replace("-", "_")
            if self.config.get(key) is True:
                return True
        return False

    def path(self, value: str) -> str:
        value = os.path.expanduser(value)
        return value if os.path.isabs(value) else os.path.normpath(os.path.join(self.cwd, value))

    def output_dirs(self) -> List[str]:
        """Existing directories named by the job's options (where it writes), then its cwd."""
        out: List[str] = []
        args = self.args
        pairs: List[Tuple[str, str]] = []
        for i, token in enumerate(args):
            key, eq, value = token.partition("=")
            if eq:
                pairs.append((key.lstrip("-"), value))
            elif token.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
                pairs.append((token.lstrip("-"), args[i + 1]))
        pairs += [(k, str(v)) for k, v in self.config.items() if isinstance(v, str)]
        for key, value in pairs:
            if not value or NOT_OUTPUT_OPTION.search(key):
                continue
            full = self.path(value)
            if _bounded(lambda f=full: os.path.isdir(f), f"stat {full}", False):
                out.append(full)
            elif re.search(r"\.(pt|pth|ckpt|safetensors)$", value) and re.search(r"save|out|ckpt|checkpoint", key):
                parent = os.path.dirname(full)
                if _bounded(lambda p=parent: os.path.isdir(p), f"stat {parent}", False):
                    out.append(parent)
        out.append(self.cwd)
        return list(dict.fromkeys(out))

    def scan(self) -> Scan:
        if self._scan is None:
            self._scan = walk(self.output_dirs())
            self.notes.extend(self._scan.notes)
        return self._scan


def _config_values(args: List[str], cwd: str) -> Dict[str, object]:
    """Options from a config file the command names (kohya --config_file x.toml, HF `train.py args.json`)."""
    path = option_value(args, "--config_file", "--config-file")
    if path is None:
        positional = [a for a in args if not a.startswith("-") and re.search(r"\.(json|ya?ml|toml)$", a)]
        if len(positional) == 1 and (len(args) == 1 or args[0] == positional[0]):
            path = positional[0]
    if not path:
        return {}
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    text = read_source(full)
    if not text:
        return {}
    try:
        if full.endswith(".json"):
            data = json.loads(text)
        elif full.endswith(".toml"):
            data = _toml(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception:
        return {}
    if not isinstance(data, dict):
        return {}
    flat: Dict[str, object] = {}
    for key, value in data.items():  # kohya's toml groups options in tables: flatten one level
        if isinstance(value, dict):
            flat.update({k: v for k, v in value.items() if not isinstance(v, dict)})
        else:
            flat[key] = value
    return flat


def _toml(text: str) -> dict:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons: key = value lines are enough here
        out: Dict[str, object] = {}
        for m in re.finditer(r"^\s*([\w-]+)\s*=\s*(.+?)\s*$", text, re.M):
            raw = m.group(2)
            if raw in ("true", "false"):
                out[m.group(1)] = raw == "true"
            elif raw[:1] in "'\"":
                out[m.group(1)] = raw.strip("'\"")
            elif raw.isdigit():
                out[m.group(1)] = int(raw)
        return out
    return tomllib.loads(text)


# -- which framework -------------------------------------------------------------------------------


def detect_framework(cmdline: List[str], env: Dict[str, str], cwd: str) -> Tuple[str, str]:
    """(framework, launcher) from the command line, the script's source, the environment and files."""
    job = _Job(cmdline, cwd, env)
    return _framework(job), job.launch.launcher


def _framework(job: _Job) -> str:
    launch, source = job.launch, job.source
    if launch.console == "yolo":
        return "ultralytics"
    module = launch.module or ""
    if (
        _imports(source, "nanochat")
        or (module.startswith("scripts.") and os.path.isdir(os.path.join(job.cwd, "nanochat")))
        or (module.startswith("scripts.") and module.rsplit(".", 1)[-1] in NANOCHAT_CHECKPOINT_DIRS)
    ):
        return "nanochat"
    name = launch.script_name or ""
    kohya_import = re.search(r"^\s*(from\s+library\b|import\s+library\.)", source, re.M)
    # a script name alone (fine_tune.py, train_network.py) decides only when the source cannot be read
    if kohya_import or (not source and KOHYA_SCRIPT.match(name)):
        return "kohya"
    if _imports(source, "ultralytics"):
        return "ultralytics"
    if _imports(source, "lightning", "pytorch_lightning", "lightning.pytorch"):
        return "lightning"
    if _hf_trainer_source(source):
        return "hf-trainer"
    if _imports(source, "accelerate") and re.search(r"\.(save|load)_state\(", source):
        return "accelerate"
    return _framework_from_files(job)


def _hf_trainer_source(source: str) -> bool:
    if _imports(source, "trl"):
        return True
    if not _imports(source, "transformers"):
        return False
    return bool(re.search(r"\b(\w*Trainer|TrainingArguments|Seq2SeqTrainingArguments)\b", source))


HF_DIR = re.compile(r"^(tmp-)?checkpoint-(\d+)$")


def _framework_from_files(job: _Job) -> str:
    # shallow: the job's own output folders and their checkpoint folders, not whatever lies deeper
    # below a working directory such as /tmp or $HOME
    scan = walk(job.output_dirs(), max_depth=2)
    for entry in scan.dirs():
        name = os.path.basename(entry.path)
        if HF_DIR.match(name) and "trainer_state.json" in entry.names:
            return "hf-trainer"
    for entry in scan.dirs():
        name = os.path.basename(entry.path)
        if entry.path.endswith(os.sep + "weights") and "last.pt" in entry.names:
            return "ultralytics"
        if name.endswith("-state") and ck.is_accelerate_state(entry.names):
            return "kohya"
        if ck.is_accelerate_state(entry.names):
            return "accelerate"
    if any(os.path.basename(e.path) == "lightning_logs" for e in scan.dirs()):
        return "lightning"
    return "pytorch"


# -- finding checkpoints ---------------------------------------------------------------------------


def find_checkpoints(
    framework: str, cmdline: List[str], cwd: str, env: Optional[Dict[str, str]] = None
) -> List[Checkpoint]:
    """The framework's checkpoints for this job, newest first, each checked (``valid``, ``problem``)."""
    job = _Job(cmdline, cwd, dict(os.environ) if env is None else env)
    return _find(job, framework)


def _find(job: _Job, framework: str) -> List[Checkpoint]:
    finder = {
        "ultralytics": _find_ultralytics,
        "hf-trainer": _find_hf,
        "lightning": _find_lightning,
        "accelerate": _find_accelerate,
        "kohya": _find_kohya,
        "nanochat": _find_nanochat,
    }.get(framework, _find_generic)
    return _newest_first(finder(job))


def _newest_first(found: List[Checkpoint]) -> List[Checkpoint]:
    unique = {c.path: c for c in found}
    return sorted(unique.values(), key=lambda c: (c.mtime, c.step if c.step is not None else -1), reverse=True)


def _mtime(path: str) -> float:
    return _bounded(lambda: os.stat(path).st_mtime, f"stat {path}", 0.0) or 0.0


def _checked(path: str, kind: str, check: Callable[[], ck.FileCheck], step=None, epoch=None) -> Checkpoint:
    mtime = _mtime(path)
    if ck.is_partial_name(path):
        problem = "temporary name: an unfinished save (a finished save is renamed into place)"
        return Checkpoint(path, kind, step, mtime, False, problem, epoch)
    result = check()
    values = result.values
    step = values.get("global_step", step) if values.get("global_step") is not None else step
    for key in ("step", "iter_num", "iteration"):
        if step is None and isinstance(values.get(key), int):
            step = values[key]
    if epoch is None and isinstance(values.get("epoch"), int) and values["epoch"] >= 0:
        epoch = values["epoch"]
    return Checkpoint(path, kind, step, mtime, result.ok, result.problem, epoch)


def _limit(paths: List[Tuple[str, float]]) -> List[str]:
    """The newest MAX_CANDIDATES paths."""
    return [p for p, _ in sorted(paths, key=lambda x: x[1], reverse=True)[:MAX_CANDIDATES]]


def _step_from_name(name: str) -> Tuple[Optional[int], Optional[int]]:
    step = re.search(r"(?:^|[^a-z])(?:global_step|step|iter|it)[=_-]?(\d+)", name, re.I)
    epoch = re.search(r"(?:^|[^a-z])epoch[=_-]?(\d+)", name, re.I)
    return (int(step.group(1)) if step else None, int(epoch.group(1)) if epoch else None)


CHECKPOINT_FILE = re.compile(r"\.(pt|pth|ckpt|safetensors)([._-][\w.-]*)?$")
PEEK_KEYS = ("global_step", "step", "iter_num", "iteration", "epoch")


def _find_generic(job: _Job) -> List[Checkpoint]:
    files = [(e.path, e.mtime) for e in job.scan().files() if CHECKPOINT_FILE.search(os.path.basename(e.path))]
    out = []
    for path in _limit(files):
        kind = "safetensors" if ".safetensors" in os.path.basename(path) else "torch-zip"
        step, epoch = _step_from_name(os.path.basename(path))
        out.append(_checked(path, kind, lambda p=path: ck.check_file(p, PEEK_KEYS), step, epoch))
    return out


def _find_hf(job: _Job) -> List[Checkpoint]:
    output_dir = job.opt("--output_dir")
    if output_dir:
        scan = walk([job.path(output_dir)], max_depth=1)
        job.notes.extend(scan.notes)
    else:
        scan = job.scan()
    dirs = [(e.path, e.mtime) for e in scan.dirs() if HF_DIR.match(os.path.basename(e.path))]
    out = []
    for path in _limit(dirs):
        step = int(HF_DIR.match(os.path.basename(path)).group(2))
        out.append(_checked(path, "hf-dir", lambda p=path: ck.check_hf_checkpoint(p), step))
    return out


def _find_lightning(job: _Job) -> List[Checkpoint]:
    roots = job.output_dirs()
    for m in re.finditer(r"dirpath\s*=\s*[rf]?['\"]([^'\"{}]+)['\"]", job.source):
        full = job.path(m.group(1))
        if os.path.isdir(full):
            roots.insert(0, full)
    default_root = job.opt("--trainer.default_root_dir", "--default_root_dir")
    if default_root:
        roots.insert(0, job.path(default_root))
    scan = walk(list(dict.fromkeys(roots)))
    job.notes.extend(scan.notes)
    files = [(e.path, e.mtime) for e in scan.files() if re.search(r"\.ckpt([._-][\w.-]*)?$", e.path)]
    out = []
    for path in _limit(files):
        step, epoch = _step_from_name(os.path.basename(path))
        out.append(_checked(path, "lightning", lambda p=path: ck.check_file(p, ("global_step", "epoch")), step, epoch))
    return out


def _find_accelerate(job: _Job) -> List[Checkpoint]:
    dirs = [(e.path, e.mtime) for e in job.scan().dirs() if ck.is_accelerate_state(e.names)]
    out = []
    for path in _limit(dirs):
        name = os.path.basename(path)
        step, epoch = _step_from_name(name)
        out.append(_checked(path, "accelerate-dir", lambda p=path: ck.check_state_dir(p), step, epoch))
    return out


KOHYA_STEP = re.compile(r"-step(\d+)-state$")
KOHYA_EPOCH = re.compile(r"-(\d{6})-state$")


def _kohya_output(job: _Job) -> Tuple[Optional[str], Optional[str]]:
    output_dir = job.opt("--output_dir")
    return (job.path(output_dir) if output_dir else None), job.opt("--output_name")


def _find_kohya(job: _Job) -> List[Checkpoint]:
    output_dir, output_name = _kohya_output(job)
    if output_dir:
        scan = walk([output_dir], max_depth=1)
        job.notes.extend(scan.notes)
    else:
        scan = job.scan()
    dirs = [e for e in scan.dirs() if e.path.rstrip("/").endswith("-state")]
    if output_name:
        mine = [e for e in dirs if os.path.basename(e.path).startswith(f"{output_name}-")]
        dirs = mine or dirs
    out = []
    for path in _limit([(e.path, e.mtime) for e in dirs]):
        name = os.path.basename(path)
        step = KOHYA_STEP.search(name)
        epoch = KOHYA_EPOCH.search(name)
        out.append(
            _checked(
                path,
                "kohya-state",
                lambda p=path: ck.check_state_dir(p),
                int(step.group(1)) if step else None,
                int(epoch.group(1)) if epoch else None,
            )
        )
    return out


def _ultralytics_runs(job: _Job) -> List[str]:
    project = job.opt("project")
    if project:
        return [job.path(project)]
    roots = [os.path.join(job.cwd, "runs")]
    config_dir = job.env.get("YOLO_CONFIG_DIR") or os.path.join(_home(job.env), ".config", "Ultralytics")
    for name in ("settings.json", "settings.yaml"):
        text = read_source(os.path.join(config_dir, name))
        m = re.search(r"""["']?runs_dir["']?\s*:\s*["']?([^"',\n}]+)""", text)
        if m:
            roots.append(m.group(1).strip())
    return [r for r in dict.fromkeys(roots) if _bounded(lambda r=r: os.path.isdir(r), f"stat {r}", False)]


def _find_ultralytics(job: _Job) -> List[Checkpoint]:
    roots = _ultralytics_runs(job)
    scan = walk(roots, max_depth=3)
    job.notes.extend(scan.notes)
    name = job.opt("name")
    files = []
    for entry in scan.files():
        base = os.path.basename(entry.path)
        parent = os.path.dirname(entry.path)
        if os.path.basename(parent) != "weights" or not re.match(r"^last\.pt([._-][\w.-]*)?$", base):
            continue
        if name and not os.path.basename(os.path.dirname(parent)).startswith(name):
            continue
        files.append((entry.path, entry.mtime))
    out = []
    for path in _limit(files):
        out.append(_checked(path, "ultralytics", lambda p=path: ck.check_file(p, ("epoch", "optimizer"))))
    return out


def _home(env: Dict[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def nanochat_base_dir(env: Dict[str, str]) -> str:
    return env.get("NANOCHAT_BASE_DIR") or os.path.join(_home(env), ".cache", "nanochat")


def _nanochat_dir(job: _Job) -> Tuple[str, List[str]]:
    """(the checkpoints folder of this script, the model-tag folders to look in)."""
    script = (job.launch.module or job.launch.script_name or "base_train").rsplit(".", 1)[-1]
    script = script[:-3] if script.endswith(".py") else script
    sub = NANOCHAT_CHECKPOINT_DIRS.get(script, "base_checkpoints")
    root = os.path.join(nanochat_base_dir(job.env), sub)
    tag = job.opt("--model-tag", "--model_tag")
    depth = job.opt("--depth")
    if not tag and depth and depth.isdigit():
        tag = f"d{depth}"
    names = _bounded(lambda: sorted(os.listdir(root)), f"listing {root}", []) or []
    if tag and tag in names:
        return root, [os.path.join(root, tag)]
    if not tag and "d20" in names and not depth:
        pass  # nanochat's default depth is 20, but a speedrun sets its own: look at every tag
    return root, [os.path.join(root, n) for n in names if re.match(r"^d\d+", n) or n == tag]


def _find_nanochat(job: _Job) -> List[Checkpoint]:
    _, dirs = _nanochat_dir(job)
    out = []
    for d in dirs:
        names = _bounded(lambda d=d: sorted(os.listdir(d)), f"listing {d}", []) or []
        models = [(os.path.join(d, n), _mtime(os.path.join(d, n))) for n in names if re.match(r"^model_\d+\.pt", n)]
        for path in _limit(models):
            m = re.match(r"^model_(\d+)\.pt$", os.path.basename(path))
            step = int(m.group(1)) if m else None
            out.append(_checked(path, "nanochat", lambda p=path, s=step, n=names: _check_nanochat(job, p, s, n), step))
    return out


def _check_nanochat(job: _Job, model: str, step: Optional[int], names: List[str]) -> ck.FileCheck:
    result = ck.check_file(model)
    if not result.ok or step is None:
        return result
    folder = os.path.dirname(model)
    meta = f"meta_{step:06d}.json"
    if meta not in names:
        result.problem = f"{meta} is missing (the save did not finish)"
        return result
    _, problem = ck.check_json(os.path.join(folder, meta))
    if problem:
        result.problem = f"{meta}: {problem}"
        return result
    shards = [n for n in names if n.startswith(f"optim_{step:06d}_rank") and n.endswith(".pt")]
    if not shards:
        result.problem = f"no optimizer state (optim_{step:06d}_rank*.pt): the resume needs it"
        return result
    expected = job.launch.nproc
    if expected and len(shards) < expected:
        result.problem = f"optimizer shards missing: {len(shards)} of {expected} (optim_{step:06d}_rank*.pt)"
        return result
    for shard in shards:
        problem = ck.check_file(os.path.join(folder, shard)).problem
        if problem:
            result.problem = f"{shard}: {problem}"
            return result
    return result


# -- the plan --------------------------------------------------------------------------------------


def plan_resume(cmdline: List[str], cwd: str, env: Optional[Dict[str, str]] = None) -> ResumePlan:
    """How to resume this job: framework, newest valid checkpoint, the command, what is lost."""
    if not cmdline:
        raise BadInput("no command to resume", 'give the training command, e.g. --cmd "torchrun ... train.py"')
    job = _Job(cmdline, cwd, dict(os.environ) if env is None else env)
    framework = _framework(job)
    found = _find(job, framework)
    chosen = next((c for c in found if c.valid), None)
    skipped = [c for c in found if not c.valid and (chosen is None or c.mtime >= chosen.mtime)][:SKIPPED_SHOWN]
    plan = ResumePlan(
        framework=framework,
        launcher=job.launch.launcher,
        checkpoint=chosen,
        skipped=skipped,
        command=None,
        notes=[],
        lost=_lost(chosen, skipped),
        cwd=job.cwd,
    )
    builder = {
        "ultralytics": _resume_ultralytics,
        "hf-trainer": _resume_hf,
        "lightning": _resume_lightning,
        "accelerate": _resume_accelerate,
        "kohya": _resume_kohya,
        "nanochat": _resume_nanochat,
    }.get(framework, _resume_generic)
    argv = builder(job, plan)
    plan.argv = argv  # exact, for a program that relaunches the job
    shown = redact_argv(argv)
    plan.command = _command_text(shown, plan.env)  # for people and reports: secrets replaced
    if shown != argv:
        plan.notes.append(f"a secret in the command line was replaced by {REDACTED_ARG}: put it back before running")
    plan.notes.extend(n for n in job.notes if n not in plan.notes)
    return plan


REDACTED_ARG = "<redacted>"
SECRET_OPTION = re.compile(r"(?i)(token|secret|passw|api[_-]?key|access[_-]?key|credential)")


def redact_argv(argv: List[str]) -> List[str]:
    """argv with secret values (``--hf_token X``, ``--api-key=X``, ``hf_...`` tokens) replaced."""
    from probes.procs import SECRET_VALUE

    out: List[str] = []
    hide_next = False
    for token in argv:
        key, eq, value = token.partition("=")
        if hide_next and not token.startswith("-"):
            out.append(REDACTED_ARG)
        elif token.startswith("-") and eq and SECRET_OPTION.search(key):
            out.append(f"{key}={REDACTED_ARG}")
        elif SECRET_VALUE.match(value if eq else token):
            out.append(f"{key}={REDACTED_ARG}" if eq else REDACTED_ARG)
        else:
            out.append(token)
        hide_next = token.startswith("-") and not eq and bool(SECRET_OPTION.search(token))
    return out


def _command_text(argv: List[str], env: Dict[str, str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(a) for a in argv)


def _lost(chosen: Optional[Checkpoint], skipped: List[Checkpoint]) -> str:
    if chosen is None:
        return NO_CHECKPOINT
    if chosen.step is not None:
        return f"steps after {chosen.step}"
    if chosen.epoch is not None:
        return f"progress after epoch {chosen.epoch}"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(chosen.mtime))
    return f"progress after {when} (when the checkpoint was written)"


def _skipped_note(plan: ResumePlan, what: str, picks: Callable[[Checkpoint], bool] = lambda c: True) -> None:
    """Warn when the framework's own "resume from the latest" would take a broken checkpoint."""
    picked = [c for c in plan.skipped if picks(c)]
    if picked and plan.checkpoint is not None:
        newest = picked[0]
        plan.notes.append(
            f"{what} would pick {newest.path}, which is broken ({newest.problem}): "
            f"resume from the path given here, or move the broken one aside "
            f"(mv {shlex.quote(newest.path)} {shlex.quote(newest.path + '.broken')})"
        )


def _resume_ultralytics(job: _Job, plan: ResumePlan) -> List[str]:
    launch = job.launch
    cp = plan.checkpoint
    if cp is not None:
        values = ck.check_file(cp.path, ("epoch", "optimizer")).values
        if values.get("epoch") == -1 or ("optimizer" in values and values["optimizer"] is None):
            plan.notes.append(
                f"{cp.path} is from a finished training (its optimizer was stripped): Ultralytics refuses to resume "
                "it; train again with model=<it> to fine-tune from those weights"
            )
    if launch.console == "yolo":
        if cp is None:
            plan.notes.append("no weights/last.pt under runs/: Ultralytics saves it at the end of every epoch")
            return list(job.cmdline)
        head = job.cmdline[: launch.launcher_index + 1]
        mode = [a for a in launch.program_args if a in ("detect", "segment", "classify", "pose", "obb")]
        plan.notes.append("resume takes every other setting (data, epochs, batch...) from the checkpoint")
        return head + mode + ["train", "resume", f"model={cp.path}"]
    if cp is not None:
        plan.notes.append(
            f'the script uses the ultralytics API: resume with YOLO("{cp.path}").train(resume=True) '
            "in place of its train() call, then run the same command"
        )
    return list(job.cmdline)


def _hf_flag(job: _Job) -> Optional[str]:
    own = resume_flag(job.source)
    if own is not None and "resume_from_checkpoint" in own.flag.replace("-", "_"):
        return own.flag
    declared = re.search(r"^\s*resume_from_checkpoint\s*:", job.source, re.M)
    hf_parser = re.search(r"\b(HfArgumentParser|TrlParser)\b", job.source) and re.search(
        r"\b(TrainingArguments|\w+Config)\b", job.source
    )
    uses = re.search(r"\w+\.resume_from_checkpoint\b", job.source)
    if declared or (hf_parser and uses):
        return "--resume_from_checkpoint"
    return own.flag if own is not None and not own.store_true else None


def _resume_hf(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    output_dir = job.opt("--output_dir")
    if cp is None:
        where = output_dir or job.cwd
        plan.notes.append(
            f"no checkpoint-N folder under {where}: the Trainer saves one every save_steps (default 500) "
            "when save_strategy is 'steps'"
        )
        return list(job.cmdline)
    chosen_step = cp.step or 0
    _skipped_note(
        plan,
        "resume_from_checkpoint=True (and get_last_checkpoint)",
        # HF takes the highest checkpoint-N by number; its tmp-checkpoint staging folders are not looked at
        lambda c: os.path.basename(c.path).startswith("checkpoint-") and (c.step or 0) > chosen_step,
    )
    config_mode = job.config and not any(a.startswith("-") for a in job.args)
    flag = _hf_flag(job)
    if config_mode:
        plan.notes.append(
            f"the script reads its arguments from a config file: set resume_from_checkpoint: {cp.path} there, "
            "then run the same command"
        )
        return list(job.cmdline)
    if flag:
        if job.flag("--overwrite_output_dir"):
            plan.notes.append("--overwrite_output_dir is set: keep it off when resuming, or the checkpoints go")
        return set_option(job.cmdline, flag, cp.path)
    if re.search(r"resume_from_checkpoint\s*=\s*(True|last_checkpoint|\w*checkpoint\w*)", job.source):
        plan.notes.append("the script resumes from the newest checkpoint-N of output_dir by itself")
    elif job.source:
        plan.notes.append(
            f"the script calls trainer.train() without resume_from_checkpoint: change it to trainer.train("
            f'resume_from_checkpoint="{cp.path}"), then run the same command'
        )
    else:
        plan.notes.append(
            f'the training script must call trainer.train(resume_from_checkpoint="{cp.path}") '
            "(its source was not found to check how it resumes)"
        )
    return list(job.cmdline)


def _resume_lightning(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    save_last = re.search(r"save_last\s*=\s*(True|['\"]link['\"])", job.source)
    if cp is None:
        plan.notes.append(
            "no .ckpt file found: Lightning saves one per epoch under lightning_logs/version_N/checkpoints "
            "(ModelCheckpoint(save_last=True) keeps last.ckpt)"
        )
        return list(job.cmdline)
    if "LightningCLI" in job.source:
        return set_option(job.cmdline, "--ckpt_path", cp.path)
    own = resume_flag(job.source)
    if own is not None and not own.store_true:
        return set_option(job.cmdline, own.flag, cp.path)
    last_broken = any(os.path.basename(c.path).startswith("last") for c in plan.skipped)
    if last_broken:
        plan.notes.append('ckpt_path="last" would load the broken last.ckpt: pass the path given here')
    elif not save_last:
        plan.notes.append(
            'ckpt_path="last" needs ModelCheckpoint(save_last=True), which the script does not set: pass the path'
        )
    plan.notes.append(
        f'the script must pass the checkpoint to fit: trainer.fit(model, ckpt_path="{cp.path}"), '
        "then run the same command"
    )
    return list(job.cmdline)


def _resume_accelerate(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    if cp is None:
        plan.notes.append("no accelerator.save_state folder found (model, optimizer and random states)")
        return list(job.cmdline)
    automatic = "automatic_checkpoint_naming" in job.source
    if automatic and re.match(r"^checkpoint_\d+$", os.path.basename(cp.path)):
        plan.notes.append(
            "checkpoint_N counts saves, not steps; after load_state, set "
            "accelerator.project_configuration.iteration to N+1 so new saves do not overwrite it"
        )
    own = resume_flag(job.source)
    if own is not None and not own.store_true:
        return set_option(job.cmdline, own.flag, cp.path)
    plan.notes.append(
        f'the script must restore the state itself: accelerator.load_state("{cp.path}") after '
        "accelerator.prepare(...), then run the same command"
    )
    return list(job.cmdline)


def _resume_kohya(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    if not job.flag("--save_state"):
        plan.notes.append(
            "the job runs without --save_state: kohya writes no training state; add --save_state "
            "(and --save_state_on_train_end) so the next run can resume with its optimizer"
        )
    if cp is not None:
        return set_option(job.cmdline, "--resume", cp.path)
    output_dir, output_name = _kohya_output(job)
    name = job.launch.script_name or ""
    if output_dir and "network" in name:
        weights = _newest_lora(output_dir, output_name)
        if weights:
            plan.notes.append(
                f"no state to resume; to continue from the newest LoRA weights instead (optimizer and step count "
                f"start over): add --network_weights {shlex.quote(weights)}"
            )
    return list(job.cmdline)


def _newest_lora(output_dir: str, output_name: Optional[str]) -> Optional[str]:
    names = _bounded(lambda: os.listdir(output_dir), f"listing {output_dir}", []) or []
    candidates = [
        os.path.join(output_dir, n)
        for n in names
        if n.endswith(".safetensors") and (not output_name or n.startswith(output_name))
    ]
    for path in sorted(candidates, key=_mtime, reverse=True):
        if ck.check_file(path).ok:
            return path
    return None


def _resume_nanochat(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    root, dirs = _nanochat_dir(job)
    if "NANOCHAT_BASE_DIR" in job.env:
        plan.env["NANOCHAT_BASE_DIR"] = job.env["NANOCHAT_BASE_DIR"]
    if cp is None:
        where = ", ".join(dirs) if dirs else root
        plan.notes.append(f"no model_NNNNNN.pt in {where}: base_train saves every --save-every steps")
        return list(job.cmdline)
    own = resume_flag(job.source)
    flag = own.flag if own is not None and "step" in own.flag else "--resume-from-step"
    if job.launch.nproc:
        plan.notes.append(
            f"resume with the same --nproc_per_node={job.launch.nproc}: the optimizer state is sharded per rank"
        )
    tag = os.path.basename(os.path.dirname(cp.path))
    argv = list(job.cmdline)
    if not job.opt("--model-tag", "--model_tag") and not job.opt("--depth") and tag != "d20":
        plan.notes.append(f"the checkpoint is under {tag}: give the same --depth (or --model-tag {tag})")
    return set_option(argv, flag, str(cp.step), aliases=("--resume_from_step",))


def _resume_generic(job: _Job, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    launcher = job.launch.launcher
    if cp is None:
        plan.notes.append(
            "no checkpoint file (*.pt, *.pth, *.ckpt, *.safetensors) found in the job's folders: "
            "the same command starts over"
        )
        return list(job.cmdline)
    if "configurator.py" in job.source and re.search(r"^init_from\s*=", job.source, re.M):
        plan.notes.append("nanoGPT-style config: init_from=resume loads out_dir/ckpt.pt")
        return set_option(job.cmdline, "--init_from=resume", None, aliases=("--init_from",))
    own = resume_flag(job.source)
    relaunch = "torchrun relaunches it with the same arguments" if launcher == "torchrun" else "a relaunch"
    if own is not None:
        plan.notes.append(f"the script declares {own.flag}; the checkpoint was picked as the newest valid file")
        if own.store_true:
            return set_option(job.cmdline, own.flag, None)
        if own.int_value and cp.step is not None:
            return set_option(job.cmdline, own.flag, str(cp.step))
        return set_option(job.cmdline, own.flag, cp.path)
    plan.notes.append(
        f"the script must load {cp.path} itself ({relaunch}; it declares no --resume option): "
        "restore model, optimizer and step from it before the training loop"
    )
    return list(job.cmdline)


# -- a live job ------------------------------------------------------------------------------------


def _cmdline(proc: psutil.Process) -> List[str]:
    return _bounded(proc.cmdline, f"reading /proc/{proc.pid}/cmdline", []) or []


def _is_launcher(cmdline: List[str]) -> bool:
    """The program this command runs is torchrun, accelerate or deepspeed (not merely named in its
    arguments: ``debug-stuck watch -- torchrun ...`` is not a launcher of the job it watches)."""
    return parse_launch(cmdline).launcher != "python"


def _same_job_parent(child: psutil.Process, parent: psutil.Process) -> bool:
    """Is parent part of the same job (its launcher, or the trainer of a worker child)?"""
    from probes.procs import COMPILE_WORKER, HELPER_CHILD, SPAWNED_CHILD

    parent_cmd = _cmdline(parent)
    if not parent_cmd:
        return False
    if _is_launcher(parent_cmd):
        return True
    child_cmd = _cmdline(child)
    text = " ".join(child_cmd)
    python_parent = "python" in os.path.basename(parent_cmd[0]).lower() or any(
        "python" in os.path.basename(a).lower() for a in parent_cmd[:1]
    )
    if not python_parent:
        return False
    return child_cmd == parent_cmd or bool(
        SPAWNED_CHILD.search(text) or COMPILE_WORKER.search(text) or HELPER_CHILD.search(text)
    )


def job_root(pid: int) -> psutil.Process:
    """The topmost process of the job that pid belongs to (its launcher, or the trainer itself)."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        raise NotInspectable(
            f"process {pid} does not exist (it may have exited)",
            'check the PID with ps; for a job that already ended use --cmd "..." --dir DIR',
        ) from None
    except psutil.AccessDenied:
        raise NotInspectable(f"permission denied reading process {pid}", "run as the job's user or root") from None
    for _ in range(16):
        parent = _bounded(proc.parent, f"finding the parent of {proc.pid}")
        if parent is None or parent.pid <= 1 or not _same_job_parent(proc, parent):
            return proc
        proc = parent
    return proc


def _full_environ(proc: psutil.Process) -> Optional[Dict[str, str]]:
    return _bounded(proc.environ, f"reading /proc/{proc.pid}/environ", None)


LAUNCHER_SET_ENV = re.compile(
    r"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|ROLE_NAME|"
    r"ROLE_WORLD_SIZE|TORCHELASTIC_\w+|TORCH_NCCL_ASYNC_ERROR_HANDLING|OMP_NUM_THREADS)$"
)


def plan_resume_for_pid(pid: int) -> ResumePlan:
    """The resume plan for a live job: its launcher's command line, working directory and environment."""
    root = job_root(pid)
    cmdline = _cmdline(root)
    if not cmdline:
        raise NotInspectable(
            f"cannot read the command line of process {root.pid}",
            'run as the job\'s user or root, or give it with --cmd "..." --dir DIR',
        )
    try:
        cwd = call_with_timeout(root.cwd, READ_SECONDS, f"reading the working directory of {root.pid}")
    except psutil.NoSuchProcess:
        raise NotInspectable(f"process {root.pid} exited while being read", "use --cmd and --dir") from None
    except (psutil.AccessDenied, PermissionError):
        raise NotInspectable(
            f"permission denied reading the working directory of process {root.pid}", "run as the job's user or root"
        ) from None
    except CallTimedOut as exc:
        raise NotInspectable(str(exc), "its working directory may be on a hung mount; use --cmd and --dir") from None
    environ = _full_environ(root)
    plan = plan_resume(cmdline, cwd, environ if environ is not None else dict(os.environ))
    if environ is None:
        plan.notes.append(f"could not read the environment of process {root.pid}: this shell's was used")
    else:
        from probes.procs import RELEVANT_ENV, redact_env

        relevant = redact_env({k: v for k, v in environ.items() if RELEVANT_ENV.match(k)})
        keep = {k: v for k, v in sorted(relevant.items()) if not LAUNCHER_SET_ENV.match(k) and k not in plan.env}
        if keep:
            shown = " ".join(f"{k}={v}" for k, v in list(keep.items())[:12])
            plan.notes.append(f"the job ran with: {shown} (set them again before resuming)")
    created = _bounded(root.create_time, f"reading the start time of {root.pid}")
    if plan.checkpoint is not None and created and plan.checkpoint.mtime < created:
        plan.notes.append("the checkpoint was written before this run started (by an earlier run)")
    return plan


# -- stopping a job --------------------------------------------------------------------------------


@dataclass
class StopResult:
    stopped: List[int]
    left: List[dict]  # {"pid", "state", "why"}, e.g. D-state survivors
    signals: List[str]  # the signals that were sent, in order (SIGINT, SIGTERM, SIGKILL)
    report_paths: List[str]
    root: Optional[int] = None
    steps: List[str] = field(default_factory=list)  # what was done, one line each
    errors: List[str] = field(default_factory=list)
    first_signal_at: Optional[float] = None  # time.time() of the first signal (after the report)

    def summary(self) -> str:
        lines = []
        if self.report_paths:
            lines.append(f"report: {', '.join(self.report_paths)}")
        sent = f" ({', '.join(self.signals)})" if self.signals else " (they had already exited)"
        lines.append(f"stopped {len(self.stopped)} process(es) of job {self.root}{sent}")
        lines += [f"left: pid {d['pid']} state {d['state']}: {d['why']}" for d in self.left]
        lines += [f"note: {e}" for e in self.errors]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "stopped": list(self.stopped),
            "left": list(self.left),
            "signals": list(self.signals),
            "report_paths": list(self.report_paths),
            "steps": list(self.steps),
            "errors": list(self.errors),
        }


@dataclass
class _Tracked:
    proc: psutil.Process
    create_time: float


def _same_process(tracked: _Tracked) -> bool:
    """The PID still belongs to the process we saw (not a new one that got the PID after it exited)."""
    try:
        return psutil.Process(tracked.proc.pid).create_time() == tracked.create_time
    except psutil.Error:
        return False


def _alive(tracked: _Tracked) -> bool:
    if not _same_process(tracked):
        return False
    try:
        return tracked.proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _protected() -> set:
    """This process and its ancestors (and init): never signalled, whatever the tree says."""
    pids = {0, 1, os.getpid()}
    try:
        for parent in psutil.Process().parents():
            pids.add(parent.pid)
    except psutil.Error:
        pass
    return pids


def signal_if_same(tracked: _Tracked, sig: int, protected: Optional[set] = None) -> Optional[str]:
    """Send sig only if the PID is still the process we tracked. None when sent, else why not."""
    if tracked.proc.pid in (protected if protected is not None else _protected()):
        return "protected"
    if not _same_process(tracked):
        return "gone"
    try:
        tracked.proc.send_signal(sig)  # psutil re-checks the PID's identity as well
        return None
    except psutil.NoSuchProcess:
        return "gone"
    except psutil.AccessDenied:
        return "permission denied"


class _Tree:
    """The job's processes by PID and creation time, re-read from psutil before each signal."""

    def __init__(self, pids: Iterable[int], protected: set):
        self.protected = protected
        self.members: Dict[int, _Tracked] = {}
        for pid in pids:
            self._add_pid(pid)
        self.refresh()

    def _add_pid(self, pid: int) -> None:
        try:
            proc = psutil.Process(pid)
            self._add(proc)
        except psutil.Error:
            pass

    def _add(self, proc: psutil.Process) -> None:
        if proc.pid in self.protected:
            return
        try:
            created = proc.create_time()
        except psutil.Error:
            return
        old = self.members.get(proc.pid)
        if old is None or old.create_time != created:
            self.members[proc.pid] = _Tracked(proc, created)

    def refresh(self) -> None:
        """Add every live descendant of every live member (ranks in their own sessions included)."""
        for tracked in list(self.members.values()):
            if not _alive(tracked):
                continue
            children = _bounded(lambda t=tracked: t.proc.children(recursive=True), "listing children", []) or []
            for child in children:
                self._add(child)

    def alive(self) -> List[_Tracked]:
        return [t for t in self.members.values() if _alive(t)]

    def depth_order(self, members: List[_Tracked]) -> List[_Tracked]:
        """Parents before children: freezing top-down leaves nothing that can fork behind our back."""
        pids = {t.proc.pid for t in members}

        def depth(t: _Tracked) -> int:
            d, proc = 0, t.proc
            for _ in range(32):
                ppid = _bounded(proc.ppid, "parent", None)
                if ppid not in pids:
                    break
                d += 1
                proc = self.members[ppid].proc
            return d

        return sorted(members, key=depth)


def _wait_gone(tree: _Tree, seconds: float) -> List[_Tracked]:
    deadline = time.monotonic() + seconds
    last_refresh = time.monotonic()
    while True:
        alive = tree.alive()
        if not alive or time.monotonic() >= deadline:
            return alive
        if time.monotonic() - last_refresh > 0.5:
            tree.refresh()  # a launcher may start new processes while it shuts down
            last_refresh = time.monotonic()
        time.sleep(0.05)


def _describe_left(tracked: _Tracked, reason: Optional[str] = None) -> dict:
    pid = tracked.proc.pid

    def read(path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096)

    status = _bounded(lambda: read(f"/proc/{pid}/status"), f"reading /proc/{pid}/status", "") or ""
    m = re.search(r"^State:\s+(\w)", status, re.M)
    state = m.group(1) if m else "?"
    wchan = (_bounded(lambda: read(f"/proc/{pid}/wchan"), f"reading /proc/{pid}/wchan", "") or "").strip()
    wchan = None if wchan in ("", "0") else wchan
    if reason == "permission denied":
        why = "permission denied: it belongs to another user (run debug-stuck stop as that user or root)"
    elif state == "D":
        why = (
            f"uninterruptible sleep in {wchan or 'a kernel call'}: SIGKILL is pending and takes effect when that call "
            "returns (a hung NFS/FUSE mount or GPU driver call keeps it there; dmesg says which)"
        )
    else:
        why = f"still alive after SIGKILL (state {state}); it may still be exiting (a large GPU context takes a while)"
    return {"pid": pid, "state": state, "wchan": wchan, "why": why}


SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGKILL: "SIGKILL"}


# processes that hold other people's work: a tree rooted at one of these is never a training job
NOT_A_JOB = re.compile(
    r"^(systemd|init|kthreadd|sshd|tmux.*|screen|login|su|sudo|containerd.*|dockerd|docker-init|tini|dumb-init|"
    r"slurmd|slurmstepd|jupyter.*|code-server|agetty|cron|supervisord)$"
)


def job_tree_pids(pid: int) -> Tuple[int, List[int]]:
    """(root PID, every PID of the job) for the job pid belongs to.

    Raises NotInspectable (no such process) or BadInput when the tree is not one a stop may end:
    init, a system daemon, or a tree that holds this very process (the user's own shell).
    """
    from probes.procs import InspectError, job_processes

    root = job_root(pid)
    name = _bounded(root.name, f"reading the name of {root.pid}", "") or ""
    if root.pid <= 2 or NOT_A_JOB.match(name):
        raise BadInput(f"refusing to stop process {root.pid} ({name or 'init'}): it is not a training job", _GIVE_JOB)
    try:
        procs = job_processes([root.pid])
    except InspectError as exc:
        raise NotInspectable(exc.message, "check the PID with ps; give a running process") from None
    children = {c.pid for c in _bounded(lambda: root.children(recursive=True), "listing children", []) or []}
    # root is already the top of the job: a parent job_processes adds for looking like a launcher
    # (a watcher whose arguments name torchrun) is not part of it
    pids = list(dict.fromkeys([root.pid, *(p.pid for p in procs if p.pid in children), *sorted(children)]))
    mine = _protected() & set(pids)
    if mine:
        raise BadInput(
            f"refusing to stop process {root.pid}: its tree holds this debug-stuck (pid {min(mine)})", _GIVE_JOB
        )
    return root.pid, pids


_GIVE_JOB = "give the PID of the training job (its launcher, a rank or a worker)"


def stop_job(
    pid: int,
    report_dir: Optional[str] = None,
    grace: float = 10.0,
    write_report: bool = True,
    progress: Optional[Callable[[str], None]] = None,
    report=None,
) -> StopResult:
    """Write the diagnosis report, then end the job's whole process tree: SIGINT, SIGTERM, SIGKILL.

    Only the job's processes are signalled, each by PID after checking it is still the process
    seen (PID reuse); this process and its ancestors never are. Survivors (D state) are reported.
    ``report``: a Report already made for this job (a front end's), written instead of a new one.
    """
    say = progress or (lambda msg: None)
    root, pids = job_tree_pids(pid)
    protected = _protected()
    tree = _Tree(pids, protected)
    if not tree.members:
        raise NotInspectable(f"process {pid} exited before it could be stopped", "nothing left to stop")
    result = StopResult(stopped=[], left=[], signals=[], report_paths=[], root=root)
    if write_report:
        say("writing the report (evidence before teardown)")
        result.report_paths = write_stop_report(root, report_dir, result.errors, progress, report=report)
        result.steps.append(f"report written: {', '.join(result.report_paths)}")
    everyone = set(tree.members)
    alive: List[_Tracked] = tree.alive()
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, grace)):
        tree.refresh()
        alive = tree.alive()
        everyone |= set(tree.members)
        if not alive:
            break
        sent = _send(alive, sig, protected, result)
        if result.first_signal_at is None and sent:
            result.first_signal_at = time.time()
        say(f"{SIGNAL_NAMES[sig]} to {len(sent)} process(es); waiting up to {wait:g} s")
        alive = _wait_gone(tree, wait)
    refused: Dict[int, str] = {}
    if alive:
        tree.refresh()
        frozen = _freeze(tree, protected)
        everyone |= set(tree.members)
        alive = tree.alive()
        sent = _send(alive, signal.SIGKILL, protected, result, refused)
        if result.first_signal_at is None and sent:
            result.first_signal_at = time.time()
        say(f"SIGKILL to {len(sent)} process(es)")
        if frozen:
            result.steps.append(f"froze {len(frozen)} process(es) with SIGSTOP first, so none could fork")
        alive = _wait_gone(tree, max(5.0, min(grace, 15.0)))
    everyone |= set(tree.members)
    left_pids = {t.proc.pid for t in alive}
    result.left = [_describe_left(t, refused.get(t.proc.pid)) for t in alive]
    result.stopped = sorted(p for p in everyone if p not in left_pids)
    result.steps.append(
        f"stopped {len(result.stopped)} process(es)" + (f"; {len(result.left)} left" if result.left else "")
    )
    return result


def _send(
    members: List[_Tracked], sig: int, protected: set, result: StopResult, refused: Optional[Dict[int, str]] = None
) -> List[int]:
    sent = []
    for tracked in members:
        why = signal_if_same(tracked, sig, protected)
        if why is None:
            sent.append(tracked.proc.pid)
        elif why == "permission denied":
            result.errors.append(f"{SIGNAL_NAMES[sig]} to {tracked.proc.pid}: permission denied")
            if refused is not None:
                refused[tracked.proc.pid] = why
    if sent:
        if SIGNAL_NAMES[sig] not in result.signals:
            result.signals.append(SIGNAL_NAMES[sig])
        result.steps.append(f"{SIGNAL_NAMES[sig]} to {len(sent)} process(es): {' '.join(map(str, sent))}")
    return sent


def _freeze(tree: _Tree, protected: set) -> List[int]:
    frozen: set = set()
    for _ in range(20):
        tree.refresh()
        new = [t for t in tree.depth_order(tree.alive()) if t.proc.pid not in frozen]
        if not new:
            break
        for tracked in new:
            if signal_if_same(tracked, signal.SIGSTOP, protected) is None:
                frozen.add(tracked.proc.pid)
            else:
                frozen.add(tracked.proc.pid)  # gone or not ours: do not retry it
    return sorted(frozen)


def write_stop_report(
    pid: int,
    report_dir: Optional[str],
    errors: Optional[List[str]] = None,
    progress: Optional[Callable[[str], None]] = None,
    report=None,
) -> List[str]:
    """Diagnose the job and write the report (Markdown and JSON) into report_dir; returns the paths."""
    from assistant.diagnose import DiagnoseRequest, run_diagnosis
    from assistant.errors import DebugStuckError
    from assistant.render_markdown import render_markdown
    from assistant.report import Report

    directory = os.path.abspath(report_dir or os.getcwd())
    failure = None
    try:
        if report is None:
            report = run_diagnosis(DiagnoseRequest(pids=[pid], window=1.0, progress=progress))
    except DebugStuckError as exc:
        failure = f"could not diagnose before stopping: {exc.one_line()}"
    except Exception as exc:  # the report must not cost the user the stop they asked for
        failure = f"could not diagnose before stopping: {type(exc).__name__}: {exc}"
    if failure is not None:
        report = Report()
        report.errors.append(failure)
        _fill_processes(report, pid)  # the process table at least: evidence of what was stopped
        if errors is not None:
            errors.append(failure)
    if report.resume is None:
        try:
            report.resume = plan_resume_for_pid(pid).to_dict()
        except Exception as exc:
            report.errors.append(f"could not plan the resume: {exc}")
    report.notes.append(f"written by `debug-stuck stop` before stopping the job (pid {pid})")
    markdown = render_markdown(report)
    if report.resume and "## Resume" not in markdown:
        markdown = markdown.rstrip("\n") + "\n\n" + render_resume_markdown(report.resume)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(report.created))
    base = os.path.join(directory, f"debug-stuck-{pid}-{stamp}")
    paths = [base + ".md", base + ".json"]
    _write_atomic(paths[0], markdown)
    _write_atomic(paths[1], json.dumps(report.to_dict(), indent=2) + "\n")
    return paths


def _fill_processes(report, pid: int) -> None:
    from probes.procs import job_processes, read_states

    try:
        procs = job_processes([pid])
        read_states(procs)
        report.processes = [p.to_dict() for p in procs]
    except Exception as exc:
        report.errors.append(f"could not read the processes: {exc}")


def _write_atomic(path: str, text: str) -> None:
    from assistant.paths import write_text_atomic

    try:
        write_text_atomic(path, text)  # fsynced: the evidence is on disk before anything is signalled
    except OSError as exc:
        raise BadInput(f"cannot write the report {path}: {exc.strerror}", "give a writable --report-dir") from None


def render_resume_markdown(resume: dict) -> str:
    lines = ["## Resume", ""]
    lines.append(f"- **Framework:** {resume.get('framework')} (launcher: {resume.get('launcher')})")
    lines.append(f"- **Checkpoint:** {resume.get('checkpoint') or 'none usable'}")
    if resume.get("lost"):
        lines.append(f"- **Lost:** {resume['lost']}")
    for skipped in resume.get("skipped") or []:
        lines.append(f"- **Skipped:** `{skipped['path']}`: {skipped['problem']}")
    for note in resume.get("notes") or []:
        lines.append(f"- {note}")
    if resume.get("command"):
        cwd = resume.get("cwd")
        lines += ["", "```bash", (f"cd {shlex.quote(cwd)}\n" if cwd else "") + resume["command"], "```"]
    return "\n".join(lines) + "\n"


# -- short names for front ends (the interactive session looks for stop() and resume()) ------------


def stop(pid: int, report=None, report_dir: Optional[str] = None, grace: float = 10.0) -> StopResult:
    """stop_job with the front end's report (already made) written first. The caller has confirmed."""
    return stop_job(pid, report_dir=report_dir, grace=grace, report=report)


def resume(pid: int) -> ResumePlan:
    """plan_resume_for_pid."""
    return plan_resume_for_pid(pid)
