"""Stack dumps pasted into or written by a log, read back as stacks.

A user's best evidence is often already in the log: the traceback of the Ctrl-C they pressed
while it hung, a `faulthandler.dump_traceback` (or `dump_traceback_later`) dump, a `py-spy dump`
they ran, a gdb `bt`/`py-bt`. Each is turned into threads of frames, innermost first, in the same
"function (file:line)" form as live stacks, so the playbooks' stack signals match them unchanged.

Formats (each may carry a per-line prefix such as `[rank0]:`, `[default3]:`, `0: ` or a timestamp,
which is stripped when the whole block shares it):
- traceback:   `Traceback (most recent call last):` then `  File "p.py", line 3, in f` (outermost
  first) and the exception line;
- faulthandler: `Thread 0x00007f... (most recent call first):` or `Current thread 0x...` then
  `  File "p.py", line 3 in f` (innermost first);
- py-spy:      `Thread 1234 (idle): "MainThread"` then `    f (p.py:3)` (innermost first);
- gdb:         `#0  0x00007f... in func (args) at file.c:12` or `#3  func (...) from lib.so`, and
  py-bt's `  File "p.py", line 3, in f` (innermost first);
- pystack:     `Traceback for thread 472 (python3) [Has the GIL] (most recent call last):` then
  `    (Python) File "p.py", line 3, in f` and, with --native, `    (C) File "???", line 0, in
  sym(args) (lib.so)` (outermost first; pystack's traceback_formatter.format_thread, 1.x).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional

from debug_stuck.core.dumptext import FH_FRAME, FH_START, short_path

MAX_THREADS = 64
MAX_FRAMES = 64

_PREFIX = re.compile(
    r"^(?:\[(?:rank|default|RANK )?\d+\]:?\s?|\d+:\s|\S+:\d+:\d+ \[\d+\] |\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s?|"
    r"\d{4}-\d\d-\d\d[ T][\d:.,]+\s(?:\(\S+\)\s)?:?\s?)"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # a dump pasted from a coloured terminal (pystack colours its output)
_PYSTACK_START = re.compile(
    r"^Traceback for thread (?P<ident>\d+)(?: \((?P<name>[^)]*)\))?(?: \[[^\]]*\])* \(most recent call"
)
_PYSTACK_FRAME = re.compile(
    r'^\s*\((?P<lang>Python|C)\) File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+?)'
    r"(?: \((?P<lib>[^()]*)\))?\s*$"
)
_TB_START = re.compile(r"Traceback \(most recent call (?P<order>last|first)\):")
_TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_CARETS = re.compile(r"^\s+[~^]+\s*$")  # 3.11+ marks the failing expression under its source line
_FH_START = FH_START
_FH_FRAME = FH_FRAME
_PYSPY_START = re.compile(r'^Thread (?P<ident>0x[0-9A-Fa-f]+|\d+) \((?P<state>[\w+]+)\)(?:: "(?P<name>[^"]*)")?')
# py-spy --native names C++ frames in full, parentheses and all ("f<...>(void (*)(T&), ...)::{lambda(...)#1}::
# __invoke (lib.so)"): the location is the last "(file[:line])" of the line.
_PYSPY_FRAME = re.compile(r"^\s{2,}(?P<func>[^\s()].*?) \((?P<file>[^():]+)(?::(?P<line>\d+))?\)\s*$")
# "#2  0x7f.. in ns::Class::method(std::chrono::duration<...>) () from /lib/x.so": the name may hold
# its own parameter list; the last "(...)" is the arguments.
_GDB_FRAME = re.compile(
    r"^#(?P<n>\d+)\s+(?:0x[0-9a-f]+ in )?(?P<func>[^\s(]+(?:\([^)]*\))?) \((?P<args>.*)\)"
    r"(?: (?:at|from) (?P<file>\S+?)(?::(?P<line>\d+))?)?\s*$"
)
_FRAME_TEXT = re.compile(r"^(?P<func>[\w.<>]+) \((?P<file>[^():]+?)(?::(?P<line>\d+))?\)$")
_CHAIN = re.compile(r"^[\w.<>]+ \([^()]+\)\s*<-")
_PROCESS = re.compile(r"^(?:\^C)?Process (?P<name>[\w.-]+):$")
# IPython before 8: "~/env/lib/x.py in method(self, a)", the line number on the "-> 1611" line below;
# under Python 2 it names the compiled file ("x.pyc"), read as its source file
_IPY_OLD_FRAME = re.compile(r"^(?P<file>\S+\.py)c? in (?P<func>[\w.<>]+)\(")
_IPY_CURRENT = re.compile(r"^\s*-+>\s*(?P<line>\d+)\b")
_IPY_FRAME = re.compile(r"^\s*File (?P<file>[^\s,]+):(?P<line>\d+), in (?P<func>[\w.<>]+)")
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Timeout\w*))(?::\s?(?P<msg>.*))?$"
)


@dataclass
class LogFrame:
    function: str
    file: str
    line: Optional[int]
    native: bool = False

    @property
    def bare_name(self) -> str:
        return self.function if self.native else self.function.rsplit(".", 1)[-1]

    def text(self) -> str:
        """The live-stack form: "function (file:line)", file shortened like py-spy's."""
        where = _short(self.file)
        if self.line is None:
            return f"{self.bare_name} ({where})"
        return f"{self.bare_name} ({where}:{self.line})"


