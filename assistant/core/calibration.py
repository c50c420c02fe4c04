"""Confidence that means probability.

The playbooks' evidence combines into a score (a noisy-OR of the weights). How often the cause
ranked first with a given score is the confirmed one is measured on the field corpus's tuning set
(tests/fixtures/field/, split by project): a monotone map from score to probability, fitted by
pooling adjacent violators and kept as data (skills/data/calibration.yaml, with how it was fitted).
Every confidence the report shows goes through it, so "80%" is right about four times in five.

Two maps, because the same score means two things: a cause backed by evidence the job left (a log
line, a stack, a process) and a cause that only the triage answers point at. The second is right
far less often, whatever its score: it is said as "too little to tell".
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Dict, List, Sequence, Tuple

EVIDENCE = "evidence"  # some evidence besides the triage answers
ANSWERS = "answers"  # the triage answers (and the tree's priors) alone
KINDS = (EVIDENCE, ANSWERS)

Point = Tuple[float, float]  # (score, probability the first-ranked cause is right)

# A bin holds at least this many cases before its rate stands on its own; fewer are shrunk toward
# the overall rate (few cases, little trust).
MIN_BIN = 8
TIE = 0.01  # scores this close are a tie (debug_stuck.core.assemble states it)
PRIOR_WEIGHT = 4.0
# Answers alone never make a sure verdict (debug_stuck.core.verdict.SURE is 0.5): the tool has seen
# nothing of the job, so it says "too little to tell" and asks, whatever the fit of a few cases says.
ANSWERS_CEILING = 0.45


def fit(pairs: Sequence[Tuple[float, bool]]) -> List[Point]:
    """(score, the first-ranked cause was right) -> the monotone map, as points to interpolate."""
    if not pairs:
        return []
    ordered = sorted(pairs)
    overall = sum(1 for _, right in ordered if right) / len(ordered)
    # pool adjacent violators: blocks of (sum of scores, rights, count), rates non-decreasing
    blocks: List[List[float]] = []
    for score, right in ordered:
        blocks.append([score, float(right), 1.0])
        while len(blocks) > 1 and _rate(blocks[-2], overall) > _rate(blocks[-1], overall):
            last = blocks.pop()
            for i in range(3):
                blocks[-1][i] += last[i]
    points: List[Point] = []
    for block in blocks:
        point = (round(block[0] / block[2], 4), round(_rate(block, overall), 4))
        if points and points[-1][1] == point[1]:
            continue  # a plateau: its first point is enough to interpolate from
        points.append(point)
    return points


def _rate(block: List[float], overall: float) -> float:
    """A block's rate, shrunk toward the overall rate while it holds few cases."""
    _, rights, count = block
    weight = PRIOR_WEIGHT if count < MIN_BIN else 0.0
    return (rights + weight * overall) / (count + weight)


def apply(points: Sequence[Point], score: float) -> float:
    """The probability for a score: linear between the fitted points, flat beyond them; the score
    itself when nothing was fitted."""
    if not points:
        return score
    scores = [p[0] for p in points]
    if score <= scores[0]:
        return min(points[0][1], score) if score < scores[0] else points[0][1]
    if score >= scores[-1]:
        return points[-1][1]
    i = bisect_right(scores, score)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    if x1 == x0:
        return y1
    return y0 + (y1 - y0) * (score - x0) / (x1 - x0)


def probability(maps: Dict[str, Sequence[Point]], score: float, thin: bool) -> float:
    """The probability for a first-ranked cause's score, from the map of its kind of evidence;
    `thin`: only the triage answers point at it, and then never a sure verdict."""
    if thin:
        return min(apply(maps.get(ANSWERS, []), score), ANSWERS_CEILING)
    return apply(maps.get(EVIDENCE, []), score)


def assign_probabilities(knowledge, diagnoses: List) -> None:
    """Each ranked cause's confidence as a probability: the first one's from the calibration (how
    often a first-ranked cause with its score and kind of evidence is right), the rest share what is
    left in proportion to their scores, so the confidences of one report never sum past 1."""
    if not diagnoses:
        return

    def score(d) -> float:
        return d.score if d.score is not None else d.confidence

    top = diagnoses[0]
    # causes tied with the first (scores this close) share what the first place is worth
    tied = [d for d in diagnoses if score(top) - score(d) < TIE]
    first = knowledge.probability(score(top), thin=top.thin)
    for d in tied:
        d.confidence = round(first / len(tied), 3)
    rest = diagnoses[len(tied) :]
    total = sum(score(d) for d in rest)
    left = max(0.0, 1.0 - first)
    for d in rest:
        share = score(d) / total if total else 0.0
        d.confidence = round(min(left * share, tied[-1].confidence), 3)
