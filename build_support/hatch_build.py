"""Hatch build hook: an editable install activates the checkout finder (build_support/editable).

The standard wheel needs nothing from here: `sources` in pyproject.toml maps the folders into
`debug_stuck/`. Hatch cannot express that rename for an editable install (it would only add
folders to sys.path), so the editable wheel gets a `.pth` line that imports the finder instead.
"""

from __future__ import annotations

import os
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PTH_NAME = "_debug_stuck_editable.pth"


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if version != "editable":
            return
        folder = tempfile.mkdtemp(prefix="debug-stuck-editable-")
        pth = os.path.join(folder, PTH_NAME)
        with open(pth, "w", encoding="utf-8") as fh:
            fh.write("import _debug_stuck_editable\n")
        # Only the activation line: the standard wheel's data (skills/, SKILL.md) is read from the
        # checkout by debug_stuck.kb in an editable install.
        build_data["force_include_editable"] = {pth: PTH_NAME}
