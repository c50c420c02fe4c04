"""Where the knowledge base lives: inside an installed wheel, or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir() -> Path:
    """The folder holding `skills/` and `SKILL.md`.

    A wheel ships them under `assistant/_data/`; an editable install or a checkout has them at
    the repository root, one level above this package.
    """
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
