"""A fix for this job: the playbooks' commands filled with its PIDs, paths and command, only the
fixes that apply to its framework and command, checks that would disturb it held back, and the
edit in the user's own code where the stack shows it (``debug_stuck.advice.edits``).

``advise(report)`` runs last on every report (after the resume plan, which it reads), on
whatever the report holds: a live job fills nearly everything, a log alone fills little and says
what is missing.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from typing import List, Optional

from debug_stuck.advice.applies import APPLIES, NOT_HERE, job_flag_spelling, judge, order
from debug_stuck.advice.facts import JobFacts, gather_facts
from debug_stuck.advice.fill import fill, without_a_pause
from debug_stuck.contract import SAFETY_LABELS
from debug_stuck.recovery.commandline import set_option

SAFETY_ORDER = list(SAFETY_LABELS)  # strongest first


def personalize(report, knowledge=None) -> JobFacts:
    facts = gather_facts(report)
    report.job = facts.to_dict()
    for diagnosis in report.diagnoses:
        _personalize_fixes(diagnosis, facts)
        _personalize_checks(diagnosis, facts, report)
    if report.diagnoses:
        _lead_with_the_finding(report, facts, knowledge)
    for diagnosis in report.diagnoses:
        _read_without_a_pause(diagnosis, facts)
        _drop_repeated_commands(diagnosis)
    from debug_stuck.advice.edits import propose_edits

    report.edits = [e.to_dict() for e in propose_edits(report, facts, knowledge)]
    return facts


def advise(report, knowledge=None):
    """The advice filled for this job: the pipeline's last stage, after the resume plan it reads."""
    try:
        personalize(report, knowledge)
    except Exception as exc:  # the diagnosis stands with the playbooks' generic commands
        report.errors.append(f"advice: could not fill the fixes for this job: {type(exc).__name__}: {exc}")
    return report


def _personalize_fixes(diagnosis, facts: JobFacts) -> None:
    judged = []
    left_out = []
    for fix in diagnosis.fixes:
        verdict, why = judge(fix.applies, fix.flag, facts.context, facts.argv, facts.uses)
        if verdict == NOT_HERE:
            left_out.append({"title": fix.title, "why": why})
            continue
        judged.append((fix, verdict, why))
    fixes = []
    for fix, verdict, why in order(judged):
        fix.condition = None if verdict == APPLIES else why
        n = len(fix.commands)
        languages = fix.languages or [""] * n
        safeties = fix.safety if len(fix.safety) == n else [None] * n
        kept, unfilled = [], []
        for text, language, safety in zip(fix.commands, languages, safeties):
            text = _with_flag(text, fix.flag, facts) if fix.flag else text
            filled, missing = fill(text, facts.values, language)
            if endangers(filled, facts.valid_checkpoint, facts.cwd):
                why = (
                    f"a command that would move or remove {facts.valid_checkpoint}, "
                    "the checkpoint resume starts from, is left out"
                )
                fix.condition = f"{fix.condition}; {why}" if fix.condition else why
                continue
            kept.append((filled, language, safety))
            unfilled += [m for m in missing if m not in unfilled]
        fix.commands = [c for c, _, _ in kept]
        fix.languages = [lang for _, lang, _ in kept] if fix.languages else []
        if len(fix.safety) == n:
            fix.safety = [_filled_note(s, facts) for _, _, s in kept]
        else:
            fix.safety = [_filled_note(s, facts) for s in fix.safety]
        fix.unfilled = unfilled
        fixes.append(fix)
    diagnosis.fixes = fixes
    diagnosis.fixes_left_out = left_out


def _lead_with_the_finding(report, facts: JobFacts, knowledge) -> None:
    """The first fix is about the object the wait ends at (advice.remedy), when the report has a
    chain; the cause's playbook fixes follow it."""
    from debug_stuck.advice.remedy import remedy_for

    if not report.verdict.hung and report.verdict.state != "hung":
        return
    fix = remedy_for(report, facts, knowledge)
    if fix is None:
        return
    kept = [(c, lang, s) for c, lang, s in zip(fix.commands, fix.languages, fix.safety)]
    safe = [(c, lang, s) for c, lang, s in kept if not endangers(c, facts.valid_checkpoint, facts.cwd)]
    fix.commands = [c for c, _, _ in safe]
    fix.languages = [lang for _, lang, _ in safe]
    fix.safety = [s for _, _, s in safe]
    covered = set(getattr(fix, "covers", ()))
    first = report.diagnoses[0]
    first.fixes = [fix] + [f for f in first.fixes if f.title not in covered]


def _read_without_a_pause(diagnosis, facts: JobFacts) -> None:
    """No check or fix pauses a process that is part-way through a write (advice.fill.without_a_pause)."""
    if not facts.writing_pids:
        return
    for fix in diagnosis.fixes:
        fix.commands = [without_a_pause(c, facts.writing_pids) for c in fix.commands]
    for item in diagnosis.check_items:
        item.command = without_a_pause(item.command, facts.writing_pids)
    diagnosis.checks = [item.command for item in diagnosis.check_items]


