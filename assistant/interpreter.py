"""How debug-stuck starts Python children that must never import from the user's directory.

`python -m x` and `python -c ...` put the current directory first on sys.path, so a folder of the
user's named like a module we import (`probes/`, `json.py`...) would be imported instead. Every
child we start runs through a prologue that drops that entry before anything else is imported.
(`python -I` would do it too, but it also drops the user's site-packages, where a `pip install
--user debug-stuck` lives; `-P` would not, but exists only from Python 3.11.)
"""

from __future__ import annotations

import sys
from typing import List, Optional

# sys.path[0] is "" (the current directory) for -c; drop it before the first real import.
PROLOGUE = "import sys\nif sys.path and sys.path[0] in ('', '.'):\n    del sys.path[0]\n"
_RUN_MODULE = PROLOGUE + "import runpy\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"


def isolated_python_code(code: str, python: Optional[str] = None) -> List[str]:
    """argv running `code` with no import from the current directory (its arguments follow)."""
    return [python or sys.executable, "-c", PROLOGUE + code]


def isolated_python_module(module: str, python: Optional[str] = None) -> List[str]:
    """argv running `python -m module` with no import from the current directory (its arguments follow)."""
    return [python or sys.executable, "-c", _RUN_MODULE.format(module=module)]