@dataclass
class LogThread:
    kind: str  # traceback | faulthandler | py-spy | gdb | pystack | ipython | chain
    name: str
    frames: List[LogFrame] = field(default_factory=list)  # innermost first
    exception: Optional[str] = None  # a traceback's last line ("KeyboardInterrupt")
    line: int = 0  # index of the dump's first line in the text given


_short = short_path


def _strip(line: str) -> str:
    line = _ANSI.sub("", line.rstrip("\r\n"))
    for _ in range(2):  # "[rank0]:[2024-...] ..." carries two prefixes
        m = _PREFIX.match(line)
        if not m or not m.group(0):
            break
        line = line[m.end() :]
    return line


def extract_stacks(lines: List[str]) -> List[LogThread]:
    """Every stack dump in the lines, as threads with frames innermost first (bounded in count)."""
    text = [_strip(line) for line in lines]
    out: List[LogThread] = []
    i = 0
    while i < len(text) and len(out) < MAX_THREADS:
        line = text[i]
        if _PYSTACK_START.match(line.strip()):
            thread, i = _pystack(text, i)
        elif _TB_START.search(line):
            thread, i = _traceback(text, i)
        elif _FH_START.match(line.strip()):
            thread, i = _faulthandler(text, i)
        elif _PYSPY_START.match(line.strip()):
            thread, i = _pyspy(text, i)
        elif re.match(r"^#0\s", line.strip()):
            thread, i = _gdb(text, i)
        elif _FH_FRAME.match(line):  # faulthandler frames pasted without their "Thread 0x..." header
            thread, i = _faulthandler(text, i - 1, headerless=True)
        elif _TB_FRAME.match(line) and _more_frames(text, i):  # a traceback pasted without its header
            thread, i = _traceback(text, i - 1, headerless=True)
        elif _CHAIN.match(line.strip()):
            thread, i = _chain(text, i)
        elif _IPY_FRAME.match(line) or _IPY_OLD_FRAME.match(line):
            thread, i = _ipython(text, i)
        else:
            i += 1
            continue
        if thread is not None and thread.frames:
            out.append(thread)
    return out


def process_errors(lines: List[str]) -> List[dict]:
    """The tracebacks multiprocessing printed for children that ended with an exception: CPython's
    BaseProcess._bootstrap writes "Process NAME:" and the traceback to stderr, and the child exits with
    code 1 (Lib/multiprocessing/process.py). Each: the process's name, the exception line, where."""
    out = []
    for thread in extract_stacks(lines):
        if thread.kind != "traceback" or not thread.name.startswith("process ") or not thread.exception:
            continue
        if thread.exception.startswith(("KeyboardInterrupt", "SystemExit")):
            continue
        out.append(
            {"process": thread.name[len("process ") :], "exception": thread.exception, "at": thread.frames[0].text()}
        )
    return out


