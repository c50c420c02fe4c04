"""Facts from the libraries, one line each, for the playbooks' rules (`source: fact`).

Every stack (a live one, or a dump pasted in a log) and every log line is read against the
frame-semantics table and the log catalog (skills/data/frames.yaml, log-catalog.yaml; each entry
cites the library source it comes from). What comes out is the same whatever the case:

- ``wait=<kind> entry=<id> lib=<library> thread=<main|other> [facts=...] [via=<id>] [libs=...]``: the
  innermost frame of a thread that means a wait (a queue, a lock, a collective, a socket...); ``via``
  names the first library frame below it that runs the caller's code (a tf.data generator, a
  py_func); ``libs`` every library whose table frames the thread is in, innermost first;
- ``job=<fact>``: what the frames prove about the job (it uses a DataLoader, torch.distributed...);
- ``log=<fact> entry=<id> k=v...``: a message a library prints, with the fields it carries;
- ``last=<fact>``: the last such event of a log's current run (what the job said before it went
  silent), and ``log-ends-in=<fact>`` for the very last line that is one;
- ``bar-ends-at=<start|middle|near-end|end>``: where the progress bar the log ends with stopped;
- ``prior=<fact>``: the last event before the first line that reports a wait already timed out (the
  catalog's ``stall_reports``: a watchdog or store timeout is printed long after the job stopped, so
  the event before it is what the job was doing when it stopped).

So one fact counts the same in every case; the playbooks weigh it.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from debug_stuck.core.libfacts import chosen_wait, match_frame, match_log_lines
from debug_stuck.core.logstacks import LogFrame
from debug_stuck.core.phases import phase_of

# py-spy's "function (file:line)", pystack's, and gdb's "in function (...) at file:line".
_FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
# Log facts that say what the job was doing (an event), as opposed to context that stays true.
_NOT_EVENTS = {"progress-bar", "launch", "dataloader-config", "hang-risk"}
# How many of a log's last lines count as what the job printed last (log-ends-in, bar-ends-at).
LAST_LINES = 3


def parse_frame(text: str) -> Tuple[str, Optional[str]]:
    found = _FRAME.match(text.strip())
    if not found:
        return text.strip(), None
    return found.group("function"), found.group("file") or None


def thread_facts(frames_table: Sequence[dict], frames: Iterable[str], main: bool) -> Tuple[Optional[str], List[str]]:
    """(the wait fact of one thread, the job facts its frames prove); frames innermost first."""
    via = None
    job: List[str] = []
    libraries: List[str] = []
    entries = []
    for text in frames:
        function, file = parse_frame(text)
        entry = match_frame(frames_table, function, file)
        if entry is None:
            continue
        entries.append(entry)
        if entry.get("library") and entry["library"] not in libraries:
            libraries.append(entry["library"])
        for fact in entry.get("facts") or ():
            if fact not in job:
                job.append(fact)
    chosen = chosen_wait(entries)
    wait_line = None
    if chosen is not None:
        entry = entries[chosen]
        who = "main" if main else "other"
        wait_line = f"wait={entry['wait']} entry={entry['id']} lib={entry.get('library', '?')} thread={who}"
        via = next((e["id"] for e in entries[chosen + 1 :] if e.get("wait") == "busy"), None)
    if wait_line is not None and job:
        wait_line += " facts=" + ",".join(job)  # what the thread's frames prove, for rules that need both
    if wait_line is not None and via is not None:
        wait_line += f" via={via}"  # the library code that called the code that waits (a generator it runs)
    if wait_line is not None and len(libraries) > 1:
        # every library the thread is inside, innermost first: a wait in threading's Condition under
        # wandb's mailbox is wandb's wait too (the libraries a pasted dump shows)
        wait_line += " libs=" + ",".join(libraries)
    return wait_line, job


def log_facts(
    catalog: Sequence[dict], lines: Sequence[str], stall_reports: Sequence[str] = ()
) -> List[Tuple[int, str]]:
    """(index of the line, fact line) for each line a library message describes, then the last event
    and the event before the first stall report."""
    out: List[Tuple[int, str]] = []
    bar: Optional[Tuple[int, dict]] = None
    last: Optional[Tuple[int, str]] = None
    prior: Optional[Tuple[int, str]] = None
    stalled_at: Optional[int] = None
    matches = match_log_lines(catalog, list(lines))
    interrupted_at = _interrupt_start(lines, matches)
    for index, entry, groups in matches:
        fields = " ".join(f"{k}={_word(v)}" for k, v in sorted(groups.items()) if v)
        out.append((index, f"log={entry['fact']} entry={entry['id']}" + (f" {fields}" if fields else "")))
        if entry["fact"] == "progress-bar":
            bar = (index, groups)
        if entry["fact"] in stall_reports and stalled_at is None:
            stalled_at = index
        if entry["fact"] not in _NOT_EVENTS and (interrupted_at is None or index < interrupted_at):
            last = (index, entry["fact"])
            if stalled_at is None and entry["fact"] not in stall_reports:
                prior = (index, entry["fact"])
    if stalled_at is not None and prior is not None:
        out.append((prior[0], f"prior={prior[1]}"))
    position = _bar_position(bar[1]) if bar is not None and bar[0] >= len(lines) - LAST_LINES else None
    if position is not None:
        out.append((bar[0], f"bar-ends-at={position}"))
    if last is not None:
        index, fact = last
        out.append((index, f"last={fact}"))
        if index >= len(lines) - LAST_LINES:
            out.append((index, f"log-ends-in={fact}"))
    return out


# The terminal's echo of Ctrl+C (termios ECHOCTL prints it as "^C"), at the start of a line.
_CTRL_C = re.compile(r"^\s*\^C")


def _interrupt_start(lines: Sequence[str], matches) -> Optional[int]:
    """The line where the user's last interrupt begins (its "^C", or the traceback that ends in
    KeyboardInterrupt), when nothing the job did follows it: what follows is the interrupt, printed
    after the hang, not what the job was doing. An interrupt followed by more of the job's events
    was an earlier run's (a log appended to across restarts)."""
    heads = [index for index, entry, _ in matches if entry["fact"] == "exception"]
    keyboard = [index for index, entry, _ in matches if entry["id"] == "python-keyboard-interrupt"]
    starts = [index for index, line in enumerate(lines) if _CTRL_C.match(line)]
    for index in keyboard:
        before = [h for h in heads if h <= index]
        starts.append(before[-1] if before else index)
    if not starts:
        return None
    start = max(starts)
    end = max([start, *(k for k in keyboard if k >= start)])
    interrupt_facts = {"exception", "interrupted"}
    if any(i > end and e["fact"] not in _NOT_EVENTS | interrupt_facts for i, e, _ in matches):
        return None
    return start


