"""The field corpus: real hang reports from public issue threads, through the scripted mode.

Each case in tests/fixtures/field/cases/ holds the log lines exactly as the reporter pasted them,
only the triage answers the reporter's own words support, the cause the thread confirmed (by a
maintainer or by the fix that worked) and the thread's URL. A case's log is never edited to make it
pass: a miss is fixed in the tool, from the libraries' own sources, never from the case. A case's
log is what the hung job printed (or a dump of it: a traceback, py-spy, gdb, faulthandler); a
system table such as `nvidia-smi topo -m` is context, not a log, and does not make a case.

The corpus is split by project (tests/fixtures/field/split.yaml, fixed before any tuning on the
cases it holds): the tuning set is what the tool may be tuned on; the exam set measures it on
projects it was never tuned on. Both are printed, every miss included.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from debug_stuck.contract import CAUSE_IDS
from debug_stuck.core.classify import CONTEXT_WEIGHT
from debug_stuck.kb import load_knowledge

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
CASES = sorted((FIELD / "cases").glob("*.yaml"))
ORIGINAL = FIELD / "original-62.txt"  # the ids of the corpus before issue 25
SPLIT = yaml.safe_load((FIELD / "split.yaml").read_text(encoding="utf-8"))
EXAM_PROJECTS = set(SPLIT["exam_projects"])
# The 62 cases of the corpus before issue 25 (tuned on since issue 13) hold their level; the whole
# tuning set may not fall below what it measured when the split was fixed plus the work since.
ORIGINAL_TOP1, ORIGINAL_TOP3 = 0.85, 0.95
TUNING_TOP1, TUNING_TOP3 = 0.76, 0.86  # measured 80% / 90% on 116 cases; room for new cases that miss
CONFIDENT = 0.5
MIN_CASES = 196  # raise this as cases are added, never lower it
MIN_PROJECTS = 60


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def project_of(case: dict) -> str:
    found = re.match(r"https://github\.com/([^/]+/[^/]+)/", case["source"])
    return (case.get("project") or (found.group(1) if found else case["source"])).lower()


def answer_flags(case: dict) -> list:
    flags = []
    for key, value in (case.get("answers") or {}).items():
        flags += ["--answer", f"{key}={value}"]
    return flags


def test_every_case_is_well_formed():
    questions = load_knowledge().tree.questions
    ids = set()
    for path in CASES:
        case = load(path)
        assert case["id"] == path.stem and case["id"] not in ids, path
        ids.add(case["id"])
        assert re.match(r"^https://\S+$", case["source"]), path
        assert case["cause"] in CAUSE_IDS, path
        assert str(case.get("confirmed") or "").strip(), f"{path}: say how the cause was confirmed"
        assert len(case["log"].strip().splitlines()) >= 1, path
        if case.get("project"):
            assert case["project"].lower() in case["source"].lower(), f"{path}: project is not the thread's repository"
        for key, value in (case.get("answers") or {}).items():
            assert key in questions, f"{path}: unknown answer {key}"
            valid = questions[key].values
            assert not valid or str(value) in valid, f"{path}: {key}={value} not in {sorted(valid)}"


def test_the_corpus_is_large_varied_and_split_by_project():
    cases = [load(path) for path in CASES]
    causes = Counter(case["cause"] for case in cases)
    projects = Counter(project_of(case) for case in cases)
    exam = [case for case in cases if project_of(case) in EXAM_PROJECTS]
    print("\n" + ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items())))
    print(f"{len(cases)} cases from {len(projects)} projects;", end=" ")
    print(f"exam set: {len(exam)} cases from {len(EXAM_PROJECTS)} projects")
    assert len(cases) >= MIN_CASES, len(cases)
    assert len(projects) >= MIN_PROJECTS, len(projects)
    assert len(causes) >= 15, causes
    assert EXAM_PROJECTS <= set(projects), "an exam project with no case"


def test_the_exam_set_follows_the_fixed_rule():
    """split.yaml's rule, applied to every project that had no case before issue 25: exam when the
    first byte of sha256(owner/name) is below 128. A project added later falls where the rule says,
    so nobody chooses which new cases the tool is measured on."""
    original_ids = set(ORIGINAL.read_text(encoding="utf-8").split())
    cases = [load(path) for path in CASES]
    tuned_before = {project_of(case) for case in cases if case["id"] in original_ids}
    by_rule = {
        project_of(case)
        for case in cases
        if project_of(case) not in tuned_before and hashlib.sha256(project_of(case).encode()).digest()[0] < 128
    }
    assert EXAM_PROJECTS == by_rule, (sorted(EXAM_PROJECTS - by_rule), sorted(by_rule - EXAM_PROJECTS))
    assert not EXAM_PROJECTS & tuned_before


@pytest.fixture(scope="module")
def ranked(tmp_path_factory):
    """Every case through the scripted mode once: id -> (case, [(cause, confidence), ...])."""
    from debug_stuck.frontends.cli import main

    tmp_path = tmp_path_factory.mktemp("field")
    out = {}
    for path in CASES:
        case = load(path)
        out[case["id"]] = (case, _diagnose(main, tmp_path, case))
    return out


def _diagnose(main, tmp_path: Path, case: dict) -> list:
    log = tmp_path / f"{case['id']}.log"
    log.write_text(case["log"], encoding="utf-8")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = main(["diagnose", "--log", str(log), *answer_flags(case), "--format", "json"])
    assert code == 0, case["id"]
    report = json.loads(stdout.getvalue())
    return [
        # thin: only the triage answers, where the job waits (evidence marked `place`) or context point here
        (
            d["cause"],
            d["confidence"],
            d["score"],
            not _own_evidence(d),
        )
        for d in report["diagnoses"]
    ]


def _own_evidence(diagnosis: dict) -> bool:
    """The classifier's rule (core.classify.evidence_of_the_job): the job's own evidence, all of it
    together, weighs more than context."""
    left = 1.0
    for e in diagnosis["evidence"]:
        if e["source"] != "answer" and (e.get("weight") or 0) > 0 and not e.get("place"):
            left *= 1.0 - e["weight"]
    return 1.0 - left > CONTEXT_WEIGHT


def score(ranked, keep) -> tuple:
    """(top-1 hits, top-3 hits, n, misses) over the cases `keep` selects."""
    top1 = top3 = n = 0
    misses = []
    for case_id, (case, causes) in sorted(ranked.items()):
        if not keep(case):
            continue
        n += 1
        names = [c[0] for c in causes]
        top1 += names[:1] == [case["cause"]]
        top3 += case["cause"] in names[:3]
        if names[:1] != [case["cause"]]:
            where = "not in the top three" if case["cause"] not in names[:3] else "not first"
            top = [(c[0], c[1]) for c in causes[:3]]
            misses.append(f"{case_id}: {case['cause']} {where}: {top} ({case['source']})")
    return top1, top3, n, misses


def _line(name: str, top1: int, top3: int, n: int) -> str:
    return f"{name}: {n} cases, top-1 {top1}/{n} ({top1 / max(n, 1):.0%}), top-3 {top3}/{n} ({top3 / max(n, 1):.0%})"


def confident_wrong(rows) -> tuple:
    """(verdicts at CONFIDENT or more, how many of them name the wrong cause)."""
    sure = [(cause, right) for cause, p, right in rows if p >= CONFIDENT]
    return len(sure), sum(1 for _, right in sure if not right)


def first_ranked(ranked, keep):
    """(case, the first-ranked cause, its confidence, whether it is the confirmed one, score, thin)."""
    out = []
    for _, (case, causes) in sorted(ranked.items()):
        if keep(case) and causes:
            cause, p, score, thin = causes[0]
            out.append((case, cause, p, cause == case["cause"], score, thin))
    return out


def leave_one_project_out(rows) -> list:
    """Each tuning project's cases, with the calibration refitted without that project."""
    from debug_stuck.core.calibration import ANSWERS, EVIDENCE, fit, probability

    out = []
    for project in sorted({project_of(r[0]) for r in rows}):
        rest = [r for r in rows if project_of(r[0]) != project]
        maps = {kind: fit([(r[4], r[3]) for r in rest if r[5] == (kind == ANSWERS)]) for kind in (EVIDENCE, ANSWERS)}
        for r in rows:
            if project_of(r[0]) == project:
                out.append((r[1], probability(maps, r[4], thin=r[5]), r[3]))
    return out


