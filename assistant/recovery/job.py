"""Everything read about one job, once: its command line, script source, config file and folders."""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Tuple

from debug_stuck.recovery.commandline import has_option, option_value, parse_launch
from debug_stuck.recovery.reading import at, bounded_read, read_source
from debug_stuck.recovery.scan import Scan, walk
from debug_stuck.recovery.source import script_path
from debug_stuck.yamlio import load_yaml

# option names whose directory values are where a job writes (a --data_dir is not walked)
NOT_OUTPUT_OPTION = re.compile(r"data|cache|pretrained|model_name|tokenizer|vocab|config|dataset|model$|weights$", re.I)


class TrainingJob:
    """Everything read about one job once: command line, script source, folders."""

    def __init__(self, cmdline: List[str], cwd: Optional[str], env: Dict[str, str]):
        """`cwd` None: the job's folder is unknown (a log or a saved report), so only absolute
        paths are read; a relative one would resolve against this tool's own folder."""
        self.cmdline = [str(a) for a in cmdline]
        self.cwd = os.path.abspath(cwd) if cwd else None
        self.env = env
        self.launch = parse_launch(self.cmdline)
        self.args = self.launch.program_args
        self.script_file = script_path(self.launch, self.cwd, env) if self.cwd else self._absolute(self.launch.script)
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

    @staticmethod
    def _absolute(path: Optional[str]) -> Optional[str]:
        return path if path and os.path.isabs(path) else None

    def path(self, value: str) -> Optional[str]:
        """The absolute path of an option's value; None when it is relative and the folder unknown."""
        value = os.path.expanduser(value)
        if os.path.isabs(value):
            return value
        return os.path.normpath(os.path.join(self.cwd, value)) if self.cwd else None

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
            if full is None:
                continue
            if bounded_read(lambda f=full: os.path.isdir(at(f)), f"stat {full}", False):
                out.append(full)
            elif re.search(r"\.(pt|pth|ckpt|safetensors)$", value) and re.search(r"save|out|ckpt|checkpoint", key):
                parent = os.path.dirname(full)
                if bounded_read(lambda p=parent: os.path.isdir(at(p)), f"stat {parent}", False):
                    out.append(parent)
        if self.cwd:
            out.append(self.cwd)
        return list(dict.fromkeys(out))

    def scan(self) -> Scan:
        if self._scan is None:
            self._scan = walk(self.output_dirs())
            self.notes.extend(self._scan.notes)
        return self._scan


def _config_values(args: List[str], cwd: Optional[str]) -> Dict[str, object]:
    """Options from a config file the command names (kohya --config_file x.toml, HF `train.py args.json`)."""
    path = option_value(args, "--config_file", "--config-file")
    if path is None:
        positional = [a for a in args if not a.startswith("-") and re.search(r"\.(json|ya?ml|toml)$", a)]
        if len(positional) == 1 and (len(args) == 1 or args[0] == positional[0]):
            path = positional[0]
    if not path:
        return {}
    if not os.path.isabs(path) and not cwd:
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
            data = load_yaml(text)
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