def feeder_errors(lines: List[str]) -> List[str]:
    """The exception lines of tracebacks a multiprocessing Queue's feeder thread printed: it could not
    pickle an item, printed the traceback and dropped the item (CPython 3.11 Lib/multiprocessing/
    queues.py: Queue._feed calls _on_queue_feeder_error, which calls traceback.print_exc()); no reader
    ever gets it."""
    return [
        thread.exception
        for thread in extract_stacks(lines)
        if thread.kind == "traceback"
        and thread.exception
        and any(f.bare_name == "_feed" and re.search(r"multiprocess(ing)?/queues\.py$", f.file) for f in thread.frames)
    ]


def since_last_process_error(lines: List[str]) -> List[str]:
    """The lines from the "Process NAME:" of the second last multiprocessing child traceback that ends
    in its exception line (or the last, when there is one) on; none when there is none: the
    tracebacks a log's growth may repeat, and any that was still being written when the growth began.
    Two, so that a growth holding only part of one more (a frame line) still reads as a repeat."""
    kinds = [_line_kind(line) for line in lines]
    exceptions = [i for i, kind in enumerate(kinds) if kind == "exception"][-2:]
    if not exceptions:
        return []
    start = next((i for i in range(exceptions[0], -1, -1) if kinds[i] == "process"), None)
    return lines[start:] if start is not None else []


def _line_kind(line: str) -> str:
    """What a line of a multiprocessing child's traceback is: "process" (its "Process NAME:"),
    "traceback" (the header, a frame, a source line or carets: indented), "exception", "blank", or
    "other" (not a traceback's line)."""
    stripped = _strip(line)
    text = stripped.strip()
    if not text:
        return "blank"
    if stripped[:1].isspace() or _TB_START.search(text):
        return "traceback"
    if _PROCESS.match(text):
        return "process"
    return "exception" if _EXCEPTION.match(text) else "other"


def _traceback_line(lines: List[str], kinds: List[str], i: int) -> bool:
    line = lines[i]
    if kinds[i] in ("process", "exception") or _TB_FRAME.match(line) or _TB_START.search(line):
        return True
    return bool(_CARETS.match(line)) or (i > 0 and bool(_TB_FRAME.match(lines[i - 1])))


def only_repeated_errors(lines: List[str], new_from: int = 0) -> Optional[str]:
    """The exception line, when the lines are nothing but multiprocessing child tracebacks of one
    error, two or more of them (a Pool whose initializer raises respawns its workers, each
    printing the same traceback): a log that grows so is no progress. None for any other text.
    Workers that die together interleave their tracebacks line by line ("Process ForkPoolWorker-300:",
    "Process ForkPoolWorker-301:", two "Traceback" lines, then both frame lists), so the lines are
    counted by kind, not parsed as whole tracebacks. The lines from `new_from` on (a log's growth)
    are each a line only a traceback has (its header, a frame and the source line under it, carets,
    an exception, a "Process NAME:") or one the lines before them hold already: an indented line
    of the job's own is no traceback."""
    kinds = [_line_kind(line) for line in lines]
    if "other" in kinds:
        return None  # a line of the job's own among them
    seen = set(lines[:new_from])
    grown = [i for i in range(new_from, len(lines)) if kinds[i] != "blank"]
    if not grown or not all(_traceback_line(lines, kinds, i) or lines[i] in seen for i in grown):
        return None
    exceptions = [_strip(line).strip()[:200] for line, kind in zip(lines, kinds) if kind == "exception"]
    children = kinds.count("process")
    repeated = children >= 2 or (children == 1 and len(exceptions) >= 2)
    return exceptions[0] if repeated and len(set(exceptions)) == 1 else None


# A line that reports a failure or a retry, as logging levels and the usual words print it
_FAILURE_WORDS = re.compile(
    r"\b(WARN(ING)?|ERROR|CRITICAL|[Ee]rror|[Ff]ail(ed|ure)?|[Rr]efused|[Uu]nreachable|[Rr]etry(ing)?|[Tt]imed out)\b"
)
REPEATED_LINE = "the same line: "  # the mark of only_repeated_line's answer


