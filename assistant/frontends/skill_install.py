"""Install the agent skill folder: SKILL.md with the playbooks beside it, idempotently and safely.

Every write and every delete stays inside the destination: a manifest entry that is absolute or
climbs out (`../x`) is ignored, and no symbolic link on the way is followed (a symlinked `skills/`
is refused). A file the user edited since we installed it (its hash differs from the one we
recorded) is kept: the install refuses, naming it, unless `--force`, which backs it up first.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional

from debug_stuck.errors import BadInput
from debug_stuck.kb import skill_md, skills_dir
from debug_stuck.writer import write_file

DEFAULT_DEST = "~/.claude/skills/debug-stuck"
MANIFEST = ".debug-stuck-files"
FILE_MODE = 0o644  # read by the agent; nothing secret in a playbook


@dataclass
class InstallResult:
    dest: Path
    written: List[str] = field(default_factory=list)
    unchanged: List[str] = field(default_factory=list)
    removed: List[str] = field(default_factory=list)
    backed_up: List[str] = field(default_factory=list)
    ignored: List[str] = field(default_factory=list)  # manifest entries outside the destination

    def summary(self) -> str:
        text = (
            f"installed the debug-stuck skill in {self.dest}: {len(self.written)} written, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} stale removed"
        )
        if self.backed_up:
            text += f"; your edits kept as {', '.join(self.backed_up)}"
        if self.ignored:
            text += f"; ignored manifest entries outside the folder: {', '.join(self.ignored)}"
        return text


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _shipped_files():
    """(relative destination, source path) for every file of the skill folder."""
    yield "SKILL.md", skill_md()
    root = skills_dir()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"skills/{path.relative_to(root).as_posix()}", path


def _inside(rel: str) -> bool:
    """A manifest entry names a file inside the destination: relative, no `..`, no empty part."""
    pure = PurePosixPath(rel)
    return (
        bool(rel) and not pure.is_absolute() and "\\" not in rel and all(p not in ("", ".", "..") for p in pure.parts)
    )


def _no_links(target: Path, rel: str) -> None:
    """Refuse when any existing part of target/rel is a symbolic link (we never write through one)."""
    here = target
    for part in PurePosixPath(rel).parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise BadInput(
                f"{here} is a symbolic link; refusing to write through it",
                "remove the link, or install into another --dest",
            )


def _read_manifest(path: Path) -> Dict[str, Optional[str]]:
    """{relative path: sha256 we wrote, or None for a manifest of the older, hash-less format}."""
    try:
        if os.path.islink(path):
            return {}
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    out: Dict[str, Optional[str]] = {}
    for line in lines:
        digest, sep, rel = line.partition("  ")
        if sep and len(digest) == 64:
            out[rel] = digest
        elif line.strip():
            out[line.strip()] = None
    return out


def _current(path: Path) -> Optional[bytes]:
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return path.read_bytes()
    except OSError:
        return None


def install_skill(dest: Optional[str] = None, force: bool = False) -> InstallResult:
    target = Path(os.path.abspath(os.path.expanduser(dest or DEFAULT_DEST)))
    if os.path.islink(target):
        raise BadInput(f"--dest {target} is a symbolic link", "give the real folder")
    if target.exists() and not target.is_dir():
        raise BadInput(f"--dest {target} exists and is not a folder", "give a folder path")
    result = InstallResult(dest=target)
    previous = _read_manifest(target / MANIFEST)
    result.ignored = sorted(rel for rel in previous if not _inside(rel))
    shipped = [(rel, source.read_bytes()) for rel, source in _shipped_files()]
    for rel, _ in shipped:
        _no_links(target, rel)
    edited = []
    for rel, data in shipped:
        have = _current(target / rel)
        recorded = previous.get(rel)
        if have is not None and have != data and recorded is not None and _digest(have) != recorded:
            edited.append(rel)
    if edited and not force:
        raise BadInput(
            f"you edited {', '.join(edited)} in {target} since it was installed",
            "keep your changes elsewhere, or add --force (your versions are backed up first)",
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    manifest: List[str] = []
    try:
        for rel, data in shipped:
            out = target / rel
            have = _current(out)
            manifest.append(f"{_digest(data)}  {rel}")
            if have == data:
                result.unchanged.append(rel)
                continue
            if have is not None and (rel in edited or previous.get(rel) is None):
                backup = f"{rel}.bak-{stamp}"
                write_file(str(target / backup), have, mode=FILE_MODE)
                result.backed_up.append(backup)
            out.parent.mkdir(parents=True, exist_ok=True)
            write_file(str(out), data, mode=FILE_MODE)
            result.written.append(rel)
        # Only files an earlier install wrote, still as it wrote them, are ours to remove.
        for rel, recorded in sorted(previous.items()):
            if rel in dict(shipped) or not _inside(rel):
                continue
            _no_links(target, rel)
            have = _current(target / rel)
            if have is not None and (recorded is None or _digest(have) == recorded):
                (target / rel).unlink()
                result.removed.append(rel)
        write_file(str(target / MANIFEST), "\n".join(manifest) + "\n", mode=FILE_MODE)
    except OSError as exc:
        raise BadInput(f"cannot install into {target}: {exc.strerror or exc}", "give a writable --dest") from None
    return result
