"""Editable installs only: `import debug_stuck` from this checkout.

The repository keeps the design card's folders (`assistant/`, `probes/`); the wheel maps them to
`debug_stuck/` and `debug_stuck/probes/`. An editable install cannot express that rename with a
path entry, so this finder, activated by a `.pth` line, does it at import time.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGES = {
    "debug_stuck": os.path.join(_ROOT, "assistant"),
    "debug_stuck.probes": os.path.join(_ROOT, "probes"),
}


class CheckoutFinder:
    """Finds the two packages whose folder names differ from their import names."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = _PACKAGES.get(fullname)
        if folder is None:
            return None
        init = os.path.join(folder, "__init__.py")
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[folder])

    @classmethod
    def invalidate_caches(cls) -> None:
        pass


# After the path finders, as an editable path entry would be: a debug_stuck found on sys.path first
# (an installed wheel on PYTHONPATH, say) wins, exactly as it would over a normal install.
if CheckoutFinder not in sys.meta_path:
    sys.meta_path.append(CheckoutFinder)