def only_repeated_line(lines: List[str]) -> Optional[str]:
    """REPEATED_LINE and the last line, when the lines are two or more of one failure or retry message
    that differ only in their numbers (a timestamp, an attempt count): a job that logs nothing but
    "tracking server unreachable ..., retry 7 in 2s" retries one failing call and makes no progress.
    None for any other text (a progress line, `step 7 loss 0.31`, names no failure)."""
    kept = [_strip(line).strip() for line in lines if line.strip()]
    if len(kept) < 2 or len({re.sub(r"\d+", "#", line) for line in kept}) != 1:
        return None
    return REPEATED_LINE + kept[-1][:200] if _FAILURE_WORDS.search(kept[-1]) else None


# The first line of a dump a debugging tool prints, not the job: py-spy's "Process 123: cmd", pystack's
# "Traceback for thread", gdb's "Thread 1 (Thread 0x7f... (LWP 12))" or its first frame.
_TOOL_DUMP_HEAD = re.compile(r"^(Process \d+: |Traceback for thread \d+|Thread \d+ \(Thread 0x[0-9a-f]+|#0\s)")


def is_tool_dump(lines: List[str]) -> bool:
    """The text is a stack dump a tool wrote (py-spy, pystack, gdb), from its first line: a file that
    only holds a dump. Its age is the dump's, not a silence of the job's log."""
    first = next((_strip(line).strip() for line in lines if line.strip()), "")
    return bool(_TOOL_DUMP_HEAD.match(first)) and bool(extract_stacks(lines[:200]))


def _more_frames(text: List[str], i: int) -> bool:
    """A headerless fragment counts when a second frame follows within the next two lines."""
    return any(_TB_FRAME.match(line) for line in text[i + 1 : i + 3])


def _traceback(text: List[str], start: int, headerless: bool = False):
    """A Python traceback (outermost first), or gdb py-bt's "most recent call first" one. A pasted
    fragment without its header is read outermost first, as Python prints it."""
    innermost_first = not headerless and _TB_START.search(text[start])["order"] == "first"
    name = "traceback"
    process = _PROCESS.match(text[start - 1].strip()) if start >= 1 else None
    if process:  # multiprocessing names the child whose traceback follows
        name = f"process {process['name']}"
    frames: List[LogFrame] = []
    i = start + 1
    while i < len(text):
        m = _TB_FRAME.match(text[i])
        if m:
            frames.append(LogFrame(m["func"], m["file"], int(m["line"])))
            i += 1
            if i < len(text) and not _TB_FRAME.match(text[i]) and _is_source_line(text, i):
                i += 1  # the source line under the frame
            while i < len(text) and _CARETS.match(text[i]):
                i += 1  # 3.11+ carets
            continue
        break
    exception = None
    if i < len(text):
        m = _EXCEPTION.match(text[i].strip())
        if m:
            exception = text[i].strip()[:200]
            i += 1
    if not innermost_first:
        frames.reverse()  # tracebacks print the outermost call first
    return LogThread("traceback", name, frames[:MAX_FRAMES], exception, start), max(i, start + 1)


def _is_source_line(text: List[str], i: int) -> bool:
    """The source line under a frame: indented, or (in a paste that lost its indentation) a line
    followed by the next frame."""
    if text[i].startswith(("    ", "\t")):
        return True
    return i + 1 < len(text) and bool(_TB_FRAME.match(text[i + 1])) and not _EXCEPTION.match(text[i].strip())


def _faulthandler(text: List[str], start: int, headerless: bool = False):
    m = None if headerless else _FH_START.match(text[start].strip())
    name = (m["name"] or m["ident"]) if m else "thread"
    frames: List[LogFrame] = []
    i = start + 1
    while i < len(text):
        f = _FH_FRAME.match(text[i])
        if not f:
            break
        frames.append(LogFrame(f["func"], f["file"], int(f["line"])))
        i += 1
    return LogThread("faulthandler", name, frames[:MAX_FRAMES], None, start), i


def _ipython(text: List[str], start: int):
    """An IPython/Jupyter traceback: "File ~/x.py:118, in Cls.method(args)" frames, outermost first,
    each followed by numbered source lines."""
    frames: List[LogFrame] = []
    i = start
    while i < len(text):
        m = _IPY_FRAME.match(text[i])
        if m:
            frames.append(LogFrame(m["func"], m["file"], int(m["line"])))
            i += 1
            continue
        m = _IPY_OLD_FRAME.match(text[i])
        if m:
            frames.append(LogFrame(m["func"], m["file"], None))
            i += 1
            continue
        current = _IPY_CURRENT.match(text[i])
        if current and frames and frames[-1].line is None:
            frames[-1] = LogFrame(frames[-1].function, frames[-1].file, int(current["line"]))
        if re.match(r"^\s*(?:-+>\s*)?\d+\s|^\s*$|^\s+\S", text[i]):  # source lines, blank lines
            i += 1
            continue
        break
    frames.reverse()
    return LogThread("ipython", "traceback", frames[:MAX_FRAMES], None, start), i


