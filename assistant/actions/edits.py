"""Apply a code edit from a report (`debug-stuck fix --apply`): the edit is derived again from the
file as it is now, and refused when the file changed since the report."""

from __future__ import annotations

import hashlib
from typing import Tuple

from debug_stuck.advice.edits import edit_at, read_source


def apply_edit(edit: dict, knowledge) -> Tuple[str, str]:
    """(the diff, the new text) for an edit from a report, re-derived from the file as it is now;
    raises ValueError when the file changed since the report or the edit no longer applies."""
    path = edit["file"]
    text = read_source(path)
    if text is None:
        raise ValueError(f"cannot read {path} (gone, not a regular file, not UTF-8, or over 2 MiB)")
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != edit["sha256"]:
        raise ValueError(f"{path} changed since the report was made: diagnose again")
    book = knowledge.playbooks.get(edit["cause"])
    rules = getattr(book, "edits", None) or []
    if not 0 <= int(edit["rule"]) < len(rules):
        raise ValueError(f"the playbook {edit['cause']} has no edit rule {edit['rule']} any more")
    found = edit_at(edit["cause"], int(edit["rule"]), rules[int(edit["rule"])], path, text, int(edit["line"]))
    if found is None:
        raise ValueError(f"{path}:{edit['line']}: the suggested change no longer applies")
    return found.diff, found.new_text
