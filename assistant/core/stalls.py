"""A wait the log reports as timed out, read with the event the user says the job stopped around.

A watchdog or store timeout is printed long after the job stopped; the event logged before it says
what the job was doing (facts.py's `prior=`). When the log shows no such event, the user's answer
to "around what event did it stop?" is that event: `timed-out-during=<event> report=<fact>`.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

# The events a user can name (the tree's `event` answer) that say which part of the job a stall report
# waited on: a watchdog timeout while the job saves is the others waiting for the rank still saving.
_ANSWERED_EVENTS = ("checkpoint",)


def timed_out_during(stall_reports: Sequence[str], event: Optional[str], fact_lines) -> Optional[Tuple[str, object]]:
    """(`timed-out-during=<event> report=<fact>`, the fact line of the stall report) when a log reports a
    wait that timed out, no event before it says what the job was doing (no `prior=`), and the user
    said around which event it stopped: the answer is the `prior` the log lacks."""
    if event not in _ANSWERED_EVENTS or any(line.text.startswith("prior=") for line in fact_lines):
        return None
    for line in fact_lines:
        found = re.match(r"^log=(\S+) ", line.text)
        if found and found.group(1) in stall_reports and line.origin == "log":
            return f"timed-out-during={event} report={found.group(1)}", line
    return None
