"""A Markdown incident report: what happened, why we think so, what to do next."""

from __future__ import annotations

import shlex
import time
from typing import List

from debug_stuck import __version__
from debug_stuck.core.report import Report
from debug_stuck.render.advice import (
    check_heading,
    finding_fixes,
    first_runnable_check,
    fix_heading,
    needs_line,
    safety_phrase,
)
from debug_stuck.render.text import candidates_heading, chain_heading, culprit_line


def _fence(text: str, language: str = "") -> List[str]:
    ticks = "````" if "```" in text else "```"
    return [f"{ticks}{language}", text, ticks]


def _indented(lines: List[str], indent: str) -> List[str]:
    """Lines as the content of a list item: every line of a multi-line entry (a fenced block's
    code) indented alike, so the block stays inside the item and keeps its own indentation."""
    return [indent + line if line.strip() else "" for entry in lines for line in entry.split("\n")]


def _evidence_line(e) -> str:
    where = f" (`{e.file}`" + (f" line {e.line}" if e.line else "") + ")" if e.file else ""
    return f"**{e.source}**: {e.detail}{where}"


def _fix_items(fixes) -> List[str]:
    out: List[str] = []
    for i, fix in enumerate(fixes, 1):
        marker = f"{i}. "
        indent = " " * len(marker)
        out += [f"{marker}**{fix_heading(fix)}**", ""]
        if fix.why:
            out += [f"{indent}{fix.why}", ""]
        for cmd, lang in zip(fix.commands, fix.languages or [""] * len(fix.commands)):
            out += _indented(_fence(cmd, lang), indent)
            out.append("")
        if needs_line(fix.unfilled):
            out += [f"{indent}_{needs_line(fix.unfilled)}_", ""]
    return out


