"""Install the agent skill folder: SKILL.md with the playbooks beside it, idempotently."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from assistant.errors import BadInput
from assistant.paths import skill_md, skills_dir

DEFAULT_DEST = "~/.claude/skills/debug-stuck"
MANIFEST = ".debug-stuck-files"


@dataclass
class InstallResult:
    dest: Path
    written: List[str] = field(default_factory=list)
    unchanged: List[str] = field(default_factory=list)
    removed: List[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"installed the debug-stuck skill in {self.dest}: {len(self.written)} written, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} stale removed"
        )


def _shipped_files():
    """(relative destination, source path) for every file of the skill folder."""
    yield "SKILL.md", skill_md()
    root = skills_dir()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"skills/{path.relative_to(root).as_posix()}", path


def install_skill(dest: Optional[str] = None) -> InstallResult:
    target = Path(os.path.expanduser(dest or DEFAULT_DEST))
    if target.exists() and not target.is_dir():
        raise BadInput(f"--dest {target} exists and is not a folder", "give a folder path")
    result = InstallResult(dest=target)
    manifest_path = target / MANIFEST
    try:
        previous = set(manifest_path.read_text(encoding="utf-8").split("\n")) - {""}
    except OSError:
        previous = set()
    current = []
    try:
        for rel, source in _shipped_files():
            data = source.read_bytes()
            out = target / rel
            current.append(rel)
            if out.is_file() and out.read_bytes() == data:
                result.unchanged.append(rel)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, out)
            result.written.append(rel)
        # Only files an earlier install wrote are ours to remove.
        for rel in sorted(previous - set(current)):
            stale = target / rel
            if stale.is_file():
                stale.unlink()
                result.removed.append(rel)
        manifest_path.write_text("\n".join(current) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot install into {target}: {exc.strerror or exc}", "give a writable --dest") from None
    return result
