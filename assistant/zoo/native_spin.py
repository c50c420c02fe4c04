"""Hang: a native loop that never returns while holding the GIL (cause ``cpu-spin``).

``validate_token`` matches ``(a+)+$`` against 64 ``a`` and a ``b``: catastrophic backtracking in the
C regex engine (``_sre``), which never releases the GIL. Each extra ``a`` doubles the time (24 take
~1 s, so 64 take ~10^12 s): one core at 100%, the process state R, and a Python stack frozen on one
line.

py-spy, MainThread active+gil::

    validate_token (native_spin.py)
    main (native_spin.py)
    <module> (native_spin.py)

(``--native`` shows ``sre_ucs1_match``/``_sre_SRE_Pattern_match`` under it.)

READY (``{"pid", "line"}``): written just before the call; no thread of this process can run once
the engine holds the GIL, so it cannot be confirmed from inside. ``line`` is where the stack freezes.
"""

from __future__ import annotations

import inspect
import re

import _common

PATTERN = re.compile(r"(a+)+$")


def validate_token(token: str) -> bool:
    return PATTERN.match(token) is not None  # the spin: never returns


def main() -> None:
    token = "a" * 64 + "b"
    line = inspect.getsourcelines(validate_token)[1] + 1
    print(f"validating a {len(token)}-character token", flush=True)
    _common.mark_ready(line=line)
    validate_token(token)
    print("validated (should never happen)", flush=True)


if __name__ == "__main__":
    main()
