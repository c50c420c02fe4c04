"""`debug-stuck history`: the incidents watch recorded in the journal, and the stalls that recur."""

from __future__ import annotations

import json
import time

from debug_stuck.frontends.commands.common import add_command, seconds_text

HISTORY_LIMIT = 20


def register(subparsers) -> None:
    h = add_command(
        subparsers,
        "history",
        run,
        help="incidents recorded by watch, and the stalls that recur",
        description="List the incidents in the journal (newest first) and the recurring patterns: the same "
        "command stalling at the same step (a deterministic hang), or for the same cause.",
    )
    h.add_argument("--format", choices=("json", "text"), default="text")
    h.add_argument(
        "--limit", type=int, default=HISTORY_LIMIT, metavar="N", help=f"show N incidents (default {HISTORY_LIMIT})"
    )


def run(args) -> int:
    from debug_stuck.actions.journal import Journal, JournalError
    from debug_stuck.errors import BadInput

    if args.limit < 1:
        raise BadInput(f"--limit {args.limit} must be at least 1", "give how many incidents to show, e.g. --limit 20")
    journal = Journal()
    try:
        incidents = journal.incidents(limit=args.limit)
        patterns = journal.patterns()
        total = journal.count()
    except JournalError as exc:
        raise BadInput(str(exc), f"the journal is {journal.path}") from None
    recurring = [p for p in patterns if p.count > 1]
    if args.format == "json":
        doc = {
            "journal": str(journal.path),
            "total": total,
            "incidents": [i.to_dict() for i in incidents],
            "patterns": [p.to_dict() for p in patterns],
        }
        print(json.dumps(doc, indent=2))
        return 0
    if not incidents:
        print(f"no incidents recorded (journal: {journal.path})")
        return 0
    shown = f"the last {len(incidents)} of {total}" if total > len(incidents) else f"{total}"
    print(f"{shown} incident(s) (journal: {journal.path})")
    for i in incidents:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.time))
        step = f"step {i.last_step}" if i.last_step is not None else "no step"
        cause = i.cause or "cause unknown"
        conf = f" {i.confidence:.0%}" if i.cause and i.confidence else ""
        action = f" -> {i.action}" if i.action else ""
        print(f"  {when}  pid {i.pid}  {step}  stalled {seconds_text(i.seconds_stalled)}  {cause}{conf}{action}")
        print(f"      {i.command}")
        if i.report_markdown:
            print(f"      report: {i.report_markdown}")
        if i.outcome:
            print(f"      outcome: {i.outcome}")
        if i.ended:
            print(f"      later: {i.ended}")
    if recurring:
        print("recurring (the same command stalling at the same step, or for the same cause):")
        for p in recurring:
            if p.kind == "same-step":
                causes = ", ".join(dict.fromkeys(c or "unknown" for c in p.causes))
                print(f"  {p.count}x  same step {p.last_step} (causes: {causes})  {p.command}")
            else:
                steps = ", ".join(dict.fromkeys("?" if s is None else str(s) for s in p.steps))
                print(f"  {p.count}x  same cause {p.cause} (steps: {steps})  {p.command}")
    return 0
