"""The path of a Rust symbol in the v0 mangling, for matching it against the frame table.

Rust's v0 scheme (RFC 2603; rustc `-C symbol-mangling-version=v0`) names a function
`_R` + a path: `C` a crate root (`s<base-62>_` disambiguator, then its name), `N<ns>` a nested path
and its identifier, `M`/`X`/`Y` impl paths, `B<base-62>_` a back-reference, `I...E` generic
arguments; an identifier is its length in decimal, a `_` when it starts with a digit or `_`, then
its bytes. py-spy 0.4 prints such names undemangled (seen live: tokenizers 0.23's rayon wait as
`_RNvMs3_NtCsjpdOAJTRuNw_10rayon_core5latchNtB5_9LockLatch14wait_and_reset`). This reads the
identifiers in order and joins them with `::` (`rayon_core::latch::LockLatch::wait_and_reset`):
enough to match a table entry, not a full demangler (generic arguments and back-referenced paths
are not expanded).
"""

from __future__ import annotations

import re

_BASE62 = re.compile(r"[0-9a-zA-Z]*_")
_V0 = re.compile(r"^_R[0-9A-Z]")


def rust_v0_path(symbol: str) -> str | None:
    """`a::b::c` for a v0-mangled symbol, or None when `symbol` is not one (or cannot be read)."""
    text = symbol.split(" ", 1)[0]
    if not _V0.match(text):
        return None
    names = []
    i = 2
    while i < len(text):
        char = text[i]
        if char == "B" or (char == "s" and (text[i - 1] in "CMXY" or _disambiguates(text, i))):
            # `B<base-62>_` a back-reference; `s<base-62>_` the disambiguator of a crate root, an impl
            # path or an identifier: numbers, not names
            found = _BASE62.match(text, i + 1)
            if found is None:
                return None
            i = found.end()
        elif char.isdigit():
            found = re.compile(r"\d+").match(text, i)
            length, i = int(found.group()), found.end()
            if i < len(text) and text[i] == "_":
                i += 1
            if length == 0 or i + length > len(text):
                return None
            names.append(text[i : i + length])
            i += length
        else:
            i += 1
    return "::".join(names) if names else None


def _disambiguates(text: str, i: int) -> bool:
    """`s` followed by digits is a disambiguator when a `_` and then an identifier's length follow."""
    found = _BASE62.match(text, i + 1)
    return found is not None and found.end() < len(text) and text[found.end()].isdigit()
