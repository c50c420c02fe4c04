"""What a training script's own text says (read as text: never imported or run): its file, the
options its argparse declares, the resume option among them, the packages it imports."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional

from debug_stuck.recovery.commandline import Launch
from debug_stuck.recovery.reading import at, bounded_read


def script_path(launch: Launch, cwd: str, env: Dict[str, str]) -> Optional[str]:
    if launch.script:
        return launch.script if os.path.isabs(launch.script) else os.path.join(cwd, launch.script)
    if launch.module:
        rel = launch.module.replace(".", os.sep)
        roots = [cwd] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        for root in roots:
            root = root if os.path.isabs(root) else os.path.join(cwd, root)
            for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__main__.py")):
                if bounded_read(lambda c=candidate: os.path.isfile(at(c)), f"stat {candidate}", False):
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


def imports(source: str, *modules: str) -> bool:
    pattern = "|".join(re.escape(m) for m in modules)
    return bool(re.search(rf"^\s*(import|from)\s+({pattern})\b", source, re.M))
