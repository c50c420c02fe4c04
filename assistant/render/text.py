"""Plain-text rendering of a report, for terminals and CI logs."""

from __future__ import annotations

import textwrap
from typing import Callable, List, Optional

from debug_stuck.core.report import Report
from debug_stuck.render.advice import (
    check_heading,
    edit_heading,
    finding_fixes,
    first_runnable_check,
    fix_heading,
    needs_line,
    prior_note,
    probe_line,
)

MAX_FIXES = 3
MAX_EVIDENCE = 6


def clip(text: str, width: int) -> str:
    """One line of at most `width` characters (whitespace folded, "..." where it was cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(1, width - 3)] + "..."


def _state_word(verdict) -> str:
    if verdict.state == "slow":
        return "SLOW (progressing far below its own rhythm)"
    if verdict.hung is None and verdict.state_reasons:
        return "UNDECIDED (watched, not told apart from a slow job)"
    return {True: "HUNG", False: "progressing", None: "not observed"}[verdict.hung]


def chain_heading(verdict, heading: str) -> str:
    """A moving job's chain is where a sample caught it, not what it is stuck on."""
    return "Caught waiting (the job moves on: one sample, not a hang)" if verdict.hung is False else heading


def candidates_heading(verdict, heading: str) -> str:
    return "Should it stop, look first at (candidates, nothing found wrong)" if verdict.hung is False else heading


def chain_lines(chain: List[dict]) -> List[str]:
    """The chain, one hop a line, from the first waiter to the terminal blocker."""
    out = []
    for i, hop in enumerate(chain):
        who = hop.get("who")
        if not who:
            who = f"rank {hop['rank']} pid {hop['pid']}" if hop.get("rank") is not None else f"pid {hop['pid']}"
            who += f" ({hop['role']})" if hop.get("role") not in (None, "rank") else ""
            thread = hop.get("thread") or {}
            if thread.get("tid") and thread.get("tid") != hop["pid"]:
                who += f" thread {thread.get('name')!r}"
        arrow = "  -> " if i else "  "
        where = f" [{hop['where']}]" if hop.get("where") else ""
        out.append(f"{arrow}{who} {hop['waits_on']['detail']}{where}")
    return out


def _where(e) -> str:
    if e.file and e.line:
        return f" ({e.file.rsplit('/', 1)[-1]}:{e.line})"
    if e.file:
        return f" ({e.file.rsplit('/', 1)[-1]})"
    return ""


def _indent(text: str, prefix: str) -> str:
    return textwrap.indent(text, prefix)


BUSY_PERCENT = 80.0  # debug_stuck.live.observe.CPU_BUSY: the renderers do not import the live analysis


def doing_phrase(process: dict) -> str:
    """What a process is doing, in one phrase: its main thread's innermost Python frames and
    whether its stack moved, else the kernel function it sleeps in."""
    threads = process.get("threads") or []
    main = next((t for t in threads if t.get("tid") == process.get("pid")), threads[0] if threads else None)
    motion = process.get("stack")
    if main:
        frames = [f for f in main.get("frames", []) if not f.get("native")]
        if frames:
            chain = " <- ".join(f["function"].rsplit(".", 1)[-1] for f in frames[:3])
            where = f"{frames[0]['file'].rsplit('/', 1)[-1]}:{frames[0]['line']}" if frames[0].get("line") else ""
            text = f"{chain} ({where})" if where else chain
            if motion == "frozen" and (process.get("cpu_percent") or 0) >= BUSY_PERCENT:
                motion = "same Python frames, busy in native code"  # a long native call is not a frozen process
            return f"{text} [{motion}]" if motion and motion != "unknown" else text
        native = [f for f in main.get("frames", []) if f.get("native")]
        if native:  # a main thread with no Python frame left: the interpreter's own teardown
            return f"no Python frame; native {native[0]['function']}"
    if process.get("state") == "Z":
        return "exited, not reaped (zombie)"
    if process.get("wchan"):
        return f"kernel wait in {process['wchan']}"
    return process.get("stack_error") or "no stack read"


