"""The fixes every view shows when no cause is named: those written for what the job was seen waiting
on (a dead child, a peer), never for a job that moves; and a candidate held up only by the triage
prior says so."""

from debug_stuck.core.report import Diagnosis, Evidence, FixItem, Report, Verdict
from debug_stuck.render.markdown import render_markdown
from debug_stuck.render.text import render_text


def _report(verdict: Verdict) -> Report:
    found = FixItem(title="Worker process pid 9 has died (exit code 1)", commands=["grep -n Traceback job.log"])
    found.origin = "finding"
    generic = FixItem(title="Compile in-process (no worker pool)", commands=["export TORCHINDUCTOR_COMPILE_THREADS=1"])
    prior = [Evidence("answer", "the triage answers lead here: 13% before any evidence", weight=0.13)]
    top = Diagnosis("compile", "A compiler is compiling", 0.45, prior, [found, generic], "skills/compile.md")
    return Report(verdict=verdict, diagnoses=[top])


def test_a_finding_fix_is_shown_without_a_cause_and_never_for_a_moving_job():
    undecided = _report(Verdict(hung=True, state="hung", summary="Worker process pid 9 has exited (zombie)."))
    text = render_text(undecided)
    assert "Fix (for what the job waits on; no cause is named):" in text, text
    assert "Worker process pid 9 has died (exit code 1)" in text and "TORCHINDUCTOR" not in text, text
    assert "the triage answers' prior only" in text, text
    markdown = render_markdown(undecided)
    assert "## Fix for what the job waits on (no cause is named)" in markdown, markdown
    moving = _report(Verdict(hung=False, state="progressing", summary="It moves."))
    assert "Fix (for what" not in render_text(moving) and "## Fix for what" not in render_markdown(moving)
    named = _report(Verdict(hung=True, state="hung", cause="compile", confidence=0.9, summary="Compiling."))
    assert "Fix (for what" not in render_text(named)