# A bar over something other than a training epoch: evaluation, caching, loading, downloading, mapping.
NOT_AN_EPOCH = re.compile(
    r"(?i)\b(val\w*|eval\w*|test\w*|predict\w*|sanity|cach\w*|load\w*|download\w*|fetch\w*|map|generat\w*)\b"
)


def _bar_position(groups: dict) -> Optional[str]:
    """Where the progress bar the log ends with stopped: `near-end` when it is within the last tenth
    of a loop of 20 or more (an epoch whose last batches never came), `end`, `start` or `middle`."""
    if "iter" in groups and not groups.get("epoch"):
        return None  # an iteration-based loop counts the whole run, not an epoch
    if NOT_AN_EPOCH.search(str(groups.get("desc") or "")):
        return None
    try:
        n, total = int(groups.get("n") or groups.get("iter")), int(groups.get("total"))
    except (TypeError, ValueError):
        return None
    if total < 20:
        return None
    if n >= total:
        return "end"
    if n == 0:
        return "start"
    return "near-end" if n >= 0.9 * total else "middle"


def _word(value) -> str:
    return re.sub(r"\s+", "_", str(value).strip())[:80]


def group_threads(stack_lines) -> List[Tuple[str, List[str]]]:
    """(subject, frames innermost first) for each thread of the observations' stack lines (each
    thread's frames are consecutive and share a subject)."""
    out: List[Tuple[str, List[str]]] = []
    for line in stack_lines:
        subject = line.subject or ""
        if out and out[-1][0] == subject:
            out[-1][1].append(line.text)
        else:
            out.append((subject, [line.text]))
    return out