def render_markdown(report: Report) -> str:
    v = report.verdict
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(report.created))
    out: List[str] = [f"# Hang report ({stamp})", ""]
    hung = {True: "yes", False: "no (the job is making progress)", None: "not observed directly"}[v.hung]
    if v.state == "slow":
        hung = "no, but it progresses far below its own rhythm"
    elif v.hung is None and v.state_reasons:
        hung = "undecided: watched, but not told apart from a slow job"
    out += [
        f"- **Hung:** {hung}",
        f"- **Pattern:** {report.pattern or 'unknown (' + (report.pattern_reason or 'not named') + ')'}",
        f"- **Phase:** {v.phase}",
        f"- **Cause:** {v.cause or 'not determined'}" + (f" ({v.confidence:.0%} confidence)" if v.cause else ""),
        "",
        v.summary,
        "",
    ]
    if report.culprit:
        out += [culprit_line(report.culprit).replace("Culprit:", "**Culprit:**", 1), ""]
    if report.chain:
        out += [f"## {chain_heading(v, 'What waits on what')}", ""]
        for i, hop in enumerate(report.chain, 1):
            who = f"rank {hop['rank']} (pid {hop['pid']})" if hop.get("rank") is not None else f"pid {hop['pid']}"
            if hop.get("role") not in (None, "rank"):
                who += f", {hop['role']}"
            where = f" at `{hop['where']}`" if hop.get("where") else ""
            out.append(f"{i}. {who}{where}: {hop['waits_on']['detail']}")
        out.append("")
    if report.stack_groups:
        out += ["## Ranks grouped by stack", ""]
        for g in report.stack_groups:
            out.append(f"- {g['label']}: `{g['top']}`")
        out.append("")
    top = report.diagnoses[0] if report.diagnoses and v.cause else None
    found = finding_fixes(report)
    if found:
        out += ["## Fix for what the job waits on (no cause is named)", ""]
        out += _fix_items(found)
    if top:
        out += [f"## Diagnosis: {top.title}", "", top.summary, "", "### Evidence", ""]
        for e in top.evidence:
            out.append(f"- {_evidence_line(e)}")
            if e.text and e.source in ("log", "kernel"):
                out.append(f"  > `{e.text.strip()[:200]}`")
        out += ["", "### Fix", ""]
        out += _fix_items(top.fixes)
        if top.fixes_left_out:
            out.append(
                "Left out, not for this job: " + "; ".join(f"{f['title']} ({f['why']})" for f in top.fixes_left_out)
            )
            out.append("")
        out += ["### Next command", ""]
        check = first_runnable_check(top)
        if check is not None:
            out += [f"_{check_heading(check)}_", ""] + _fence(check.command, check.language or "bash")
            if check.withheld:
                out += ["", f"_Not now: {check.withheld}_"]
        if top.probe_items:
            out += ["", "Targeted probes that settle it:", ""]
            out += [
                f"- `{p.get('command') or 'debug-stuck probe ' + p['name']}`: {safety_phrase(p.get('safety'))}"
                for p in top.probe_items
            ]
        out += ["", f"Full playbook: `{top.playbook}`", ""]
    if report.edits:
        out += [
            "## Edit in your code",
            "",
            "Nothing is written; `debug-stuck fix --report FILE --apply` once the job has stopped.",
            "",
        ]
        for edit in report.edits:
            out += [f"`{edit['file']}` line {edit['line']} ({edit['found']}): {edit['why']}", ""]
            out += _fence(edit["diff"].rstrip("\n"), "diff") + [""]
    if report.probes:
        out += ["## Probes run", ""]
        for probe in report.probes:
            status = str(probe.get("status", "?")).upper()
            out.append(f"- **{probe.get('name')}**: {status}: {probe.get('summary', '')}")
            for finding in (probe.get("findings") or [])[:8]:
                out.append(f"  - {finding.get('severity', 'info')}: {finding.get('message', '')}")
        out.append("")
    others = report.diagnoses[1:] if top else report.diagnoses
    if others:
        out += [f"## {candidates_heading(v, 'Other candidates')}", ""]
        for d in others:
            out.append(f"- **{d.cause}** ({d.confidence:.0%}): {d.title}")
            out += [f"  - {_evidence_line(e)}" for e in d.evidence] or ["  - no evidence of its own"]
        out.append("")
    if report.processes:
        out += [
            "## Processes",
            "",
            "| pid | role | rank | state | CPU % | stack | wchan |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for p in report.processes:
            rank = "" if p.get("rank") is None else p["rank"]
            cpu = "" if p.get("cpu_percent") is None else f"{p['cpu_percent']:.0f}"
            cells = [p["pid"], p["role"], rank, p["state"], cpu, p.get("stack", ""), p.get("wchan") or ""]
            out.append("| " + " | ".join(str(c) for c in cells) + " |")
        out.append("")
    if report.resume:
        out += render_resume(report.resume)
    if report.answers:
        out += ["## Triage answers", "", "| question | answer | from |", "| --- | --- | --- |"]
        for key, a in report.answers.items():
            src = a["source"] + (f": {a['why']}" if a.get("why") else "")
            out.append(f"| {key} | {a['value']} | {src.replace('|', '/')} |")
        out.append("")
    if report.next_questions:
        out += ["## Worth answering", ""]
        for q in report.next_questions:
            out.append(f"- `{q['key']}` ({' / '.join(q['values'])}): {q['text']} *{q['why']}*")
        out.append("")
    if report.logs:
        out += ["## Logs read", ""]
        for log in report.logs:
            prog = log.get("progress", {})
            bits = [f"{log['lines']} lines"]
            if "last_step" in prog:
                bits.append(f"last step {prog['last_step']}")
            if "seconds_since_modified" in log:
                bits.append(f"last changed {log['seconds_since_modified']:.0f} s before this report")
            out.append(f"- `{log['path']}`: " + ", ".join(bits))
            if log.get("last_line"):
                out.append(f"  last line: `{log['last_line'][:200]}`")
        out.append("")
    if report.missing:
        out += ["## Missing evidence", ""]
        out += [f"- {m['what']}: {m['why']}. To get it: {m['get_it']}" for m in report.missing] + [""]
    if report.errors:
        out += ["## Could not collect", ""] + [f"- {e}" for e in report.errors] + [""]
    out.append(f"*debug-stuck {__version__}*")
    return "\n".join(out) + "\n"


def render_resume(resume: dict) -> List[str]:
    """The report's `resume` object as a Markdown section."""
    out = ["## Resume", ""]
    if resume.get("finished"):
        out.append(f"- **Not needed:** {resume['finished']}")
    out.append(f"- **Framework:** {resume.get('framework')} (launcher: {resume.get('launcher')})")
    out.append(f"- **Checkpoint:** {resume.get('checkpoint') or 'none usable'}")
    if resume.get("lost"):
        out.append(f"- **Lost:** {resume['lost']}")
    for skipped in resume.get("skipped") or []:
        out.append(f"- **Skipped:** `{skipped.get('path')}`: {skipped.get('problem')}")
    for note in resume.get("notes") or []:
        out.append(f"- {note}")
    if resume.get("command"):
        cwd = resume.get("cwd")
        out += ["", "```bash", (f"cd {shlex.quote(cwd)}\n" if cwd else "") + resume["command"], "```"]
    out.append("")
    return out
