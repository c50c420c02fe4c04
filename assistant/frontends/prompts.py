"""The interactive session without a full-screen UI: questionary prompts over the same core.

`debug-stuck --plain`, and any terminal where the Textual app cannot run. Five steps, numbered in
the order they are shown (the live evidence comes before the questions it pre-fills):
1 the job, 2 the evidence, 3 the questions, 4 the diagnosis, 5 what next. A probe is part of the
step that offers it (a question, or what next), so a number never goes back unless the user does.
debug_stuck.frontends.session does the work.
At a menu `q` quits; at a question Escape goes back (from question 1, to the job list), with the
answer given before selected again.
Everything printed, and every option, is wrapped at word boundaries to the terminal's width.
Where the menus cannot draw (stdout not a terminal, as in `debug-stuck --plain | tee log`;
TERM=dumb; NO_COLOR), the same prompts are numbered lines read as a number, with no escape codes.
Tests drive it through prompt_toolkit pipe input: run_prompts(session, input=..., output=...).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Dict, List, Optional, TextIO

from debug_stuck.contract import UNKNOWN
from debug_stuck.core.report import Report
from debug_stuck.errors import DebugStuckError, NotInspectable
from debug_stuck.frontends.session.core import Session
from debug_stuck.frontends.session.probes import ProbeOffer
from debug_stuck.render import verdict_words
from debug_stuck.render.text import PATTERN_WORDS, clip, doing_phrase, format_duration, session_headline

MAX_PROCESSES_SHOWN = 12
MAX_FINDINGS_SHOWN = 20
PROBE_PROGRESS_EVERY = 5.0
STEPS = 5
STEP_JOB, STEP_EVIDENCE, STEP_QUESTIONS, STEP_DIAGNOSIS, STEP_NEXT = range(1, STEPS + 1)
FALLBACK_SIZE = (80, 24)  # when the width cannot be read (stdout is a pipe): the usual terminal
BACK = "__back__"
JOBS = "__jobs__"
PROBE = "__probe__"
# What a probe's findings are called in its summary ("2 problem(s), 1 warning(s), 4 note(s)").
SEVERITY_WORDS = {"fail": "problem", "warn": "warning", "info": "note"}
SEVERITY_ORDER = {"fail": 0, "warn": 1, "info": 2}


class QuitSession(Exception):
    """`q` at a menu: the session ends (as the full-screen app's `q` does)."""


class InputEnded(QuitSession):
    """The numbered prompts read the end of their input (Ctrl-D, or a closed stdin): no answer
    can come any more, so the session ends as with `q`."""


class PlainSession:
    """One run of the prompts; `io` goes to every questionary prompt (pipe input in tests)."""

    def __init__(self, session: Session, out: Optional[TextIO] = None, width: Optional[int] = None, **io: Any):
        self.session = session
        self.out = out or sys.stdout
        self.fixed_width = width
        self.io = {k: v for k, v in io.items() if v is not None}
        self.current_step = STEP_JOB
        # The answers a step back took away, by question: asked again, the question selects them.
        self.earlier: Dict[str, str] = {}

    # -- plumbing --------------------------------------------------------------------------
    @property
    def width(self) -> int:
        """The terminal's width, read each time (it may be resized between prompts)."""
        return self.fixed_width or shutil.get_terminal_size(FALLBACK_SIZE).columns

    def say(self, text: str = "", keep: frozenset = frozenset()) -> None:
        """Print, every line wrapped at word boundaries; the lines in `keep` (commands, diffs) as
        they are, to be copied whole."""
        print(wrap_text(str(text), self.width, keep), file=self.out, flush=True)

    def step(self, number: int, text: str) -> None:
        self.current_step = number
        self.say(f"Step {number} of {STEPS}: {text}")

    def answered(self, message: str, title: str) -> None:
        """The choice made, in a line of our own: the menu erases itself, as questionary would
        otherwise print the answer after the question on one line, cut mid-word at the edge."""
        self.say(f"? {message} {title.splitlines()[0].strip()}")

    def select(
        self,
        message: str,
        choices: List,
        default: Any = None,
        escape: Any = None,
    ):
        """One choice. `q` raises QuitSession; Escape answers `escape` (when given)."""
        import questionary
        from prompt_toolkit.key_binding import KeyBindings, merge_key_bindings

        shortcuts = len(choices) <= 9
        # Each option is drawn after the pointer (" » ") and, with shortcuts, its number ("1) ").
        prefix = 6 if shortcuts else 3
        items = [
            questionary.Choice(fit_option(title, self.width, prefix), value=choice_value(title, value))
            for title, value in choices
        ]
        chosen = next((c for c in items if default is not None and c.value == default), None)
        instruction = (
            f"(arrows{' or 1-9' if shortcuts else ''}, Enter; {'Esc back, ' if escape is not None else ''}q quits)"
        )
        question = questionary.select(
            fit_message(message, instruction, self.width),
            choices=items,
            default=chosen,
            use_shortcuts=shortcuts,
            instruction=instruction,
            **self.io,
        )
        keys = KeyBindings()

        @keys.add("q", eager=True)
        def _quit(event) -> None:
            event.app.exit(exception=QuitSession())

        if escape is not None:

            @keys.add("escape", eager=True)
            def _back(event) -> None:
                event.app.exit(result=escape)

        app = question.application
        app.key_bindings = merge_key_bindings([app.key_bindings, keys])
        app.erase_when_done = True  # the answer is said by answered(), wrapped
        value = question.unsafe_ask()
        title = next((title for title, v in choices if choice_value(title, v) == value), None)
        if title is not None and value != escape:
            self.answered(message, title)
        return value

    def text(self, message: str, default: str = "", validate: Optional[Callable] = None) -> str:
        import questionary

        return questionary.text(
            fit_message(message, "", self.width), default=default, validate=validate, **self.io
        ).unsafe_ask()

    def confirm(self, message: str, default: bool = False) -> bool:
        """y or n, then Enter (a single key would leave the Enter to the next prompt); Escape: no."""
        import questionary
        from prompt_toolkit.key_binding import KeyBindings, merge_key_bindings

        instruction = "(y/N, then Enter) " if not default else "(Y/n, then Enter) "
        question = questionary.confirm(
            fit_message(message, instruction, self.width),
            default=default,
            auto_enter=False,
            instruction=instruction,
            **self.io,
        )
        keys = KeyBindings()

        @keys.add("escape", eager=True)
        def _no(event) -> None:
            event.app.exit(result=False)

        app = question.application
        app.key_bindings = merge_key_bindings([app.key_bindings, keys])
        return bool(question.unsafe_ask())

    # -- the steps -------------------------------------------------------------------------
    def run(self) -> int:
        try:
            while True:
                while not self.pick_job():
                    pass
                self.evidence()
                if self.triage():
                    break
            report = self.diagnose()
            self.recovery(report)
        except InputEnded:
            self.say("debug-stuck: the input ended; nothing is left running")
        except QuitSession:
            self.say("debug-stuck: quit; nothing is left running")
        except KeyboardInterrupt:
            self.say("debug-stuck: interrupted; nothing is left running")
            return 130
        finally:
            self.session.shutdown()
        return 0

    def pick_job(self) -> bool:
        self.step(STEP_JOB, "looking for training jobs on this machine...")
        try:
            jobs = self.session.discover()
        except Exception as exc:  # the other ways in still work
            self.say(f"could not scan this machine: {exc}")
            jobs = []
        if not jobs:
            self.say("No training job found here (Python processes that load libtorch).")
        now = time.time()
        # The width left for an option's text: after the pointer and its number (see select).
        choices = [(job_title(job, now, self.width - 6), ("job", i)) for i, job in enumerate(jobs)]
        choices.append(("Attach to another process by PID", ("pid", None)))
        choices.append(("Not running any more / describe it", ("describe", None)))
        kind, index = self.select("Which job is stuck?", choices)
        try:
            if kind == "job":
                self.session.attach(jobs[index])
            elif kind == "pid":
                pid = self.text(
                    "PID of any process of the job (Enter alone: back to the list):",
                    validate=lambda t: not t.strip() or t.strip().isdigit() or "a number, or nothing to go back",
                )
                if not pid.strip():
                    return False
                self.session.attach_pid(pid)
            else:
                logs = self.text("Training log path(s), space-separated (optional, Enter to skip):")
                self.session.describe([logs] if logs.strip() else [])
        except DebugStuckError as exc:
            self.say(f"debug-stuck: {exc.one_line()}")
            return False
        self.earlier = {}  # answers given about another job are no answers about this one
        if self.session.job is not None:
            self.say(f"Attached: {self.session.job.headline(now)}")
            if self.session.job.note:
                self.say(self.session.job.note)  # e.g. a DataLoader worker's PID led to its trainer
        return True

    def evidence(self) -> None:
        session = self.session
        if not session.attached and not session.logs:
            self.step(STEP_EVIDENCE, "no live job: the diagnosis comes from your answers.")
            return
        self.step(STEP_EVIDENCE, "reading the live evidence..." if session.attached else "reading the logs...")
        try:
            report = session.collect_evidence(progress=lambda m: self.say(f"  {m}..."))
        except NotInspectable as exc:
            self.say(f"could not read the job: {exc.one_line()}")
            return
        self.say(render_evidence(report, session))

    def triage(self) -> bool:
        """The questions, in order; False when the user goes back to the job list."""
        session = self.session
        while True:
            view = session.next_question()
            if view is None:
                return True
            q = view.question
            self.say("")
            # No total: an answer can open or close a branch of the tree, and "2 of 6" after
            # "1 of 5" reads as a mistake.
            self.step(STEP_QUESTIONS, f"question {view.number}")
            self.say(f"Why we ask: {q.why}")
            s = view.suggestion
            if s is not None:
                origin = "the log" if s.source == "log" else "live evidence"
                self.say(f"Pre-filled from {origin}: {s.prompt}")
            choices = []
            for value, label in view.choices:
                if s is not None and value == s.value:
                    label += "   (suggested)"
                elif s is None and value == view.default:
                    label += "   (usual answer)"
                choices.append((label, value))
            offers = [o for o in view.probes if o.available]
            if offers:
                choices.append((f"Run a probe that answers this ({', '.join(o.name for o in offers)})", PROBE))
            back = BACK if session.triage.order else JOBS
            choices.append(("<- back to the previous question" if back == BACK else "<- back to the job list", back))
            value = self.select(q.text, choices, default=self.earlier.get(q.key, view.default), escape=back)
            if value == JOBS:
                return False
            if value == BACK:
                self.back()
            elif value == PROBE:
                self.probe_menu(offers)
            else:
                session.answer(q.key, value)

    def back(self) -> None:
        """One question back; the answer it takes away is selected when the question comes again."""
        triage = self.session.triage
        key = triage.order[-1]
        self.earlier[key] = triage.answers[key].value
        self.session.back()

    def diagnose(self) -> Report:
        self.say("")
        self.step(STEP_DIAGNOSIS, "diagnosing...")
        report = self._diagnose()
        self.say("")
        self.show_report(report)
        return report

    def show_report(self, report: Report) -> None:
        self.say(report_text(report, self.session, self.width), keep=verbatim_lines(report))

    def rediagnose(self, old: Report, why: str) -> Report:
        """The diagnosis again, with what was just learned; says what changed, not the whole report."""
        self.say(f"Updating the diagnosis with {why}...")
        report = self._diagnose()
        self.say("\n".join(report_changes(old, report)))
        return report

    def _diagnose(self) -> Report:
        say = lambda m: self.say(f"  {m}...")  # noqa: E731
        try:
            return self.session.diagnose(progress=say)
        except NotInspectable as exc:
            self.say(f"the job cannot be read any more ({exc.one_line()}); using the answers and logs")
            report = self.session.diagnose(progress=say, live=False)
            report.errors.insert(0, exc.one_line())
            return report

    def recovery(self, report: Report) -> None:
        session = self.session
        self.say("")
        self.step(STEP_NEXT, "what next?")
        while True:
            choices = []
            offers = [o for o in session.diagnosis_probes(report) if o.available]
            if offers:
                choices.append((f"Run a probe to settle it ({', '.join(o.name for o in offers)})", "probe"))
            questions = open_questions(report, session)
            if questions:
                keys = ", ".join(q["key"] for q in questions)
                choices.append((f"Answer a question it asks ({keys}); the diagnosis updates", "answer"))
            choices.append(("Copy the fix commands", "copy"))
            choices.append(("Save the report (Markdown and JSON)", "save"))
            for action in session.recovery_actions():
                choices.append(("Stop the job (report first)" if action == "stop" else "Resume the job", action))
            choices.append(("Show the whole report again", "show"))
            choices.append(("Quit", "quit"))
            what = self.select("What next?", choices, default="save" if session.saved is None else "quit")
            if what == "quit":
                return
            if what == "probe":
                ran = self.probe_menu(offers)
                if ran is not None:
                    report = self.rediagnose(report, f"probe {ran}")
            elif what == "answer":
                answered = self.answer_menu(questions)
                if answered is not None:
                    report = self.rediagnose(report, f"your answer {answered}")
            elif what == "show":
                self.show_report(report)
            elif what == "copy":
                self.say(session.copy_fixes(report))
            elif what == "save":
                folder = self.text("Save the report in directory:", default=session.save_dir or ".")
                try:
                    self.say(session.save_report(report, directory=folder).one_line())
                except DebugStuckError as exc:
                    self.say(f"debug-stuck: {exc.one_line()}")
            elif what in ("stop", "resume"):
                if what == "stop" and not self.confirm(
                    f"Stop the job (pid {', '.join(map(str, session.pids))}) and every process it started?"
                ):
                    self.say("not stopped")
                    continue
                try:
                    self.say(session.run_recovery(what))
                except Exception as exc:  # the recovery module's own failure, said in one line
                    self.say(f"debug-stuck: {what} failed: {exc}")

    def answer_menu(self, questions: List[dict]) -> Optional[str]:
        """One of the questions the diagnosis asks, answered here; "key=value", or None."""
        if len(questions) == 1:
            asked = questions[0]
        else:
            choices = [(f"{q['key']}: {q['text']}", q["key"]) for q in questions]
            choices.append(("none", None))
            key = self.select("Which question?", choices, escape="")
            asked = next((q for q in questions if q["key"] == key), None)
            if asked is None:
                return None
        question = self.session.knowledge.tree.questions[asked["key"]]
        self.say(f"Why we ask: {question.why}")
        choices = [(label, value) for value, label in question_choices(question)]
        choices.append(("<- keep it as it is", BACK))
        value = self.select(question.text, choices, default=asked.get("assumed"), escape=BACK)
        if value == BACK:
            return None
        try:
            answer = self.session.answer(question.key, value)
        except DebugStuckError as exc:
            self.say(f"debug-stuck: {exc.one_line()}")
            return None
        return f"{answer.key}={answer.value}"

    # -- step 4 ----------------------------------------------------------------------------
    def probe_menu(self, offers: List[ProbeOffer]) -> Optional[str]:
        """Offer the probes; the name of the one that completed (its findings then weigh in the
        ranking), else None."""
        self.say("")
        # Part of the step that offers it (a question, or what next): a number of its own would
        # read "Step 4" after "Step 5 of 5".
        self.step(self.current_step, "a probe")
        choices = [
            (f"{o.name}: {o.summary}" + ("  [RUNS YOUR CODE]" if o.runs_user_code else ""), o.name) for o in offers
        ]
        choices.append(("none", None))
        name = self.select("Which probe?", choices, escape="")
        offer = next((o for o in offers if o.name == name), None)
        if offer is None:
            return None
        consent = False
        if offer.runs_user_code:
            consent = self.confirm(
                f"Probe {offer.name} RUNS YOUR CODE (own process group, killed after {offer.timeout:g} s). Run it?"
            )
            if not consent:
                self.say("not run")
                return None
        value = ""
        if offer.input_kind:
            value = self.text(f"{offer.input_prompt}:")
        return offer.name if self.run_probe(offer, consent, value) else None

    def run_probe(self, offer: ProbeOffer, consent: bool, value: str) -> bool:
        self.say(f"running probe {offer.name} (up to {offer.timeout:g} s; Ctrl-C cancels it)...")
        cancel = threading.Event()
        last = [0.0]

        def progress(elapsed: float, limit: float) -> None:
            if elapsed - last[0] >= PROBE_PROGRESS_EVERY:
                last[0] = elapsed
                self.say(f"  {format_duration(elapsed)} of {limit:g} s...")

        try:
            outcome = self.session.run_probe(offer.name, consent, value, cancel, progress)
        except KeyboardInterrupt:
            # run_probe killed the probe and all it started before re-raising
            self.say(f"probe {offer.name} cancelled; nothing is left running")
            return False
        except DebugStuckError as exc:
            self.say(f"debug-stuck: {exc.one_line()}")
            return False
        self.say(outcome.one_line())
        for line in finding_lines(outcome.findings):
            self.say(line)
        return outcome.completed


class LineSession(PlainSession):
    """The same prompts as numbered lines, the choice read as a number: for a stdout that is not a
    terminal (`debug-stuck --plain | tee log`: the menus would draw their first option blank) and
    for TERM=dumb or NO_COLOR, where no escape code may be printed at all."""

    def __init__(
        self,
        session: Session,
        out: Optional[TextIO] = None,
        width: Optional[int] = None,
        stdin: Optional[TextIO] = None,
    ):
        super().__init__(session, out, width)
        self.stdin = stdin or sys.stdin

    def ask(self, prompt: str) -> str:
        """One line of input after `prompt` (wrapped, the answer typed on its last line)."""
        self.out.write(wrap_text(prompt, self.width) + " ")
        self.out.flush()
        line = self.stdin.readline()
        if not line:
            raise InputEnded()
        if not is_terminal(self.out):
            self.out.write("\n")  # the typed line is echoed on the terminal, not in a log
        return line.rstrip("\r\n")

    def select(self, message: str, choices: List, default: Any = None, escape: Any = None):
        """The options numbered; Enter alone takes the default; `q` quits; `b` answers `escape`."""
        values = [choice_value(title, value) for title, value in choices]
        start = values.index(default) + 1 if default is not None and default in values else 1
        self.say(message)
        prefix = len(f"{len(choices)}") + 4  # "  12) "
        for number, (title, _) in enumerate(choices, 1):
            label = f"{number})".rjust(prefix - 1)
            self.say(label + " " + fit_option(title, self.width, prefix))
        back = ", b back" if escape is not None else ""
        while True:
            answer = self.ask(f"Pick 1-{len(choices)} (Enter: {start}{back}, q quits):").strip().lower()
            if answer == "q":
                raise QuitSession()
            if answer in ("b", "\x1b") and escape is not None:  # Escape, where the terminal passes it
                return escape
            number = start if not answer else int(answer) if answer.isdigit() else 0
            if 1 <= number <= len(choices):
                self.answered(message, choices[number - 1][0])
                return values[number - 1]
            self.say(f"Type a number from 1 to {len(choices)}.")

    def text(self, message: str, default: str = "", validate: Optional[Callable] = None) -> str:
        while True:
            answer = self.ask(f"{message} [{default}]" if default else message) or default
            verdict = validate(answer) if validate is not None else True
            if verdict is True:
                return answer
            self.say(verdict if isinstance(verdict, str) else "Not valid; again, please.")

    def confirm(self, message: str, default: bool = False) -> bool:
        while True:
            answer = self.ask(f"{message} {'(Y/n)' if default else '(y/N)'}").strip().lower()
            if answer in ("y", "yes", "n", "no", ""):
                return answer.startswith("y") if answer else default
            self.say("y or n, then Enter.")


def choice_value(title: str, value: Any) -> Any:
    """What choosing an option returns: its value, or its title when it has none (as questionary)."""
    return title if value is None else value


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def needs_numbered_lines(out, environ=os.environ) -> bool:
    """The menus draw with escape codes: not into a pipe or a file (the log would show the first
    option blank), not on a dumb terminal, not when NO_COLOR asks for none (no-color.org)."""
    return not is_terminal(out) or environ.get("TERM") == "dumb" or bool(environ.get("NO_COLOR"))


# -- wrapping ------------------------------------------------------------------------------------
# Lines are wrapped where there is a space, never inside a word (a word longer than the width
# stays whole); a wrapped line goes on under its own text after a bullet, else `hang` further in
# (two spaces: a paragraph's next line is not a new one; none in an option: its number says it).
BULLET = re.compile(r"(?:[-+*]|>>|\d+[.)])\s+")


def wrap_line(line: str, width: int, hang: str = "  ") -> List[str]:
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    bullet = BULLET.match(body)
    return textwrap.wrap(
        body,
        width,
        initial_indent=indent,
        subsequent_indent=indent + (" " * bullet.end() if bullet else hang),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


def wrap_text(text: str, width: int, keep: frozenset = frozenset(), hang: str = "  ") -> str:
    """Every line wrapped to `width`, but those whose text is in `keep` (printed as they are)."""
    out: List[str] = []
    for line in text.split("\n"):
        out.extend([line] if line.strip() in keep else wrap_line(line, width, hang))
    return "\n".join(out)


def fit_option(title: str, width: int, prefix: int) -> str:
    """An option's text wrapped to what is left of the width after its pointer and number; its
    other lines start under its text."""
    lines = wrap_text(title, max(20, width - prefix), hang="").split("\n")
    return ("\n" + " " * prefix).join(lines)


def fit_message(message: str, instruction: str, width: int) -> str:
    """A question wrapped after its "? "; the instruction on its last line, or on a line of its
    own when it would not fit there."""
    lines = textwrap.wrap(message, max(20, width - 2), break_long_words=False, break_on_hyphens=False) or [""]
    text = "\n  ".join(lines)
    if instruction and len(lines[-1]) + len(instruction) + 4 > width:
        text += "\n "  # questionary adds a space: the instruction starts two columns in
    return text


# A Python interpreter (any path, any version) and its own options, which name no job: -u, -O,
# -X dev, -W ignore... (`-m` is not one of them: the module it names is the job's script).
INTERPRETER = re.compile(r"^\S*python[\d.]*(?:\s+-[bBdEiIOqsSuvx]+|\s+-[WX]\s*\S+)*\s+(?=\S)")


def script_and_args(command: str) -> str:
    """A job's command without its interpreter: `python -u train.py --lr 1` is `train.py --lr 1`,
    what tells two one-process jobs apart (`-m module` stays: the module is the script)."""
    short = INTERPRETER.sub("", command, count=1)
    return short or command


def job_title(job, now: float, width: int) -> str:
    """A job as step 1 lists it: its headline, its command (one line, cut to fit; secrets are
    redacted in it already), then what its log says."""
    lines = [job.headline(now)]
    if job.command:
        lines.append("  " + clip(script_and_args(job.command), max(20, width - 2)))
    # "  log quiet for 12 min: '" and the closing quote: the log's line gets the rest
    lines.append("  " + job.log_phrase(now, width=max(20, width - 28)))
    return "\n".join(lines)


def verbatim_lines(report: Report) -> frozenset:
    """The report's lines that are commands or diffs: wrapped, they would not paste as they are."""
    blocks = [str((report.resume or {}).get("command") or "")]
    blocks += [str(edit.get("diff") or "") for edit in report.edits]
    for d in report.diagnoses:
        blocks += [command for fix in d.fixes for command in fix.commands]
        blocks += [check.command for check in d.check_items]
    return frozenset(line.strip() for block in blocks for line in block.splitlines() if line.strip())


class Paragraphs:
    """render_text fills some paragraphs at 100 columns (the verdict's summary, each fix's why),
    and refilled at the terminal's width they would come out ragged. Each goes in as a token,
    which no fill breaks, and comes out filled to `width` (under its first line, as render_text
    fills it), or as one line when there is no width."""

    def __init__(self, width: Optional[int] = None):
        self.width = width
        self.held: Dict[str, str] = {}

    def hold(self, text: Optional[str]) -> Optional[str]:
        if not text:
            return text
        token = f"@@paragraph{len(self.held)}@@"
        self.held[token] = " ".join(text.split())
        return token

    def restore(self, line: str) -> List[str]:
        body = line.lstrip(" ")
        if body not in self.held:
            return [line]
        whole = line[: len(line) - len(body)] + self.held[body]
        return wrap_line(whole, self.width, hang="") if self.width else [whole]


def finding_lines(findings: List[dict], indent: str = "  ") -> List[str]:
    """A probe's findings, problems first, each named as its summary counts it (problem, warning,
    note), with the cause it points at or the playbook to read."""
    ordered = sorted(findings, key=lambda f: SEVERITY_ORDER.get(str(f.get("severity")), 3))
    out = []
    for finding in ordered[:MAX_FINDINGS_SHOWN]:
        severity = str(finding.get("severity"))
        line = f"{indent}- {SEVERITY_WORDS.get(severity, severity)}: {finding.get('message')}"
        if finding.get("cause"):
            line += f" [points at {finding['cause']}]"
        elif finding.get("see"):
            line += f" [see {finding['see']}]"
        out.append(line)
    if len(ordered) > MAX_FINDINGS_SHOWN:
        out.append(f"{indent}... {len(ordered) - MAX_FINDINGS_SHOWN} more in the saved report")
    return out


def question_choices(question) -> List[tuple]:
    """(value, "value: meaning") of a question, "unknown" last (as the session's questions)."""
    if question.kind == "integer":
        return [("1", "1: one machine"), (UNKNOWN, "unknown: I don't know")]
    return [(v, f"{v}: {meaning}") for v, meaning in question.values.items()] + [(UNKNOWN, "unknown: I don't know")]


def open_questions(report: Report, session: Session) -> List[dict]:
    """The questions the diagnosis says are worth answering, that can be answered here."""
    known = session.knowledge.tree.questions
    found = [q for q in report.next_questions if q.get("key") in known]
    # A tie the verdict says one answer would break, though the evidence answered it already.
    key = (report.verdict.tie or {}).get("question")
    if key in known and all(q["key"] != key for q in found):
        found.append(dict(known[key].to_dict(), assumed=(report.answers.get(key) or {}).get("value")))
    return found


def report_text(report: Report, session: Session, width: Optional[int] = None) -> str:
    """The report as `diagnose` prints it, for the session: each probe's findings under its line,
    and the questions worth answering offered here (not "rerun with --answer"); its paragraphs
    filled to `width`."""
    from debug_stuck.render.text import render_text

    paragraphs = Paragraphs(width)
    verdict = dataclasses.replace(report.verdict, summary=paragraphs.hold(verdict_words(report, for_session=True)))
    diagnoses = [
        dataclasses.replace(d, fixes=[dataclasses.replace(f, why=paragraphs.hold(f.why)) for f in d.fixes])
        for d in report.diagnoses
    ]
    text = render_text(
        dataclasses.replace(report, verdict=verdict, diagnoses=diagnoses, next_questions=[]),
        headline=session_headline(report),  # the session says it in words, not pattern letters and phase ids
        probe_details=lambda probe: finding_lines(probe.get("findings") or []),
    )
    lines: List[str] = []
    for line in text.rstrip("\n").splitlines():
        lines.extend(paragraphs.restore(line))
    questions = open_questions(report, session)
    if questions:
        lines.append("")
        lines.append('Worth answering (pick "Answer a question" below; the diagnosis updates):')
        for q in questions:
            values = "|".join(q.get("values") or [])
            lines.append(f"  - {q['key']} ({values}): {q.get('text')}")
    return "\n".join(lines)


def _state(report: Report) -> str:
    v = report.verdict
    if v.state == "slow":
        return "slow"
    if v.hung is None and v.state_reasons:
        return "undecided"
    return {True: "hung", False: "progressing", None: "not observed"}[v.hung]


def _top(report: Report):
    return report.diagnoses[0] if report.diagnoses and report.verdict.cause else None


def report_changes(old: Report, new: Report) -> List[str]:
    """What a new diagnosis changed, in a few lines: the verdict, the top cause and its evidence,
    the other causes' confidence."""
    out = []
    if _state(old) != _state(new):
        out.append(f"Verdict: {_state(old)} -> {_state(new)}")
    if (old.pattern or "?") != (new.pattern or "?") and new.pattern in PATTERN_WORDS:
        out.append(f"Now: it {PATTERN_WORDS[new.pattern]}")
    before, after = _top(old), _top(new)
    if after is None:
        if before is not None:
            out.append(f"No cause stands out any more (was {before.cause}, {before.confidence:.0%})")
    elif before is None or before.cause != after.cause:
        was = f"; was {before.cause} ({before.confidence:.0%})" if before is not None else ""
        out.append(f"Cause now: {after.cause} - {after.title} ({after.confidence:.0%}){was}")
    elif round(before.confidence, 2) != round(after.confidence, 2):
        out.append(f"Cause: {after.cause} ({before.confidence:.0%} -> {after.confidence:.0%})")
    if after is not None:
        seen = set()
        for d in old.diagnoses:
            if d.cause == after.cause:
                seen = {(e.source, e.detail) for e in d.evidence}
        added = [e for e in after.evidence if (e.source, e.detail) not in seen]
        if added:
            out.append("New evidence:")
            out.extend(f"  + [{e.source}] {e.detail}" for e in added[:6])
    was = {d.cause: d.confidence for d in old.diagnoses}
    moved = []
    for d in new.diagnoses[1:6] if after is not None else new.diagnoses[:6]:
        if d.cause not in was:
            moved.append(f"{d.cause} {d.confidence:.0%} (new)")
        elif round(was[d.cause], 2) != round(d.confidence, 2):
            moved.append(f"{d.cause} {was[d.cause]:.0%} -> {d.confidence:.0%}")
    if moved:
        out.append("Other candidates: " + ", ".join(moved))
    asked = {q.get("key") for q in old.next_questions}
    new_questions = [q["key"] for q in new.next_questions if q.get("key") not in asked]
    if new_questions:
        out.append(f'Worth answering now: {", ".join(new_questions)} ("Answer a question" in the menu)')
    if not out:
        same = f": {after.cause} ({after.confidence:.0%})" if after is not None else ""
        out.append(f"The diagnosis did not change{same}.")
    out.append('("Show the whole report again" prints it all.)')
    return out


def render_evidence(report: Report, session: Session) -> str:
    """The live evidence as text: processes, GPUs, stacks grouped across ranks."""
    out = []
    if report.processes:
        out.append(f"{'pid':>8} {'role':18} {'rank':>4} {'st':2} {'cpu%':>5}  doing")
        for p in report.processes[:MAX_PROCESSES_SHOWN]:
            rank = "" if p.get("rank") is None else p["rank"]
            cpu = "" if p.get("cpu_percent") is None else f"{p['cpu_percent']:.0f}"
            out.append(f"{p['pid']:>8} {p['role']:18} {rank!s:>4} {p['state']:2} {cpu:>5}  {doing_phrase(p)}")
        if len(report.processes) > MAX_PROCESSES_SHOWN:
            out.append(f"  ... {len(report.processes) - MAX_PROCESSES_SHOWN} more")
    gpu = session.gpu.describe_util(session.job_gpus())
    if gpu is not None:
        out.append(f"GPUs: {gpu[1]}")
    elif session.gpu.available is False:
        out.append(f"GPUs: no GPU ({session.gpu.note})")
    culprit = (report.culprit or {}).get("pid")
    if report.stack_groups:
        out.append("Stacks across ranks:")
        for g in report.stack_groups:
            odd = culprit is not None and culprit in g.get("pids", [])
            out.append(f"  {'>>' if odd else '  '} {g['label']}: {g['top']}" + ("   <- the odd one out" if odd else ""))
    if report.culprit:
        out.append(f"Culprit: {report.culprit.get('reason', '')}")
    for item in report.missing:
        out.append(f"Missing: {item['what']}: {item['why']}")
        out.append(f"  To get it: {item['get_it']}")
    for error in report.errors[:3]:
        out.append(f"could not collect: {error}")
    return "\n".join(out)


def run_prompts(
    session: Session,
    out: Optional[TextIO] = None,
    input=None,
    output=None,
    *,
    width: Optional[int] = None,
    lines: Optional[bool] = None,
    stdin: Optional[TextIO] = None,
) -> int:
    """Walk the session with questionary prompts, or numbered lines where they cannot draw (see
    needs_numbered_lines; `lines` decides it for tests); the exit code (130 when interrupted, 0 on
    quit). `width` stands for the terminal's (tests)."""
    out = out or sys.stdout
    if lines is None:
        lines = input is None and output is None and needs_numbered_lines(out)
    if lines:
        return LineSession(session, out, width, stdin=stdin).run()
    return PlainSession(session, out, width, input=input, output=output).run()