def _drop_repeated_commands(diagnosis) -> None:
    """A command printed by an earlier fix is not printed again; a fix left with nothing to run goes."""
    seen = set()
    fixes = []
    for fix in diagnosis.fixes:
        rows = list(
            zip(fix.commands, fix.languages or [""] * len(fix.commands), fix.safety or [None] * len(fix.commands))
        )
        kept = []
        for row in rows:
            key = " ".join(row[0].split())
            if key in seen:
                continue
            seen.add(key)
            kept.append(row)
        if len(kept) == len(rows):
            fixes.append(fix)
            continue
        if not kept:
            continue
        fix.commands = [c for c, _, _ in kept]
        fix.languages = [lang for _, lang, _ in kept] if fix.languages else []
        fix.safety = [s for _, _, s in kept] if fix.safety else []
        fixes.append(fix)
    diagnosis.fixes = fixes


DESTRUCTIVE = re.compile(
    r"(?:^|[\s;&|(])(?:mv|rm|unlink|shred|truncate|rmdir)\s"
    r"|os\.(?:remove|unlink|replace|rename)\(|shutil\.(?:move|rmtree)\(|\.unlink\(|\.rename\("
)


def endangers(command: str, valid: Optional[str], cwd: Optional[str] = None) -> bool:
    """Would this command move or remove the valid checkpoint (or a folder holding it)? A word
    names it by its path, by a path relative to the job's folder `cwd` (or to a `cd` earlier in
    the command), or by a glob that matches it or a folder above it (`rm ckpt_*.pt`); a bare
    name, when no folder is known, counts when it is the checkpoint's own name or matches it."""
    if not valid or not DESTRUCTIVE.search(command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    valid = os.path.normpath(valid)
    above = [valid]
    while os.path.dirname(above[-1]) not in (above[-1], ""):
        above.append(os.path.dirname(above[-1]))
    here, previous = cwd, None
    for word in words:
        token = word.strip("'\"(),;&|").rstrip("/")
        if previous == "cd" and token:
            here = os.path.normpath(os.path.join(here or "", token)) if (here or os.path.isabs(token)) else None
        previous = token
        if not token or token.startswith("-"):
            continue
        paths = [token] if os.path.isabs(token) or not here else [os.path.normpath(os.path.join(here, token))]
        for path in paths:
            if _names_one_of(path, above):
                return True
        if not here and not os.path.isabs(token) and "/" not in token:
            if _names_one_of(token, [os.path.basename(valid)]):
                return True
    return valid in command


def _names_one_of(path: str, targets: List[str]) -> bool:
    if any(c in path for c in "*?["):
        return any(fnmatch.fnmatchcase(target, path) for target in targets)
    return path in targets


def _with_flag(text: str, flag: str, facts: JobFacts) -> str:
    """`{launch_command} --num-workers 0` -> the job's own command with that option set (its own
    spelling, its old value replaced), instead of the option appended a second time."""
    spelled = job_flag_spelling(facts.argv, flag) if facts.argv else None
    if spelled is None:
        return text
    names = {flag, flag.replace("-", "_"), flag.replace("_", "-")}
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = re.compile(r"\{launch_command\}\s+(" + alternatives + r")(?:[ =](\S+))?")
    match = pattern.search(text)
    if match is None:
        return text
    argv = set_option(list(facts.argv), spelled, match.group(2), aliases=names)
    return text[: match.start()] + shlex.join(argv) + text[match.end() :]


def _personalize_checks(diagnosis, facts: JobFacts, report) -> None:
    blocked = facts.values.get("blocked_path")
    items = []
    for item in diagnosis.check_items:
        item.command, item.unfilled = fill(item.command, facts.values, item.language)
        item.safety = _filled_note(item.safety, facts)
        if blocked and blocked in item.command and item.safety.get("label") != "reads":
            item.withheld = (
                f"the job is blocked on {blocked}: opening it may unblock or kill the job; "
                "run this only after the job is stopped"
            )
        items.append(item)
    # runnable first: not withheld, nothing left to fill; the playbook's order otherwise
    items.sort(key=lambda c: (c.withheld is not None, bool(c.unfilled)))
    diagnosis.check_items = items
    diagnosis.checks = [c.command for c in items]
    for probe in diagnosis.probe_items:
        probe["command"] = _probe_command(probe["name"], facts)


def _filled_note(safety: dict, facts: JobFacts) -> dict:
    if not safety or not safety.get("note"):
        return safety
    return dict(safety, note=fill(safety["note"], facts.values, "text")[0])


def _probe_command(name: str, facts: JobFacts) -> str:
    from debug_stuck.probes.targeted.registry import probe_spec

    spec = probe_spec(name)
    parts = ["debug-stuck", "probe", name]
    given = []
    if "pid" in spec.inputs:
        # a known PID fills it; otherwise the placeholder says a value is needed (a bare command may not run)
        parts += ["--pid", facts.values.get("pid") or "{pid}"]
        given.append("pid")
    if spec.runs_user_code_with(given):
        parts.append("--allow-exec")
    return " ".join(parts)


__all__ = ["JobFacts", "advise", "gather_facts", "personalize"]
