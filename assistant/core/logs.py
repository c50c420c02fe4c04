"""Training logs as evidence: the tail's lines, the run's progress, and the answers its lines give."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations, ObservedLine
from debug_stuck.core.libfacts import FEEDER_WRITING, feeder_writing
from debug_stuck.core.logstacks import extract_stacks
from debug_stuck.core.logtext import LogTail, parse_progress
from debug_stuck.core.tree import Tree


def observe_tail(tree: Tree, tail: LogTail, obs: Observations, another_run: bool = True, live: bool = False) -> LogTail:
    """What a log's tail (already read) says, as observations: its lines, the stack dumps in it,
    its rank census and progress, and the triage answers its lines give. `another_run`: False for a
    second log of a run already counted (the live job's stdout and the file it logs to): its last
    step is not a second run's, so two of them never say "the same step every time". `live`: the
    job is read live, whose stacks say where it is now; a traceback in its log that ended in an
    error is a call that is over, not a stack of the hang (one a Ctrl-C ended still is)."""
    if tail.error:
        return tail
    path = tail.path
    for text, number in zip(tail.lines, tail.line_numbers):
        obs.add("log", ObservedLine(text, file=path, line=number if tail.whole_file else None))
    run = _current_run(tree, tail.lines)
    _observe_stacks(path, run, obs, live)
    _observe_rank_census(tree, path, run, obs)
    segments = _rank_segments(run)  # each rank's part of an interleaved line on a line of its own
    _observe_rank_progress(tree, path, segments, obs)
    _observe_rank_divergence(tree, path, segments, obs)
    _observe_single_process(tree, path, tail.lines, obs)
    progress = parse_progress(run)
    if another_run:
        obs.last_steps.append(progress.last_step)
    mid_run = progress.last_step is not None and progress.last_step > 0
    if mid_run:
        obs.offer_answer(
            Answer("phase", "mid-run", "log"), f"{Path(path).name} shows step {progress.last_step} in this run"
        )
    last = run[-tree.last_lines :]
    for question in tree.questions.values():
        for scope_lines, scope in ((last, "last"), (run, "tail")):
            hit = _latest_hint(question, scope_lines, scope)
            if hit is None:
                continue
            hint, line = hit
            why = f"{Path(path).name}: {line.strip()[:160]!r}"
            obs.offer_answer(Answer(question.key, hint.value, "log"), why)
            if not mid_run:
                for key, value in hint.implies.items():
                    obs.offer_answer(Answer(key, value, "log"), why)
    return tail


def _observe_stacks(path: str, lines: List[str], obs: Observations, live: bool = False) -> None:
    """Stack dumps in the log (a Ctrl-C traceback, faulthandler, py-spy, gdb) become stack evidence,
    matched by the same playbook signals as live stacks."""
    name = Path(path).name
    seen = set()
    for thread in extract_stacks(lines):
        if live and _raised(thread):
            continue
        who = f"{thread.kind} {thread.name!r} in {name}" if thread.name != thread.kind else f"{thread.kind} in {name}"
        if who in seen:  # the main thread of a second process dumped into the same file: a thread of its own
            who += f" at line {thread.line + 1}"
        seen.add(who)
        for frame in thread.frames:
            obs.add("stack", ObservedLine(frame.text(), subject=who, file=path))
        if feeder_writing([(f.function, f.file) for f in thread.frames if not f.native]):
            obs.add("stack", ObservedLine(FEEDER_WRITING, subject=who, file=path))


def _raised(thread) -> bool:
    """A traceback that ends in an exception other than an interrupt: that call raised and is over."""
    exception = (thread.exception or "").split(":", 1)[0]
    return thread.kind == "traceback" and bool(exception) and not exception.endswith("KeyboardInterrupt")


def _observe_rank_census(tree: Tree, path: str, lines: List[str], obs: Observations) -> None:
    """Ranks as the launcher or framework announced them at start-up. One rank announced twice
    (two processes that think they are the same rank) or fewer ranks than the world size become a
    `rank census:` log line, which the playbooks weigh like any other."""
    seen: Dict[int, int] = {}
    world: Optional[int] = None
    for text in lines:
        for pattern in tree.rank_lines:
            match = pattern.search(text)
            if not match:
                continue
            groups = match.groupdict()
            if groups.get("rank") is not None:
                rank = int(groups["rank"])
                seen[rank] = seen.get(rank, 0) + 1
            if groups.get("world") is not None:
                world = int(groups["world"])
            break
    if not seen:
        return
    name = Path(path).name
    twice = sorted(rank for rank, n in seen.items() if n > 1)
    of = f" of world size {world}" if world else ""
    if twice:
        ranks = ", ".join(str(r) for r in twice)
        text = f"rank census: duplicate global rank {ranks}{of} (announced {max(seen.values())} times in {name})"
        obs.add("log", ObservedLine(text, file=path))
    if world and len(seen) < world:
        missing = sorted(set(range(world)) - set(seen))
        shown = ", ".join(str(r) for r in missing[:8]) + (", ..." if len(missing) > 8 else "")
        text = f"rank census: missing global rank {shown}{of} ({len(seen)} of {world} announced in {name})"
        obs.add("log", ObservedLine(text, file=path))


# A rank's tag inside a line: ranks that print at the same moment to one terminal or file write
# into each other's lines ("[rank0] step 5 loss 0.36[rank1] step 5 loss 0.27").
_RANK_TAG = re.compile(r"\[(?:rank|default|Rank )\d+\]")


def _rank_segments(lines: List[str]) -> List[str]:
    """The lines with each rank's part of an interleaved line on a line of its own."""
    out: List[str] = []
    for text in lines:
        starts = [m.start() for m in _RANK_TAG.finditer(text) if m.start() > 0]
        if not starts:
            out.append(text)
            continue
        bounds = [0, *starts, len(text)]
        out.extend(text[a:b] for a, b in zip(bounds, bounds[1:]) if text[a:b].strip())
    return out


# "step 2/5", "batch 12 / 500": the count's total, right after the count
_TOTAL_AFTER = re.compile(r"\s*/\s*(\d+)\b")

# Log lines interleave and buffer per rank, so a gap of one is noise; two or more is a rank that
# went on (or fell behind) while the others stopped.
RANK_PROGRESS_GAP = 2


def _observe_rank_progress(tree: Tree, path: str, lines: List[str], obs: Observations) -> None:
    """Where each rank's own progress lines stopped (`[rank1]: ... batch 89`). Ranks that stopped at
    different counts of the same loop become a `rank progress:` log line: the ones ahead wait in a
    collective the ones behind never reach (uneven data per rank, a rank-dependent path)."""
    last: Dict[int, tuple] = {}
    totals: Dict[int, int] = {}
    for text in lines:
        for pattern in tree.rank_progress_lines:
            match = pattern.search(text)
            if match:
                what = (match.groupdict().get("what") or "step").lower()
                rank = int(match.group("rank"))
                last[rank] = (int(match.group("count")), what)
                total = match.groupdict().get("total") or _TOTAL_AFTER.match(text, match.end("count"))
                if total:
                    totals[rank] = int(total if isinstance(total, str) else total.group(1))
                break
    if len(last) < 2:
        return
    if len(totals) >= 2 and len(set(totals.values())) > 1:
        # the same loop counts to different totals on different ranks: uneven data per rank
        shown = ", ".join(f"rank {rank} counts to {total}" for rank, total in sorted(totals.items())[:8])
        text = f"rank progress: uneven loop lengths: {shown} (in {Path(path).name})"
        obs.add("log", ObservedLine(text, file=path))
    counts = {rank: count for rank, (count, _) in last.items()}
    if max(counts.values()) - min(counts.values()) < RANK_PROGRESS_GAP:
        return
    shown = ", ".join(f"rank {rank} at {last[rank][1]} {count}" for rank, count in sorted(counts.items())[:8])
    text = f"rank progress: ranks stopped at different points of the same loop: {shown} (in {Path(path).name})"
    obs.add("log", ObservedLine(text, file=path))


_VARYING = re.compile(r"0x[0-9a-f]+|\d+(?:\.\d+)?")


def _message_key(message: str) -> str:
    """A message with its numbers folded, so "step 88" and "step 90" are the same line."""
    return " ".join(_VARYING.sub("#", message.lower()).split())


def _observe_rank_divergence(tree: Tree, path: str, lines: List[str], obs: Observations) -> None:
    """Where each rank's own lines stopped (`[rank3]: ...`, icefall's `(3/8)`). Ranks that log the
    same lines stop at the same one when the whole job hangs at one point; when their last shared
    lines differ, or only some of the world's ranks wrote the last one, they stopped at different
    points: the ones that went on wait in a collective the others never reach. Lines only one rank
    ever writes (rank 0's metrics) say nothing about where the others are, so only lines two or more
    ranks wrote count."""
    tagged: List[tuple] = []
    world = 0
    for text in lines:
        for pattern in tree.rank_tagged_lines:
            match = pattern.search(text)
            if match:
                groups = match.groupdict()
                tagged.append((int(groups["rank"]), _message_key(groups["msg"]), groups["msg"].strip()))
                world = max(world, int(groups.get("world") or 0))
                break
    writers: Dict[str, set] = {}
    for rank, key, _ in tagged:
        writers.setdefault(key, set()).add(rank)
    last: Dict[int, tuple] = {}
    for rank, key, message in tagged:
        if len(writers[key]) >= 2:
            last[rank] = (key, message)
    if len(last) < 2:
        return
    at: Dict[str, List[int]] = {}
    for rank, (key, _) in sorted(last.items()):
        at.setdefault(key, []).append(rank)
    shown = {key: message for key, message in last.values()}
    name = Path(path).name
    if len(at) >= 2:
        sides = sorted(at.items(), key=lambda item: item[1])
        parts = "; ".join(f"{_ranks_text(ranks)} last wrote {shown[key][:80]!r}" for key, ranks in sides[:4])
        text = f"rank divergence: ranks stopped at different lines: {parts} (in {name})"
        obs.add("log", ObservedLine(text, file=path))
        return
    ranks = next(iter(at.values()))
    if world > len(ranks) >= 2:
        others = sorted(set(range(world)) - set(ranks))
        # ranks that wrote nothing here may write to another node's console: weaker than ranks seen
        # earlier in this log that never reached the line
        seen = {rank for rank, _, _ in tagged}
        absent = "never did" if seen & set(others) else "wrote nothing in this log"
        text = (
            f"rank divergence: only {_ranks_text(ranks)} of {world} wrote the last line "
            f"{next(iter(shown.values()))[:80]!r}; {_ranks_text(others)} {absent} (in {name})"
        )
        obs.add("log", ObservedLine(text, file=path))


def _ranks_text(ranks: List[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    shown = ", ".join(str(r) for r in ranks[:8]) + (", ..." if len(ranks) > 8 else "")
    return f"rank {shown}" if len(ranks) == 1 else f"ranks {shown}"


SINGLE_PROCESS_CENSUS = "log census: no sign of a distributed job"


def _observe_single_process(tree: Tree, path: str, lines: List[str], obs: Observations) -> None:
    """A log of a few lines or more with no rank, NCCL, launcher or process-group line at all is
    most likely a single-process job: a `log census:` line lets the distributed causes weigh that."""
    text = [line for line in lines if line.strip()]
    if tree.distributed_lines is None or len(text) < 2:
        return
    if any(tree.distributed_lines.search(line) for line in text):
        return
    name = Path(path).name
    message = f"{SINGLE_PROCESS_CENSUS} in {len(text)} lines of {name}"
    obs.add("log", ObservedLine(message, file=path))


def _current_run(tree: Tree, lines: List[str]) -> List[str]:
    if tree.run_start is None:
        return lines
    for i in range(len(lines) - 1, -1, -1):
        if tree.run_start.search(lines[i]):
            return lines[i:]
    return lines


def _latest_hint(question, lines: List[str], scope: str):
    hints = [h for h in question.hints if h.scope == scope]
    if not hints:
        return None
    for line in reversed(lines):
        for hint in hints:
            if hint.pattern.search(line):
                return hint, line
    return None