_THREAD_START = re.compile(r"^(_bootstrap|_bootstrap_inner|start_thread|clone3?) \(")


def is_main(subject: str, frames: Sequence[str] = ()) -> bool:
    """A process's main thread, by the name its dump gives it or, where the dump names threads by
    their program (pystack: the thread's comm), by its frames: only the main thread runs a module's
    top level (`<module>`), and a thread the threading module started begins in `_bootstrap`."""
    if "MainThread" in subject or "'main'" in subject or subject.endswith("in main") or "Thread 1" in subject:
        return True
    return any(f.startswith("<module> (") for f in frames) and not any(_THREAD_START.match(f) for f in frames)


def job_facts_of(lines: Iterable[str]) -> Dict[str, int]:
    """How many fact lines name each job fact (`job=<fact>`)."""
    found: Dict[str, int] = {}
    for text in lines:
        if text.startswith("job="):
            name = text.split("=", 1)[1].split()[0]
            found[name] = found.get(name, 0) + 1
    return found


def add_facts(knowledge, obs) -> None:
    """The fact lines of everything observed (stacks live or pasted, log lines), added to `obs`."""
    from debug_stuck.core.classify import ObservedLine

    frames_table = knowledge.frames
    if frames_table:
        pasted_mains = []
        for subject, frames in group_threads(obs.lines.get("stack", ())):
            first = next(line for line in obs.lines["stack"] if (line.subject or "") == subject)
            main = is_main(subject, frames)
            wait, job = thread_facts(frames_table, frames, main)
            where = dict(subject=subject or None, pid=first.pid, file=first.file, origin="stack")
            if wait:
                obs.add("fact", ObservedLine(wait, **where))
            for fact in job:
                obs.add("fact", ObservedLine(f"job={fact}", **where))
            if first.file and first.pid is None and main:
                pasted_mains.append((subject, frames, wait or "", first.file))
        straggler = _pasted_straggler(knowledge, pasted_mains)
        if straggler is not None:
            text, subject, file = straggler
            obs.add("fact", ObservedLine(text, subject=subject, file=file, origin="stack"))
    catalog = knowledge.log_catalog
    if catalog:
        by_file: Dict[Optional[str], list] = {}
        for line in obs.lines.get("log", ()):
            by_file.setdefault(line.file, []).append(line)
        for file, lines in by_file.items():
            for index, text in log_facts(catalog, [line.text for line in lines], knowledge.stall_reports):
                source = lines[index]
                obs.add("fact", ObservedLine(text, file=file, line=source.line, origin="log", quote=source.text))
    _watchdog_census(obs)
    _drop_single_process_census(obs, knowledge.distributed_log_facts)


_WATCHDOG_REPORT = re.compile(
    r"^log=collective-timeout entry=\S+ (?=.*\bop=(?P<op>\w+))(?=.*\brank=(?P<rank>\d+))(?=.*\bseq=(?P<seq>\d+))"
)


