"""Plain-text rendering of a report, for terminals and CI logs."""

from __future__ import annotations

import textwrap
from typing import List

from assistant.report import Report

MAX_FIXES = 3
MAX_EVIDENCE = 6


def _hung_word(hung) -> str:
    return {True: "HUNG", False: "progressing", None: "not observed"}[hung]


def _where(e) -> str:
    if e.file and e.line:
        return f" ({e.file.rsplit('/', 1)[-1]}:{e.line})"
    if e.file:
        return f" ({e.file.rsplit('/', 1)[-1]})"
    return ""


def _indent(text: str, prefix: str) -> str:
    return textwrap.indent(text, prefix)


def render_text(report: Report) -> str:
    v = report.verdict
    out: List[str] = []
    head = f"Verdict: {_hung_word(v.hung)}"
    head += f" | pattern {report.pattern or '?'} | phase {v.phase}"
    out.append(head)
    out.append(textwrap.fill(v.summary, width=100))
    top = report.diagnoses[0] if report.diagnoses and v.cause else None
    if top:
        out.append("")
        out.append(f"Cause: {top.cause} - {top.title} ({top.confidence:.0%})")
        out.append("Evidence:")
        for e in top.evidence[:MAX_EVIDENCE]:
            out.append(f"  - [{e.source}] {e.detail}{_where(e)}")
        if len(top.evidence) > MAX_EVIDENCE:
            out.append(f"  ... {len(top.evidence) - MAX_EVIDENCE} more in the JSON report")
        out.append("Fix:")
        for i, fix in enumerate(top.fixes[:MAX_FIXES], 1):
            out.append(f"  {i}. {fix.title}")
            for cmd in fix.commands:
                out.append(_indent(cmd, "       "))
        if len(top.fixes) > MAX_FIXES:
            out.append(f"  ... {len(top.fixes) - MAX_FIXES} more fixes in {top.playbook}")
        if top.checks:
            out.append("Confirm with:")
            out.append(_indent(top.checks[0], "    "))
        out.append(f"Playbook: {top.playbook}")
    others = report.diagnoses[1:] if top else report.diagnoses
    if others:
        out.append("")
        out.append("Other candidates:")
        for d in others[:5]:
            out.append(f"  - {d.cause} ({d.confidence:.0%}): {d.title}")
    if report.answers:
        out.append("")
        parts = [f"{k}={a['value']} ({a['source']})" for k, a in report.answers.items()]
        out.append("Answers: " + ", ".join(parts))
    if report.next_questions:
        out.append("Worth answering (rerun with --answer KEY=VALUE):")
        for q in report.next_questions:
            values = "|".join(q["values"])
            out.append(f"  - {q['key']} ({values}): {q['text']}")
    for log in report.logs:
        line = f"Log {log['path']}: {log['lines']} lines read"
        prog = log.get("progress", {})
        if "last_step" in prog:
            line += f", last step {prog['last_step']}"
        if "seconds_since_modified" in log:
            line += f", last changed {log['seconds_since_modified']:.0f} s ago"
        out.append(line)
    if report.errors:
        out.append("")
        out.append("Could not collect:")
        out.extend(f"  - {e}" for e in report.errors)
    return "\n".join(out) + "\n"
