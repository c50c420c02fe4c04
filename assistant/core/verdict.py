"""The verdict's sentence, composed once from its parts.

Each stage of the pipeline sets the parts it knows: the classification the cause and the questions
still open, the log reading how long the log has been silent, the tie and what would break it, the
live analysis the terminal finding (the chain's end, the culprit, a collective mismatch) and the
state (hung, slow, progressing) with how it was seen, the merge the nodes that did not answer.
`compose` phrases them, for the scripted mode or for the interactive session; no stage edits
another's sentence, and no front end parses one.
"""

from __future__ import annotations

from typing import List, Optional

SCRIPTED = "scripted"
SESSION = "session"


def compose(verdict, diagnoses: List, audience: str = SCRIPTED) -> str:
    """The verdict in words, from its parts and the ranked causes."""
    return " ".join(sentences(verdict, diagnoses, audience))


def lead(verdict, diagnoses: List, audience: str = SCRIPTED) -> str:
    """The verdict's first sentence, for a screen with room for one."""
    said = sentences(verdict, diagnoses, audience)
    return said[0] if said else ""


def sentences(verdict, diagnoses: List, audience: str = SCRIPTED) -> List[str]:
    """The verdict's sentences, in order, from its parts and the ranked causes."""
    if verdict.no_nodes:
        return [verdict.no_nodes]
    top = diagnoses[0] if diagnoses else None
    if verdict.state == "progressing":
        return ["The job is making progress: " + "; ".join(verdict.state_reasons[:2]) + "."]
    out = _core(verdict, top, audience)
    if verdict.state == "slow":
        reason = verdict.state_reasons[-1] if verdict.state_reasons else "steps come slowly"
        out = [f"The job progresses, slowly: {reason}; why: {verdict.slow_because}."] + (out if verdict.cause else [])
    elif verdict.hung and verdict.state == "hung" and verdict.state_reasons:
        out.append("Evidence of the hang: " + verdict.state_reasons[0] + ".")
    elif undecided(verdict):
        # what was watched and why it is no verdict comes first; the cause is what it would be if stuck
        out.insert(0, "Not judged hung from this window: " + verdict.state_reasons[0] + ".")
    if verdict.silent_nodes:
        out.insert(0, verdict.silent_nodes)
    return [sentence for sentence in out if sentence]


def undecided(verdict) -> bool:
    """A live job was watched and not told apart from a slow one."""
    return verdict.hung is None and verdict.state is None and bool(verdict.state_reasons)


def _most_likely(verdict, top) -> str:
    if undecided(verdict) and top.confidence < SURE:
        return ""  # a best guess at why a job that may not be stuck would be stuck says nothing
    said = "If it is stuck, the likeliest cause" if undecided(verdict) else "Most likely"
    return f"{said}: {top.title} ({top.confidence:.0%})."


def _core(verdict, top, audience: str) -> List[str]:
    finding = verdict.finding or {}
    kind, text = finding.get("kind"), finding.get("text")
    if kind == "mismatch" and finding.get("ops") == "p2p" and top is not None:
        return [
            f"Point-to-point deadlock: {text}: {finding.get('why')} (a send skipped or added on one side: a condition "
            "on the step or the rank that differs between the sides, or a tag, src or dst that does not match).",
            _most_likely(verdict, top) and f"Most likely: a send or recv that no peer pairs ({top.confidence:.0%}).",
        ]
    if kind == "mismatch" and finding.get("ops") == "sites" and top is not None:
        call = ((finding.get("sides") or [{}])[0]).get("collective") or "one collective"
        return [
            f"Collective mismatch: every rank waits in {call}, called from different lines: {text}: "
            f"{finding.get('why')}.",
            _most_likely(verdict, top),
        ]
    if kind == "mismatch" and top is not None:
        return [
            f"Collective mismatch: {text}; each side waits for the other for ever (uneven data across ranks, "
            "or control flow that differs by rank).",
            _most_likely(verdict, top),
        ]
    if kind in ("chain", "flight-recorder") and verdict.cause and top is not None:
        return [f"{text}.", _most_likely(verdict, top)]
    if kind in ("chain", "flight-recorder"):
        return [f"{text}."] + _classified(verdict, top, audience, attached=True)
    if kind == "culprit" and top is not None:
        return [
            f"{text} holds the job up: {top.title} ({top.confidence:.0%}); the other ranks wait for it in a collective."
        ]
    return _classified(verdict, top, audience)


def _classified(verdict, top, audience: str, attached: bool = False) -> List[str]:
    """What the classification alone says: the cause (or what would name one), the log's silence, a tie.
    `attached`: the job's own processes were read (a chain was followed), so attaching is no advice."""
    if verdict.cause and top is not None and top.confidence >= SURE:
        out = [_most_likely(verdict, top), top.summary]
    elif verdict.cause and top is not None:
        # a best guess is said as one, with what would settle it: never a confident wrong answer
        out = [f"Too little to be sure: the best guess is {top.title} ({top.confidence:.0%}).", top.summary]
        settle = _settle(verdict, top)
        if settle and not verdict.tie:
            out.append(f"To tell: {settle}.")
    else:
        asked = ", ".join(verdict.open_questions) or "phase, gpu, step"
        out = [
            f"What the job waits on is above, but not why; no cause is named. Answering {asked} may narrow it."
            if attached
            else f"Too little is known to name a cause; answer {asked} or attach to the job."
        ]
    if verdict.stale_log:
        out.append(f"The log {verdict.stale_log}.")
    tie = verdict.tie
    if tie:
        first, second = tie["causes"]
        text = f"{first} and {second} are tied at {tie['confidence']:.0%}"
        how = breaker_words(tie, audience)
        out.append(f"{text}: {how} to tell them apart." if how else f"{text}.")
    return out


def names_the_cause(verdict, diagnosis, diagnoses: List) -> bool:
    """Whether the verdict's sentences name this cause's title (the top one, once a cause is named)."""
    if verdict.no_nodes or verdict.state == "progressing" or not diagnoses:
        return False
    return bool(verdict.cause) and diagnosis is diagnoses[0]


def tells_the_summary(verdict, diagnosis, diagnoses: List) -> bool:
    """Whether the verdict's sentences include this cause's own summary (the classification said alone)."""
    if not names_the_cause(verdict, diagnosis, diagnoses) or not diagnosis.summary:
        return False
    return diagnosis.summary in sentences(verdict, diagnoses)


SURE = 0.5  # a cause below this probability is a best guess, said as one


def _settle(verdict, top) -> Optional[str]:
    """The one thing that would settle a best guess: the question the tree had to assume, or the
    probe the cause names, or a look at the live job."""
    if verdict.open_questions:
        return f"answer {', '.join(verdict.open_questions[:2])}"
    if getattr(top, "probes", None):
        return f"run `debug-stuck probe {top.probes[0]}`"
    return "attach to the running job (debug-stuck diagnose --pid P)"


def breaker_words(tie: dict, audience: str = SCRIPTED) -> Optional[str]:
    """What separates two tied causes, said for where it will be read."""
    question = tie.get("question")
    if question:
        where = "in the menu below" if audience == SESSION else f"with --answer {question}=..."
        return f"answer {question} ({tie.get('question_text', '')}) {where}"
    probe = tie.get("probe")
    if probe:
        return f"run `debug-stuck probe {probe}`"
    return None