def _chain(text: List[str], start: int):
    """ "wait (threading.py:355) <- result (concurrent/futures/_base.py:451)", possibly continued on
    lines that start with "<-": a stack written on one line, innermost first."""
    joined = text[start].strip()
    i = start + 1
    while i < len(text) and text[i].strip().startswith("<-"):
        joined += " " + text[i].strip()
        i += 1
    frames = []
    for part in joined.split("<-"):
        m = _FRAME_TEXT.match(part.strip())
        if m:
            frames.append(LogFrame(m["func"], m["file"], int(m["line"]) if m["line"] else None))
    return LogThread("chain", "chain", frames[:MAX_FRAMES], None, start), i


def _pyspy(text: List[str], start: int):
    m = _PYSPY_START.match(text[start].strip())
    name = m["name"] or m["ident"]
    frames: List[LogFrame] = []
    i = start + 1
    while i < len(text):
        f = _PYSPY_FRAME.match(text[i])
        if not f:
            if text[i].strip().startswith(("Arguments:", "Locals:")) or re.match(r"^\s{6,}\S", text[i]):
                i += 1  # py-spy --locals output under a frame
                continue
            break
        native = not f["file"].endswith((".py", ".pyx")) and "<" not in f["file"]
        frames.append(LogFrame(f["func"].strip(), f["file"], int(f["line"]) if f["line"] else None, native))
        i += 1
    return LogThread("py-spy", name, frames[:MAX_FRAMES], None, start), i


def _pystack(text: List[str], start: int):
    """pystack's traceback: Python frames with their source line (and --locals sections) under
    them, native frames as "(C) File ..., in symbol(args) (library)", outermost first."""
    m = _PYSTACK_START.match(text[start].strip())
    name = m["name"] or m["ident"]
    frames: List[LogFrame] = []
    i = start + 1
    while i < len(text):
        f = _PYSTACK_FRAME.match(text[i])
        if f and f["lang"] == "Python":
            frames.append(LogFrame(f["func"], f["file"], int(f["line"])))
        elif f:
            symbol = re.sub(r"\(.*\)(?: const)?$", "", f["func"]).strip()
            if symbol and symbol != "???":  # unnamed native frames say nothing a reader can use
                library = (f["lib"] or f["file"]).rsplit("/", 1)[-1]  # py-spy --native names it so
                frames.append(LogFrame(symbol, library, None, True))
        elif not (text[i].startswith("      ") or text[i].strip().startswith("* - Unable to merge")):
            break  # neither a frame nor the source, arguments or locals under one
        i += 1
    frames.reverse()
    return LogThread("pystack", name, frames[:MAX_FRAMES], None, start), i


def _gdb(text: List[str], start: int):
    frames: List[LogFrame] = []
    i = start
    while i < len(text):
        line = text[i].strip()
        if line.startswith("#") and re.match(r"^#\d+\s", line):
            # gdb wraps long argument lists onto indented lines: join them back
            j = i + 1
            while j < len(text) and text[j][:1] in (" ", "\t") and not text[j].strip().startswith("#"):
                if _TB_FRAME.match(text[j]):
                    break
                line += " " + text[j].strip()
                j += 1
            m = _GDB_FRAME.match(line)
            if m is None:
                break
            name = m["func"].split("(", 1)[0].strip() or m["func"]
            frames.append(LogFrame(name, m["file"] or "?", int(m["line"]) if m["line"] else None, True))
            i = j
            continue
        py = _TB_FRAME.match(text[i])
        if py:  # py-bt lines between native frames
            frames.append(LogFrame(py["func"], py["file"], int(py["line"])))
            i += 1
            continue
        break
    return LogThread("gdb", "gdb", frames[:MAX_FRAMES], None, start), i