def test_the_scripted_mode_names_the_confirmed_cause(ranked):
    original = set(ORIGINAL.read_text().split())
    tune = score(ranked, lambda case: project_of(case) not in EXAM_PROJECTS)
    exam = score(ranked, lambda case: project_of(case) in EXAM_PROJECTS)
    first = score(ranked, lambda case: case["id"] in original)
    print("\n" + _line("tuning set", *tune[:3]))
    for miss in tune[3]:
        print("  miss:", miss)
    print(_line("exam set (projects never tuned on)", *exam[:3]))
    for miss in exam[3]:
        print("  miss:", miss)
    print(_line("the 62 cases before issue 25", *first[:3]))
    tuning_rows = first_ranked(ranked, lambda case: project_of(case) not in EXAM_PROJECTS)
    exam_rows = first_ranked(ranked, lambda case: project_of(case) in EXAM_PROJECTS)
    lopo = leave_one_project_out(tuning_rows)
    for name, rows in (
        ("tuning", [(r[1], r[2], r[3]) for r in tuning_rows]),
        ("exam", [(r[1], r[2], r[3]) for r in exam_rows]),
        ("leave-one-project-out (tuning, calibration refitted without each project)", lopo),
    ):
        sure, wrong = confident_wrong(rows)
        share = f"{wrong / sure:.0%}" if sure else "n/a"
        print(
            f"calibration, {name}: {sure} of {len(rows)} verdicts at {CONFIDENT:.0%} or more, {wrong} wrong ({share})"
        )
    assert first[0] / first[2] >= ORIGINAL_TOP1 and first[1] / first[2] >= ORIGINAL_TOP3, "\n".join(first[3])
    top1, top3, n, misses = tune
    assert top1 / n >= TUNING_TOP1 and top3 / n >= TUNING_TOP3, "\n".join(misses)