# The triage patterns and phases in the words of the person at the terminal (docs/contract.md).
PATTERN_WORDS = {
    "A": "hangs before the first training step",
    "B": "stops mid-run with the GPU idle",
    "C": "stops mid-run with the GPU busy",
    "D": "stops at the same step every time",
    "E": "stops at random steps, with hardware or network errors",
}
PHASE_WORDS = {
    "startup": "while starting up",
    "data": "while loading data",
    "step": "inside a training step",
    "validation": "during validation",
    "sampling": "while sampling",
    "checkpoint": "while saving a checkpoint",
    "shutdown": "while shutting down",
}


def session_headline(report: Report) -> str:
    """The session's first line, in words: "HUNG while loading data; stops mid-run with the GPU idle".
    What is not known is left out, not named as unknown."""
    v = report.verdict
    parts = [_state_word(v) if v.state or v.hung is not None or v.state_reasons else "not observed live"]
    phase = PHASE_WORDS.get(v.phase or "")
    if phase:
        parts[0] += f" {phase}"
    if report.pattern in PATTERN_WORDS:
        parts.append(f"it {PATTERN_WORDS[report.pattern]}")
    return "; ".join(parts)


def _fix_lines(fixes) -> List[str]:
    out: List[str] = []
    for i, fix in enumerate(fixes, 1):
        out.append(f"  {i}. {fix_heading(fix)}")
        if fix.why:
            out.append(textwrap.fill(fix.why, 100, initial_indent="     ", subsequent_indent="     "))
        for cmd in fix.commands:
            out.append(_indent(cmd, "       "))
        if needs_line(fix.unfilled):
            out.append(f"       ({needs_line(fix.unfilled)})")
    return out


