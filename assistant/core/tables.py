"""The knowledge tables that are data, not code (`skills/data/*.yaml`), checked against their shape.
Pure: debug_stuck.kb reads them.

- `xid.yaml`: what each NVIDIA Xid number means and what to do (the gpu-health probe);
- `env-audit.yaml`: the settings the env probe flags, each tied to its playbook;
- `phases.yaml`: how a checkpoint save or a validation pass looks on a stack (watch, the report);
- `remedies.yaml`: the first fix of a live diagnosis, keyed on the end of the wait (debug_stuck.advice.remedy);
- `log-catalog.yaml`, `frames.yaml`: the libraries' own messages and frames (debug_stuck.core.facts), checked
  here so that a broken entry is reported instead of silently turning the facts off.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Tuple

from debug_stuck.contract import CAUSE_IDS, FIX_CONTEXT

SEVERITIES = ("info", "warn", "fail")
ENV_CONDITIONS = ("unset", "set", "on", "off", "above-cores", "no-interface", "unset-or-zero", "one-of")
LIMITS = ("shm", "nofile", "memlock")

TableProblem = Tuple[str, str, str]  # (file, field, message)


def _regex(file: str, field: str, value, problems: List[TableProblem]):
    if not isinstance(value, str) or not value:
        problems.append((file, field, "required, a regular expression"))
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        problems.append((file, field, f"bad regular expression: {exc}"))
        return None


def _check_xid(data: dict, file: str) -> List[TableProblem]:
    problems: List[TableProblem] = []
    codes = data.get("codes")
    if not isinstance(codes, dict) or not codes:
        return [(file, "codes", "required, a mapping of Xid number to severity, meaning, advice")]
    for number, entry in codes.items():
        where = f"codes.{number}"
        if not isinstance(number, int):
            problems.append((file, where, "an Xid is a number"))
        if not isinstance(entry, dict):
            problems.append((file, where, "must hold severity, meaning, advice"))
            continue
        if entry.get("severity") not in SEVERITIES:
            problems.append((file, f"{where}.severity", f"one of {', '.join(SEVERITIES)}"))
        for key in ("meaning", "advice"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                problems.append((file, f"{where}.{key}", "required, a sentence"))
    unknown = data.get("unknown")
    if not isinstance(unknown, dict) or unknown.get("severity") not in SEVERITIES or not unknown.get("advice"):
        problems.append((file, "unknown", "required: severity and advice for an Xid the table lacks"))
    return problems


def _check_env(data: dict, file: str) -> List[TableProblem]:
    problems: List[TableProblem] = []
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        return [(file, "rules", "required, a list of rules")]
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(rule, dict):
            problems.append((file, where, "must be a mapping"))
            continue
        if ("var" in rule) == ("limit" in rule):
            problems.append((file, where, "give `var` (a variable or a list) or `limit`, not both"))
        if "var" in rule:
            names = rule["var"] if isinstance(rule["var"], list) else [rule["var"]]
            if not names or not all(isinstance(n, str) and n for n in names):
                problems.append((file, f"{where}.var", "a variable name or a list of them"))
            if rule.get("when") not in ENV_CONDITIONS:
                problems.append((file, f"{where}.when", f"one of {', '.join(ENV_CONDITIONS)}"))
            if rule.get("when") == "one-of" and not isinstance(rule.get("values"), list):
                problems.append((file, f"{where}.values", "one-of needs a list of values"))
        if "limit" in rule:
            if rule["limit"] not in LIMITS:
                problems.append((file, f"{where}.limit", f"one of {', '.join(LIMITS)}"))
            if not isinstance(rule.get("below"), int):
                problems.append((file, f"{where}.below", "required, a number"))
        if rule.get("severity") not in SEVERITIES:
            problems.append((file, f"{where}.severity", f"one of {', '.join(SEVERITIES)}"))
        if rule.get("cause") not in CAUSE_IDS:
            problems.append((file, f"{where}.cause", "a cause id"))
        if not isinstance(rule.get("message"), str) or not rule["message"]:
            problems.append((file, f"{where}.message", "required, a sentence"))
    return problems


def _check_phases(data: dict, file: str) -> List[TableProblem]:
    problems: List[TableProblem] = []
    save, validation = data.get("checkpoint"), data.get("validation")
    if not isinstance(save, dict):
        problems.append((file, "checkpoint", "required: playbook, min_weight, function, skip_files"))
    else:
        if save.get("playbook") not in CAUSE_IDS:
            problems.append((file, "checkpoint.playbook", "a cause id"))
        if not isinstance(save.get("min_weight"), (int, float)):
            problems.append((file, "checkpoint.min_weight", "required, a number"))
        _regex(file, "checkpoint.function", save.get("function"), problems)
        _regex(file, "checkpoint.skip_files", save.get("skip_files"), problems)
    if not isinstance(validation, dict):
        problems.append((file, "validation", "required: function, file"))
    else:
        _regex(file, "validation.function", validation.get("function"), problems)
        _regex(file, "validation.file", validation.get("file"), problems)
        for key in ("skip_files", "no_grad_frame", "no_grad_function"):  # optional
            if validation.get(key) is not None:
                _regex(file, f"validation.{key}", validation.get(key), problems)
    sampling = data.get("sampling")
    if sampling is not None:
        if not isinstance(sampling, dict):
            problems.append((file, "sampling", "optional: a mapping with `function`"))
        else:
            _regex(file, "sampling.function", sampling.get("function"), problems)
    return problems


REMEDY_SAFETY = ("reads", "disturbs", "changes", "stops-job", "edit", "config", "writes-temp", "runs-code")


def _check_remedies(data: dict, file: str) -> List[TableProblem]:
    problems: List[TableProblem] = []
    entries = data.get("remedies")
    if not isinstance(entries, list) or not entries:
        return [(file, "remedies", "required, a list of remedies (id, when, title, why, steps, source)")]
    seen = set()
    for i, entry in enumerate(entries):
        where = f"remedies[{i}]"
        if not isinstance(entry, dict):
            problems.append((file, where, "must be a mapping"))
            continue
        if entry.get("id") in seen:
            problems.append((file, f"{where}.id", f"duplicate id {entry.get('id')!r}"))
        seen.add(entry.get("id"))
        _regex(file, f"{where}.when", entry.get("when"), problems)
        for key in ("id", "title", "why", "source"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                problems.append((file, f"{where}.{key}", "required, a string"))
        covers = entry.get("covers", [])
        if not isinstance(covers, list) or not all(isinstance(title, str) and title for title in covers):
            problems.append((file, f"{where}.covers", "a list of the titles of playbook fixes it stands for"))
        for j, step in enumerate(entry.get("steps") or []):
            if not isinstance(step, dict) or not isinstance(step.get("command"), str):
                problems.append((file, f"{where}.steps[{j}]", "must hold a command"))
            elif step.get("safety") not in REMEDY_SAFETY:
                problems.append((file, f"{where}.steps[{j}].safety", f"one of {', '.join(REMEDY_SAFETY)}"))
            elif step["safety"] in ("disturbs", "changes", "stops-job") and not step.get("note"):
                problems.append((file, f"{where}.steps[{j}].note", "required: what the step does to the job"))
    return problems


def _check_log_catalog(data: dict, file: str) -> List[TableProblem]:
    facts = data.get("facts")
    if not isinstance(facts, dict) or not facts:
        return [(file, "facts", "required, a mapping of fact name to its meaning")]
    problems: List[TableProblem] = []
    for key in ("distributed_facts", "stall_reports"):
        listed = data.get(key, [])
        if not isinstance(listed, list) or any(f not in facts for f in listed):
            problems.append((file, key, f"a list of facts from: {', '.join(facts)}"))
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        return problems + [(file, "entries", "required, a list of library messages")]
    libraries = {entry.get("library") for entry in entries if isinstance(entry, dict)}
    for stack, spec in (data.get("stacks") or {}).items():
        if stack not in FIX_CONTEXT["stack"]:
            problems.append((file, f"stacks.{stack}", f"one of: {', '.join(FIX_CONTEXT['stack'])}"))
        elif not isinstance(spec, dict) or any(name not in libraries for name in spec.get("libraries") or ()):
            problems.append((file, f"stacks.{stack}.libraries", "libraries named by the catalog's entries"))
        elif not all(isinstance(p, str) and re.fullmatch(r"\w+", p) for p in spec.get("packages") or ()):
            problems.append((file, f"stacks.{stack}.packages", "Python package names"))
        elif any(f not in FIX_CONTEXT["framework"] + FIX_CONTEXT["launcher"] for f in spec.get("frameworks") or ()):
            problems.append((file, f"stacks.{stack}.frameworks", "fix contexts: framework or launcher values"))
    for number, entry in enumerate(entries):
        where = f"entries[{number}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            problems.append((file, where, "must be a mapping with an id"))
            continue
        where = f"entries.{entry['id']}"
        tokens = entry.get("tokens")
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t for t in tokens):
            problems.append((file, f"{where}.tokens", "required, a list of phrases"))
        if entry.get("fact") not in facts:
            problems.append((file, f"{where}.fact", "one of the facts listed under facts"))
        if "extract" in entry:
            _regex(file, f"{where}.extract", entry["extract"], problems)
    return problems


# Every frame entry says what it waits on, for whom, proves what, and where that is read in the library.
FRAME_KEYS = ("library", "function", "wait", "object", "released_by", "facts", "source")


def _check_frames(data: dict, file: str) -> List[TableProblem]:
    frames = data.get("frames")
    if not isinstance(frames, list) or not frames:
        return [(file, "frames", "required, a list of frame entries")]
    problems: List[TableProblem] = []
    for number, entry in enumerate(frames):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            problems.append((file, f"frames[{number}]", "must be a mapping with an id"))
            continue
        where = f"frames.{entry['id']}"
        _regex(file, f"{where}.function", entry.get("function"), problems)
        if not isinstance(entry.get("wait"), str):
            problems.append((file, f"{where}.wait", "required, a wait kind"))
        missing = [key for key in FRAME_KEYS if key not in entry]
        if missing:
            problems.append((file, f"{where}.{missing[0]}", f"required: {', '.join(FRAME_KEYS)}"))
        elif not isinstance(entry["facts"], list):
            problems.append((file, f"{where}.facts", "a list of job facts ([] for none)"))
        if "defers" in entry and not isinstance(entry["defers"], bool):
            why = "true or false: a C frame that yields to a library frame above it"
            problems.append((file, f"{where}.defers", why))
        if "stand_in" in entry and not isinstance(entry["stand_in"], bool):
            why = "true or false: a library's stand-in for a builtin (the job's own call is the frame below it)"
            problems.append((file, f"{where}.stand_in", why))
        if "polls" in entry and not isinstance(entry["polls"], bool):
            problems.append((file, f"{where}.polls", "true or false: the wait is a loop of short tries"))
        if "timer" in entry and entry["timer"] is not True:
            problems.append(
                (file, f"{where}.timer", "true: the wait's timeout is the time to its next scheduled callback")
            )
        if "backoff" in entry and not (entry["backoff"] is True and entry.get("polls") is True):
            why = "true, with polls: true: a retry with backoff, a bounded loop of tries"
            problems.append((file, f"{where}.backoff", why))
        if "computes" in entry and not (entry["computes"] is True and entry.get("wait") == "busy"):
            why = "true, on a busy entry: a routine whose time grows with its input (a parser, a serializer)"
            problems.append((file, f"{where}.computes", why))
        if "lost_at_fork" in entry and not isinstance(entry["lost_at_fork"], bool):
            why = "true or false: the threads that release the wait are not copied into a forked child"
            problems.append((file, f"{where}.lost_at_fork", why))
        if "call" in entry and not (isinstance(entry["call"], str) and entry["call"]):
            problems.append((file, f"{where}.call", "the collective's name as the job would say it (a string)"))
    return problems


CHECKS: Dict[str, Callable[[dict, str], List[TableProblem]]] = {
    "log-catalog.yaml": _check_log_catalog,
    "frames.yaml": _check_frames,
    "remedies.yaml": _check_remedies,
    "xid.yaml": _check_xid,
    "env-audit.yaml": _check_env,
    "phases.yaml": _check_phases,
}
