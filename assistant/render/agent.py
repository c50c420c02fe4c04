"""The agent view (`diagnose --format agent`): what an AI agent relays and decides on, in a few KB.

The full JSON report of a two-rank job runs to tens of KB; an agent that caps its reads misses what
it should relay. This view holds the finding, the chain's end, the culprit, the first fix's
commands each with its safety label, the checks to run next on the right process, the code edits,
the resume command, what is missing and the questions still open, with every string bounded. The
full report stays one `--format json` away.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from debug_stuck.core.report import Report

AGENT_FORMAT = "debug-stuck-agent"
AGENT_VERSION = 1
MAX_TEXT = 600
MAX_DIFF = 1500
MAX_ITEMS = 4


def _clip(text: Optional[str], limit: int = MAX_TEXT) -> Optional[str]:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command(text: str, safety: Optional[dict]) -> Dict[str, Any]:
    safety = safety or {}
    out: Dict[str, Any] = {"command": _clip(text), "safety": safety.get("label")}
    if safety.get("note"):
        out["note"] = _clip(safety["note"], 300)
    out["ask_first"] = safety.get("label") in ("stops-job", "disturbs", "changes", "runs-code")
    return out


def _chain_end(report: Report) -> Optional[dict]:
    hop = next((h for h in report.chain or [] if h.get("terminal")), None)
    if hop is None:
        return None
    keep = ("pid", "role", "rank", "host", "where")
    out = {k: hop.get(k) for k in keep if hop.get(k) is not None}
    waits = hop.get("waits_on") or {}
    out["waits_on"] = {k: _clip(waits.get(k), 300) for k in ("kind", "object", "detail") if waits.get(k)}
    return out


def agent_view(report: Report) -> Dict[str, Any]:
    data = report.to_dict()  # redacted
    verdict = data["verdict"]
    top = (data.get("diagnoses") or [None])[0]
    moving = verdict.get("state") == "progressing"
    undecided = verdict.get("hung") is None and bool(report.verdict.state_reasons)
    view: Dict[str, Any] = {
        "format": AGENT_FORMAT,
        "version": AGENT_VERSION,
        "hung": verdict.get("hung"),
        "state": verdict.get("state"),
        "finding": _clip(verdict.get("summary"), 1200),
        "cause": (
            {"id": top["cause"], "title": top["title"], "confidence": top["confidence"]}
            if verdict.get("cause")
            else None
        ),
        "chain_end": _chain_end(report),
        "culprit": _culprit(data.get("culprit")),
        # a job that moves has nothing to fix: no stop, no resume, no check of a cause it does not have;
        # one watched and not told apart from a slow one is not stopped on the tool's word
        "fix": None if moving else _fix(top, gentle=undecided, unnamed=not verdict.get("cause")),
        "checks": [] if moving else _checks(top),
        # an edit for a job that may only be slow (a timeout on its long call) could break correct work
        "edits": [] if undecided else [_edit(e) for e in (data.get("edits") or [])[:2]],
        "resume": _resume(data.get("resume")),
        "missing": [{k: _clip(m.get(k), 300) for k in ("what", "why", "get_it")} for m in data.get("missing") or []][
            :MAX_ITEMS
        ],
        "questions": [
            {"key": q.get("key"), "text": q.get("text"), "values": sorted(q.get("values") or {})}
            for q in (data.get("next_questions") or [])[:MAX_ITEMS]
        ],
        "other_causes": [
            {"id": d["cause"], "confidence": d["confidence"]} for d in (data.get("diagnoses") or [])[1 : 1 + MAX_ITEMS]
        ],
        "errors": [_clip(e, 300) for e in (data.get("errors") or [])[:MAX_ITEMS]],
        "full_report": "debug-stuck diagnose ... --format json (the same options)",
    }
    if verdict.get("tie"):
        view["tie"] = verdict["tie"]
    return {k: v for k, v in view.items() if v not in (None, [], {})} | {"hung": verdict.get("hung")}


def _culprit(culprit: Optional[dict]) -> Optional[dict]:
    if not culprit:
        return None
    keep = ("pid", "rank", "host", "cause", "source", "state", "collective", "seq")
    out = {k: culprit.get(k) for k in keep if culprit.get(k) is not None}
    if culprit.get("reason"):
        out["reason"] = _clip(culprit["reason"], 400)
    return out


def _reads_only(fix: dict) -> bool:
    return all((s or {}).get("label") == "reads" for s in fix.get("safety") or [None])


def _fix(top: Optional[dict], gentle: bool = False, unnamed: bool = False) -> Optional[dict]:
    """The first fix; `gentle` (an undecided job): the first that only reads (a fix that changes
    something is for a job shown to be stuck, and this one may only be slow). `unnamed` (no cause is
    named): a fix written for what this job waits on, else the first that only reads; the top
    candidate's own fixes are a prior's, not this job's (too little is known to act on them)."""
    if not top or not top.get("fixes"):
        return None
    fixes = top["fixes"]
    if unnamed:
        fixes = [f for f in fixes if f.get("origin") == "finding"] or [f for f in fixes if _reads_only(f)]
    if gentle:
        fixes = [f for f in fixes if _reads_only(f)]
    if not fixes:
        return None
    fix = fixes[0]
    safeties = fix.get("safety") or []
    commands = [
        _command(c, safeties[i] if i < len(safeties) else None) for i, c in enumerate(fix.get("commands") or [])
    ]
    out = {"title": fix.get("title"), "commands": commands[:MAX_ITEMS]}
    if fix.get("why"):
        out["why"] = _clip(fix["why"], 700)
    out["origin"] = fix.get("origin") or "playbook"
    if fix.get("unfilled"):
        out["unfilled"] = fix["unfilled"]
    if fix.get("condition"):
        out["condition"] = _clip(fix["condition"], 300)
    return out


def _checks(top: Optional[dict]) -> List[dict]:
    if not top:
        return []
    items = [c for c in top.get("check_items") or [] if not c.get("withheld") and not c.get("unfilled")]
    return [_command(c["command"], c.get("safety")) for c in items[:3]]


def _edit(edit: dict) -> dict:
    return {
        "file": edit.get("file"),
        "line": edit.get("line"),
        "call": _clip(edit.get("call"), 200),
        "why": _clip(edit.get("why"), 300),
        "diff": _clip(edit.get("diff"), MAX_DIFF),
        "apply": "debug-stuck fix --report REPORT.json --apply (asks per file; refuses while the job runs)",
    }


def _resume(resume: Optional[dict]) -> Optional[dict]:
    if not resume:
        return None
    keep = ("command", "cwd", "checkpoint", "step", "lost")
    return {k: _clip(resume.get(k)) for k in keep if resume.get(k) is not None}


def render_agent(report: Report) -> str:
    return json.dumps(agent_view(report), indent=1) + "\n"
