"""Candidates that contradict the job's facts are not ranked.

A playbook may say, in its frontmatter, which facts about the job its cause needs or cannot live
with::

    requires_any: [worker-process, dataloader-frame]   # ranked only if one of them holds
    excluded_when: [single-process]                    # never ranked when one of them holds

The facts are what live analysis saw of the whole job (debug_stuck.live.jobfacts): how many
processes it has, whether any is a worker, which library frames its stacks show. A diagnosis from
logs alone has no such facts, and nothing is ruled out. This module only applies the playbooks'
data, the same way for every cause; it never names one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from debug_stuck.core.calibration import assign_probabilities
from debug_stuck.core.classify import CAUSE_THRESHOLD, phase_for_new_cause
from debug_stuck.core.problems import Problem
from debug_stuck.yamlio import load_yaml

# The job facts a playbook may name, and what each means (debug_stuck.live.jobfacts computes them).
JOB_FACTS = {
    "single-process": "the job is one training process (with any workers or children it starts), with no sign "
    "of other ranks (no WORLD_SIZE above 1, no frame of a distributed library)",
    "distributed": "the job runs several ranks (a distributed library's frames, or WORLD_SIZE above 1)",
    "worker-process": "a process of the job is a worker forked or spawned by a trainer, in a job whose stacks show a "
    "DataLoader (or were not read): a multiprocessing Pool's processes alone are not one",
    "dataloader-frame": "a stack shows torch's DataLoader or a Dataset's __getitem__",
    "no-gpu": "the machine has no GPU driver at all (no libnvidia-ml, no amd-smi or rocm-smi): nothing runs on a GPU",
}
KEYS = ("requires_any", "excluded_when")
_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)


@dataclass(frozen=True)
class Conditions:
    requires_any: Tuple[str, ...] = ()
    excluded_when: Tuple[str, ...] = ()

    def contradiction(self, facts) -> Optional[str]:
        """Why the job's facts rule the cause out, or None."""
        held = [f for f in self.excluded_when if f in facts]
        if held:
            return f"the job is {held[0]}: {JOB_FACTS[held[0]]}"
        if self.requires_any and not any(f in facts for f in self.requires_any):
            return "the job has none of " + ", ".join(self.requires_any)
        return None


def parse_conditions(texts: Dict[Path, object]) -> Tuple[Dict[str, Conditions], List[Problem]]:
    """{cause id: Conditions} from the playbooks' texts (keyed by path; the id is the file's stem)."""
    out: Dict[str, Conditions] = {}
    problems: List[Problem] = []
    for path, text in sorted(texts.items()):
        found = _FRONTMATTER.match(text) if isinstance(text, str) else None
        if found is None:
            continue  # the playbook parser reports a missing or unreadable frontmatter
        try:
            meta = load_yaml(found.group(1))
        except yaml.YAMLError:
            continue
        if not isinstance(meta, dict):
            continue
        values = {}
        for key in KEYS:
            raw = meta.get(key)
            if raw is None:
                continue
            if not isinstance(raw, list) or not raw or any(f not in JOB_FACTS for f in raw):
                problems.append(Problem(path.name, key, f"a non-empty list of job facts: {', '.join(JOB_FACTS)}"))
                continue
            values[key] = tuple(str(f) for f in raw)
        if values:
            out[path.stem] = Conditions(**values)
    return out, problems


def contradicted(conditions: Dict[str, Conditions], cause: str, facts) -> Optional[str]:
    """Why `cause` contradicts the job's facts (None when facts is None: nothing is known)."""
    if facts is None or cause not in conditions:
        return None
    return conditions[cause].contradiction(facts)


def drop_contradicted(knowledge, result, facts: Optional[Sequence[str]]) -> List[str]:
    """Remove from a classification the candidates the job's facts rule out; the verdict's cause
    moves to the best one left. Returns one note per candidate removed."""
    conditions = getattr(knowledge, "job_conditions", None) or {}
    if facts is None or not conditions:
        return []
    kept, notes = [], []
    probes = getattr(knowledge, "probes", None) or {}
    for diagnosis in result.diagnoses:
        # a probe the job's facts rule out (a GPU probe on a machine with no GPU) is not offered
        diagnosis.probe_items = [
            item
            for item in diagnosis.probe_items
            if not any(f in facts for f in (probes.get(item.get("name")) or {}).get("excluded_when") or ())
        ]
        why = contradicted(conditions, diagnosis.cause, facts)
        if why is None:
            kept.append(diagnosis)
        else:
            notes.append(f"not ranked: {diagnosis.cause} (its signals gave {diagnosis.confidence:.0%}), as {why}")
    if len(kept) == len(result.diagnoses):
        return []
    result.diagnoses[:] = kept
    assign_probabilities(knowledge, result.diagnoses)  # the first one left is now the first ranked
    verdict = result.verdict
    top = kept[0] if kept else None
    if top is None or top.cause != verdict.cause:
        named = top is not None and (top.confidence if top.score is None else top.score) >= CAUSE_THRESHOLD
        verdict.cause = top.cause if named else None
        if named:
            verdict.phase = phase_for_new_cause(knowledge, top.cause, result.answers, verdict.phase)
    verdict.confidence = top.confidence if top is not None else 0.0
    return notes
