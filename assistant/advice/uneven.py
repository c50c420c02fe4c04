"""Uneven inputs across ranks, for the collective-mismatch fix: the ranks' own progress lines in the
log ("step i/N" with N unequal), or one rank still in DDP's backward while the others are past it."""

from __future__ import annotations

import re

UNEVEN_LINE = "rank progress: uneven loop lengths: "  # debug_stuck.core.logs, from the ranks' own lines


# frames.yaml torch-c10d-native-reducer's `call`: a rank waiting in DDP's reducer, inside backward
DDP_BACKWARD = "DDP's gradient all-reduce"
UNEVEN_FIX = (
    "Wrap the loop in DDP's model.join() (torch docs, DistributedDataParallel.join: training with uneven "
    "inputs), or give every rank the same number of batches (DistributedSampler(drop_last=True), or stop "
    "at the smallest count over ranks)."
)


def uneven_inputs(report) -> str:
    """ "rank 0 counts to 5, rank 1 counts to 3" when the log shows the ranks' loops of unequal length."""
    for diagnosis in report.diagnoses or []:
        for item in diagnosis.evidence or []:
            text = getattr(item, "text", None) or ""
            if text.startswith(UNEVEN_LINE):
                return text[len(UNEVEN_LINE) :].rsplit(" (in ", 1)[0]
    return ""


def uneven_words(finding: dict, uneven: str) -> str:
    """The sentence about uneven inputs for a mismatch's fix ("" when nothing points at them).
    `uneven`: the log's unequal loop lengths ("rank 0 counts to 5, rank 1 counts to 3"), or ""."""
    sides = finding.get("sides") or []
    if uneven:
        return (
            f"The log shows loops of unequal length ({uneven}): the ranks that ran out of batches left the loop "
            f"first. {UNEVEN_FIX}"
        )
    in_backward = [side for side in sides if str(side.get("collective")).startswith(DDP_BACKWARD)]
    others = [side for side in sides if side not in in_backward]
    if not in_backward or not others:
        return ""
    behind = _site(in_backward[0])
    past = [_site(side) for side in others]
    # past it in the code: the same function of the same file, at a later line (a barrier after the loop)
    if behind is None or not all(s is not None and s[:2] == behind[:2] and s[2] > behind[2] for s in past):
        return ""
    return (
        f"{in_backward[0].get('who')} is still in a backward pass while the others wait further down the same "
        "function: what ranks with unequal numbers of batches do (a split by hand, an IterableDataset, a sampler "
        f"without drop_last), the one that ran out leaving the loop first. {UNEVEN_FIX}"
    )


_SITE = re.compile(r"^(?P<function>\S+) \((?P<file>.+):(?P<line>\d+)\)")


def _site(side: dict):
    """(function, file, line) of the job's own call a side waits in, from its `site`, or None."""
    found = _SITE.match(str(side.get("site") or ""))
    return (found["function"], found["file"], int(found["line"])) if found else None
