"""One report model, several renderers: text (terminals, CI logs), Markdown (incident reports),
JSON (scripts and agents). The TUI and the prompts draw the same model themselves."""

from __future__ import annotations

FORMATS = ("agent", "json", "markdown", "text")


def render(report, fmt: str) -> str:
    """The report in one of FORMATS, every secret replaced (debug_stuck.redact)."""
    report.redact()
    if fmt == "json":
        from debug_stuck.render.files import report_json

        return report_json(report)
    if fmt == "agent":
        from debug_stuck.render.agent import render_agent

        return render_agent(report)
    if fmt == "markdown":
        from debug_stuck.render.markdown import render_markdown

        return render_markdown(report)
    from debug_stuck.render.text import render_text

    return render_text(report)


def verdict_names(report, diagnosis) -> bool:
    """Whether the verdict's sentences name this cause's title."""
    from debug_stuck.core.verdict import names_the_cause

    return names_the_cause(report.verdict, diagnosis, report.diagnoses)


def verdict_tells(report, diagnosis) -> bool:
    """Whether the verdict's sentences include this cause's summary."""
    from debug_stuck.core.verdict import tells_the_summary

    return tells_the_summary(report.verdict, diagnosis, report.diagnoses)


def verdict_lead(report, for_session: bool = False) -> str:
    """The verdict's first sentence, for a screen with room for one."""
    from debug_stuck.core.verdict import SCRIPTED, SESSION, lead

    return lead(report.verdict, report.diagnoses, SESSION if for_session else SCRIPTED)


def verdict_words(report, for_session: bool = False) -> str:
    """The verdict's sentence; for the interactive session, a question that would settle a tie is
    offered in its menu rather than as a `--answer` flag."""
    from debug_stuck.core.verdict import SCRIPTED, SESSION, compose

    return compose(report.verdict, report.diagnoses, SESSION if for_session else SCRIPTED)