def _watchdog_census(obs) -> None:
    """`watchdog-census seq=S op=OP timed-out=1,2,3 silent=0`: in one log, two or more ranks report
    that their NCCL watchdog timed out in the same collective (ProcessGroupNCCL's watchdog reports
    each rank's own pending work), and ranks below the highest reporter did not: those never
    enqueued that collective, so the others wait for them (if their output is in this log)."""
    from debug_stuck.core.classify import ObservedLine

    reports: Dict[Tuple[Optional[str], str, str], set] = {}
    for line in obs.lines.get("fact", ()):
        found = _WATCHDOG_REPORT.match(line.text) if line.origin == "log" else None
        if found:
            reports.setdefault((line.file, found["seq"], found["op"]), set()).add(int(found["rank"]))
    for (file, seq, op), ranks in reports.items():
        silent = sorted(set(range(max(ranks))) - ranks)
        if len(ranks) >= 2 and silent:
            names = ",".join(map(str, sorted(ranks)))
            text = f"watchdog-census seq={seq} op={op} timed-out={names} silent={','.join(map(str, silent))}"
            obs.add("fact", ObservedLine(text, file=file, origin="log"))


_DATA_WORKER = re.compile(r"^_worker_loop \(")  # torch's DataLoader worker (torch/utils/data/_utils/worker.py)


def _pasted_straggler(knowledge, mains) -> Optional[Tuple[str, str, Optional[str]]]:
    """`straggler waiting=N of=M op=<call> [phase=<phase>] at=<frame>`: of the main threads of the
    processes whose dumps were pasted, the others wait in a collective (frames.yaml wait=collective)
    and one is elsewhere, at its innermost frame of Python code, in a long phase its frames show (a
    checkpoint save, a validation pass: core.phases). They wait for it if the job is stuck; one dump
    cannot tell its long pass from a stuck loop. `mains`: (subject, frames, wait line, file).
    Returns (the fact line, its subject, its file)."""
    frames_table = knowledge.frames
    waiting = [m for m in mains if m[2].startswith("wait=collective ")]
    others = [m for m in mains if not m[2].startswith(("wait=collective ", "wait=rendezvous "))]
    if not waiting or len(others) != 1 or any(_DATA_WORKER.match(f) for f in others[0][1]):
        return None  # a DataLoader worker's dump beside its rank's is no rank the others wait for
    subject, frames, _, file = others[0]
    at = next((f for f in frames if re.search(r"\.py(:\d+)?\)$", f)), frames[0] if frames else "?")
    op = "collective"
    for text in waiting[0][1]:
        function, where = parse_frame(text)
        entry = match_frame(frames_table, function, where)
        if entry is not None and entry.get("wait") == "collective":
            op = function.split(".")[-1]
            break
    parsed = [LogFrame(*parse_frame(text), None) for text in frames]
    phase = phase_of([f for f in parsed if f.file], knowledge)
    shown = f" phase={phase[0]}" if phase else ""
    return f"straggler waiting={len(waiting)} of={len(mains)} op={op}{shown} at={at}", subject, file


def _drop_single_process_census(obs, distributed_log_facts=()) -> None:
    """A frame of a distributed library (jax.distributed, Horovod, tf.distribute, torch.distributed),
    or a message only a job of several processes prints (the catalog's `distributed_facts`: DDP's
    bucket rebuild, a rendezvous wait), is a sign of a distributed job that a log's words may lack:
    the census of those words then no longer says "one process"."""
    from debug_stuck.core.logs import SINGLE_PROCESS_CENSUS

    framed = any(line.text == "job=distributed" for line in obs.lines.get("fact", ()))
    if not framed and not logged_facts(obs, distributed_log_facts):
        return
    logs = obs.lines.get("log")
    if logs:
        obs.lines["log"] = [line for line in logs if not line.text.startswith(SINGLE_PROCESS_CENSUS)]


def logged_facts(obs, wanted: Iterable[str]) -> List[str]:
    """The log facts among `wanted` that the observed logs print (`log=<fact>` lines), once each."""
    names = set(wanted)
    found: List[str] = []
    for line in obs.lines.get("fact", ()):
        if line.text.startswith("log="):
            fact = line.text[4:].split(" ", 1)[0]
            if fact in names and fact not in found:
                found.append(fact)
    return found
