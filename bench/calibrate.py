"""Fit the calibration (skills/data/calibration.yaml): how often the cause ranked first with a given
evidence score is the confirmed one, on the field corpus's TUNING set only (the exam set, fixed by
tests/fixtures/field/split.yaml, is never used).

    python bench/calibrate.py            # print the fit and the figures
    python bench/calibrate.py --write    # and write skills/data/calibration.yaml

Refit after any change to the playbooks' weights or the fact tables.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
FIELD = REPO / "tests" / "fixtures" / "field"


def project_of(case: dict) -> str:
    found = re.match(r"https://github\.com/([^/]+/[^/]+)/", case["source"])
    return (found.group(1) if found else case["source"]).lower()


def tuning_cases():
    exam = set(yaml.safe_load((FIELD / "split.yaml").read_text())["exam_projects"])
    for path in sorted((FIELD / "cases").glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if project_of(case) not in exam:
            yield case


def scored(knowledge, cases, folder: Path):
    """(case, [(cause, score), ...]) for each case, through the scripted mode's own pipeline."""
    from debug_stuck.pipeline import diagnose
    from debug_stuck.pipeline.options import answered_request

    for case in cases:
        log = folder / f"{case['id']}.log"
        log.write_text(case["log"], encoding="utf-8")
        flags = [f"{k}={v}" for k, v in (case.get("answers") or {}).items()]
        request = answered_request(knowledge, flags)
        request.logs, request.resume, request.advice = [str(log)], False, False
        report = diagnose(request, knowledge)
        yield case, [(d.cause, d.score, d.thin) for d in report.diagnoses]


def main() -> int:
    from debug_stuck.core.calibration import ANSWERS, EVIDENCE, fit
    from debug_stuck.kb import load_knowledge

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write skills/data/calibration.yaml")
    args = parser.parse_args()
    knowledge = load_knowledge()
    knowledge.calibration = {}  # the raw scores: what the fit maps
    cases = list(tuning_cases())
    with tempfile.TemporaryDirectory() as folder:
        rows = list(scored(knowledge, cases, Path(folder)))
    maps = {}
    for kind in (EVIDENCE, ANSWERS):
        pairs = [(r[0][1], r[0][0] == case["cause"]) for case, r in rows if r and r[0][2] == (kind == ANSWERS)]
        maps[kind] = fit(pairs)
        print(f"{kind}: {len(pairs)} cases, {sum(p[1] for p in pairs)} right first; map {maps[kind]}")
    projects = len({project_of(case) for case, _ in rows})
    if args.write:
        doc = {
            "fitted": (
                f"{datetime.date.today()}, on {len(rows)} cases of the field corpus's tuning set "
                f"({projects} projects); python bench/calibrate.py --write refits it"
            ),
            "maps": {kind: [list(p) for p in points] for kind, points in maps.items()},
        }
        head = (
            "# Calibration: evidence score (the playbooks' noisy-OR) -> the probability that the first-ranked\n"
            "# cause is the confirmed one, fitted on the field corpus's tuning set by pooling adjacent\n"
            "# violators (debug_stuck.core.calibration), one map for causes with evidence of the job's own and\n"
            "# one for causes only the triage answers point at. Generated: do not edit by hand.\n"
        )
        (REPO / "skills" / "data" / "calibration.yaml").write_text(head + yaml.safe_dump(doc, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
