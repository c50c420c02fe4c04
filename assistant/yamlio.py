"""YAML in, fast: libyaml's C parser when PyYAML was built with it (about ten times faster on the
playbooks, read on every run), the pure-Python one otherwise. Same safe subset either way."""

from __future__ import annotations

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text):
    """yaml.safe_load, with the C parser where there is one. Raises yaml.YAMLError on bad input."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader, chosen above
