"""The console script installed with the interpreter that runs the tests, as a user runs it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Optional


def installed_script() -> Optional[str]:
    """`debug-stuck` beside this interpreter (the environment under test), else the one on PATH."""
    beside = Path(sys.executable).parent / "debug-stuck"
    if beside.is_file():
        return str(beside)
    return shutil.which("debug-stuck")
