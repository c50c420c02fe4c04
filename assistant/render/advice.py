"""How a fix, a check, a probe and a code edit read in every front end: the command as it will
run, its safety label, what it still needs, and why a check is held back."""

from __future__ import annotations

from typing import List, Optional


def safety_phrase(safety: Optional[dict]) -> str:
    if not safety:
        return ""
    note = safety.get("note")
    return f"{safety.get('text', safety.get('label', ''))}: {note}" if note else safety.get("text", "")


def fix_heading(fix) -> str:
    """`Title (if you use kohya) [reads only]`: the strongest label of its commands."""
    texts = [s.get("text", "") for s in fix.safety if s]
    quiet = "; nothing runs now"
    labels = list(dict.fromkeys(t.removesuffix(quiet) for t in texts))
    # "an edit to your code; a setting for the next run; nothing runs now", said once
    if labels and all(t.endswith(quiet) for t in texts):
        labels[-1] += quiet
    condition = f" ({fix.condition})" if fix.condition else ""
    return f"{fix.title}{condition}" + (f" [{'; '.join(labels)}]" if labels else "")


def needs_line(unfilled: List[str]) -> Optional[str]:
    if not unfilled:
        return None
    from debug_stuck.contract import PLACEHOLDERS

    what = "; ".join(f"{{{n}}} = {PLACEHOLDERS.get(n, n)}" for n in unfilled)
    return f"needs a value the report could not know: {what}"


def check_heading(check) -> str:
    text = safety_phrase(check.safety)
    return f"[{text}]" if text else ""


def first_runnable_check(diagnosis):
    """The check to show first: one that can run now, as printed; else the first."""
    for item in diagnosis.check_items:
        if item.withheld is None:
            return item
    return diagnosis.check_items[0] if diagnosis.check_items else None


def probe_line(probe: dict) -> str:
    command = probe.get("command") or f"debug-stuck probe {probe['name']}"
    return f"{command}   [{safety_phrase(probe.get('safety'))}]"


def edit_heading(edit: dict) -> str:
    return f"{edit['file']}:{edit['line']} ({edit['found']}): {edit['why']}"


def finding_fixes(report) -> list:
    """With no cause named, the fixes written for what the job was seen waiting on (a dead child, a
    peer): they hold whatever the cause, so every front end shows them. A job that moves has none."""
    if report.verdict.cause or report.verdict.state == "progressing" or not report.diagnoses:
        return []
    return [fix for fix in report.diagnoses[0].fixes if fix.origin == "finding"]


def prior_note(diagnosis) -> str:
    """Said beside a candidate whose only support is the triage answers' prior: nothing seen in the
    job points at it."""
    if diagnosis.evidence and all(e.source == "answer" for e in diagnosis.evidence):
        return " [the triage answers' prior only: nothing in the job points at it]"
    return ""
