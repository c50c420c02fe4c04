"""A resume plan (the report's `resume` object) as plain text, for `debug-stuck resume` and the session."""

from __future__ import annotations

import os
import shlex
from typing import List, Optional


def render_resume_text(resume: dict, here: Optional[str] = None) -> str:
    """What to run, in a few lines. `here`: the directory the reader is in (no `cd` needed there)."""
    out: List[str] = [f"framework: {resume.get('framework')} (launcher: {resume.get('launcher')})"]
    if resume.get("finished"):
        out.append(f"not needed: {resume['finished']}")
    checkpoint = resume.get("checkpoint")
    where = [f"step {resume['step']}"] if resume.get("step") is not None else []
    where += [f"epoch {resume['epoch']}"] if resume.get("epoch") is not None else []
    label = f"{checkpoint} ({', '.join(where)})" if checkpoint and where else checkpoint
    out.append(f"checkpoint: {label or 'none usable'}")
    out += [f"skipped: {c.get('path')}: {c.get('problem')}" for c in resume.get("skipped") or []]
    if resume.get("lost"):
        out.append(f"lost: {resume['lost']}")
    out += [f"note: {n}" for n in resume.get("notes") or []]
    command, cwd = resume.get("command"), resume.get("cwd")
    if command:
        in_place = bool(cwd) and here is not None and os.path.abspath(cwd) == os.path.abspath(here)
        again = " (to train again anyway)" if resume.get("finished") else ""
        out.append(f"resume with{again}:" if in_place or not cwd else f"resume with{again} (in {cwd}):")
        out.append(command if in_place or not cwd else f"cd {shlex.quote(cwd)} && {command}")
    return "\n".join(out) + "\n"