def render_text(
    report: Report,
    *,
    headline: Optional[str] = None,
    probe_details: Optional[Callable[[dict], List[str]]] = None,
) -> str:
    """The report as text. `headline` replaces the first line (the session says it in words, not
    pattern letters and phase ids); `probe_details(probe)` gives lines to print under each probe's."""
    v = report.verdict
    out: List[str] = []
    if headline is None:
        head = f"Verdict: {_state_word(v)}"
        pattern = (
            f"pattern {report.pattern}" if report.pattern else f"no pattern ({report.pattern_reason or 'not named'})"
        )
        headline = f"{head} | {pattern} | phase {v.phase}"
    out.append(headline)
    out.append(textwrap.fill(v.summary, width=100, break_on_hyphens=False, break_long_words=False))
    if report.culprit:
        out.append(culprit_line(report.culprit))
    if report.chain:
        out.append(chain_heading(v, "Waits on") + ":")
        out.extend(chain_lines(report.chain))
    if len(report.stack_groups) > 1:
        out.append("Stack groups:")
        for g in report.stack_groups:
            out.append(f"  - {g['label']}: {g['top']}")
    if report.processes:
        out.append("")
        out.append(f"{'pid':>8} {'role':18} {'rank':>4} {'st':2} {'cpu%':>6}  doing")
        for p in report.processes[:16]:
            doing = doing_phrase(p)
            rank = "" if p.get("rank") is None else p["rank"]
            cpu = "" if p.get("cpu_percent") is None else f"{p['cpu_percent']:.0f}"
            out.append(f"{p['pid']:>8} {p['role']:18} {rank!s:>4} {p['state']:2} {cpu:>6}  {doing}")
        if len(report.processes) > 16:
            out.append(f"  ... {len(report.processes) - 16} more processes in the JSON report")
    top = report.diagnoses[0] if report.diagnoses and v.cause else None
    found = finding_fixes(report)
    if found:
        out.append("")
        out.append("Fix (for what the job waits on; no cause is named):")
        out.extend(_fix_lines(found))
    if top:
        out.append("")
        out.append(f"Cause: {top.cause} - {top.title} ({top.confidence:.0%})")
        out.append("Evidence:")
        for e in top.evidence[:MAX_EVIDENCE]:
            out.append(f"  - [{e.source}] {e.detail}{_where(e)}")
        if len(top.evidence) > MAX_EVIDENCE:
            out.append(f"  ... {len(top.evidence) - MAX_EVIDENCE} more in the JSON report")
        out.append("Fix:")
        out.extend(_fix_lines(top.fixes[:MAX_FIXES]))
        if len(top.fixes) > MAX_FIXES:
            out.append(f"  ... {len(top.fixes) - MAX_FIXES} more fixes in {top.playbook}")
        if top.fixes_left_out:
            left = "; ".join(f"{f['title']} ({f['why']})" for f in top.fixes_left_out[:3])
            out.append(f"  Left out, not for this job: {left}")
        check = first_runnable_check(top)
        if check is not None:
            out.append(f"Confirm with: {check_heading(check)}")
            out.append(_indent(check.command, "    "))
            if needs_line(check.unfilled):
                out.append(f"    ({needs_line(check.unfilled)})")
            if check.withheld:
                out.append(f"    (not now: {check.withheld})")
        if top.probe_items:
            out.append("Settle it with:")
            out.extend(f"    {probe_line(p)}" for p in top.probe_items)
        out.append(f"Playbook: {top.playbook}")
    if report.edits:
        out.append("")
        out.append("Edit in your code (nothing is written; debug-stuck fix --apply after the job stopped):")
        for edit in report.edits:
            out.append(f"  {edit_heading(edit)}")
            out.append(_indent(edit["diff"].rstrip("\n"), "    "))
    others = report.diagnoses[1:] if top else report.diagnoses
    if others:
        out.append("")
        out.append(candidates_heading(v, "Other candidates") + ":")
        for d in others[:5]:
            out.append(f"  - {d.cause} ({d.confidence:.0%}): {d.title}{prior_note(d)}")
    if report.answers:
        out.append("")
        parts = [f"{k}={a['value']} ({a['source']})" for k, a in report.answers.items()]
        out.append("Answers: " + ", ".join(parts))
    if report.next_questions:
        out.append("Worth answering (rerun with --answer KEY=VALUE):")
        for q in report.next_questions:
            values = "|".join(q["values"])
            probe = f" (or: debug-stuck probe {q['probes'][0]})" if q.get("probes") else ""
            out.append(f"  - {q['key']} ({values}): {q['text']}{probe}")
    for log in report.logs:
        line = f"Log {log['path']}: {log['lines']} lines read"
        prog = log.get("progress", {})
        if "last_step" in prog:
            line += f", last step {prog['last_step']}"
        if "seconds_since_modified" in log:
            line += f", last changed {log['seconds_since_modified']:.0f} s ago"
        out.append(line)
    if report.resume:
        r = report.resume
        out.append("")
        what = f"from {r['checkpoint']}" if r.get("checkpoint") else (r.get("lost") or "no usable checkpoint")
        out.append(f"Resume ({r.get('framework')}, {what}):")
        if r.get("finished"):
            out.append(f"    Not needed: {r['finished']}")
        if r.get("command"):
            out.append(f"    {'to train again anyway: ' if r.get('finished') else ''}{r['command']}")
    for probe in report.probes:
        out.append(f"Probe {probe['name']}: {probe['status'].upper()}: {probe['summary']}")
        if probe_details is not None:
            out.extend(probe_details(probe))
    for item in report.missing:
        out.append(f"Missing: {item['what']}: {item['why']}")
        out.append(f"  To get it: {item['get_it']}")
    if report.notes:
        out.append("")
        out.extend(f"Note: {n}" for n in report.notes)
    if report.errors:
        out.append("")
        out.append("Could not collect:")
        out.extend(f"  - {e}" for e in report.errors)
    return "\n".join(out) + "\n"


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


def culprit_line(culprit: dict) -> str:
    """ "Culprit: rank 1 (node-3, pid 6053): why" -- the process the others wait for, however it was
    found (its stack, the chain's end, the Flight Recorder), said the same in every front end."""
    pid, rank, host = culprit.get("pid"), culprit.get("rank"), culprit.get("host")
    where = ", ".join(str(x) for x in (host, f"pid {pid}" if pid is not None else None) if x)
    if rank is not None:
        who = f"rank {rank}" + (f" ({where})" if where else "")
    elif pid is not None:
        who = f"pid {pid}" + (f" ({host})" if host else "")
    else:
        who = "a rank"
    reason = culprit.get("reason")
    if not reason and culprit.get("source") == "flight-recorder":
        what = " ".join(
            str(x) for x in (culprit.get("collective"), f"#{culprit['seq']}" if culprit.get("seq") else None) if x
        )
        reason = f"{culprit.get('state') or 'the odd one out'} (Flight Recorder{', ' + what if what else ''})"
    return f"Culprit: {who}: {reason or 'the others wait for it'}"
