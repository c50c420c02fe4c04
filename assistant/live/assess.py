"""What live evidence adds to a report: processes, GPUs, stack groups, the culprit or the collective
mismatch, the chain from the stuck job to what it waits on, and the progress verdict.

`analyze` runs before the classification (the chain's facts are evidence the playbooks' `chain`
signals match); `fill_live` puts it all in the report after, and says it in the verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Set

from debug_stuck.core.answers import Answer
from debug_stuck.core.calibration import assign_probabilities
from debug_stuck.core.classify import (
    CAUSE_THRESHOLD,
    Observations,
    ObservedLine,
    classify,
    noisy_or,
    phase_for_new_cause,
)
from debug_stuck.core.contradictions import contradicted
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.libfacts import innermost_wait
from debug_stuck.core.phases import phase_of
from debug_stuck.core.report import Evidence, Report
from debug_stuck.live.chain import Chain, build_chains
from debug_stuck.live.chaintext import chain_sentence
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.culprit import (
    WAITING_CAUSE,
    Culprit,
    Mismatch,
    apart_from_waiters,
    find_culprit,
    find_mismatch,
    find_p2p_deadlock,
    find_site_mismatch,
    stuck_rank,
    waits_in_collective,
)
from debug_stuck.live.feeders import hands_over
from debug_stuck.live.helpers import busy_helpers, computes_in_library, thread_computes_in_library
from debug_stuck.live.jobfacts import in_library_retry_loop, runs_dataloader
from debug_stuck.live.loopexit import left_loop_side
from debug_stuck.live.observe import (
    CPU_BUSY,
    StackGroup,
    describe_ranks,
    fact_role,
    group_ranks,
    rank_alone,
    stack_motion,
)
from debug_stuck.live.parties import JobView, in_thread_sync
from debug_stuck.live.progress import STOPPED_STATES, Progress, cpu_used, judge_progress
from debug_stuck.live.wakes import WATCH_MAX_SECONDS
from debug_stuck.probes.collectors.lockfiles import HOLDER_GAP
from debug_stuck.probes.collectors.stacks import main_thread

CULPRIT_WEIGHT = 0.5
MISMATCH_WEIGHT = 0.7
PROGRESSING_CEILING = 0.2  # the most a candidate's confidence is worth on a job that progresses
UNDECIDED_CEILING = 0.45  # and on one not told apart from slow work (under a sure verdict's 0.5)


@dataclass
class LiveAnalysis:
    groups: List[StackGroup]
    culprit: Optional[Culprit]
    mismatch: Optional[Mismatch]
    chains: List[Chain]
    progress: Progress
    waiting: List[int] = field(default_factory=list)  # pids waiting in a collective
    facts: Set[str] = field(default_factory=set)  # what the job is made of (set by the pipeline's judge)


def process_entries(snap: Snapshot) -> List[dict]:
    """The report's processes. A trainer's child is named a DataLoader worker only in a job whose
    stacks show a DataLoader; elsewhere it is a `worker-process` (a multiprocessing.Process, a pool's
    worker), as the playbooks read it (observe.fact_role)."""
    out = []
    dataloader_job = runs_dataloader(snap)
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        entry = info.to_dict()
        entry["role"] = fact_role(info, dataloader_job, dump)
        entry["threads"] = [t.to_dict() for t in dump.threads] if dump else []
        entry["stack"] = stack_motion(series, info.state) or "unknown"
        if series is not None and series.error:
            entry["stack_error"] = series.error
        out.append(entry)
    return out


def descendants(snap: Snapshot, pid: int) -> List[int]:
    found, queue = [pid], [pid]
    while queue:
        parent = queue.pop()
        for info in snap.processes:
            if info.ppid == parent and info.pid not in found:
                found.append(info.pid)
                queue.append(info.pid)
    return found


def stack_phase(snap: Snapshot, knowledge: Knowledge, pid: int) -> Optional[str]:
    """ "checkpoint", "validation" or "sampling" when the main thread of pid is in such a pass, as
    skills/data/phases.yaml tells it from frames that mean it (not from a word in any name)."""
    found = stack_phase_frame(snap, knowledge, pid)
    return found[0] if found else None


def main_thread_wait(snap: Snapshot, knowledge: Knowledge, pid: int) -> Optional[str]:
    """What pid's main thread waits on, as the frame table's innermost wait on its stack names it."""
    thread = snap.latest_main_thread(pid)
    frames = [(frame.function, frame.file) for frame in thread.frames] if thread is not None else []
    found = innermost_wait(knowledge.frames, frames)
    return found[1].get("wait") if found else None


def polls_in_retry_loop(snap: Snapshot, knowledge: Knowledge, pid: int) -> bool:
    """pid's main thread sat inside one and the same call of a retrying wait in every sample: the
    frames from the outermost to that call are identical (line numbers too); only those above moved."""
    series = snap.stacks.get(pid)
    threads = [main_thread(dump, pid) for dump in series.dumps] if series is not None else []
    if len(threads) < 2 or any(t is None for t in threads):
        return False
    stacks = [[f for f in reversed(t.frames) if not f.native] for t in threads]
    shared = []
    for column in zip(*stacks):
        if len({(f.function, f.file, f.line) for f in column}) > 1:
            break
        shared.append(column[0])
    return in_library_retry_loop(shared, knowledge.frames)


def stack_phase_frame(snap: Snapshot, knowledge: Knowledge, pid: int):
    """(phase, the frame that shows it) for the main thread of pid, or None."""
    thread = snap.latest_main_thread(pid)
    return phase_of(list(thread.frames), knowledge) if thread is not None else None


def _holder_at_work(snap: Snapshot, chains, progress: Progress) -> Progress:
    """A job whose wait ends at a lock another process holds while that process writes (a download
    into the locked file, a build) is waiting its turn, not stuck: undecided, nobody blamed."""
    hops = chains[0].hops if chains else []
    end = next((hop for hop in hops if hop.facts.get("end") == "held" and "holder_wrote" in hop.facts), None)
    if not progress.hung or end is None:
        return progress
    holder = int(end.facts["holder"])
    whose = "a process of this job" if snap.process(holder) is not None else "not a process of this job"
    wrote = int(end.facts["holder_wrote"])
    text = (
        f"{end.who} waits for the lock on {end.object} that pid {holder} ({whose}) holds while it writes "
        f"({wrote >> 10} KiB in {HOLDER_GAP} s): it waits its turn; if pid {holder} keeps writing without end, "
        f"`py-spy dump --pid {holder}` says what it does"
    )
    return Progress(None, [text], undecided_computing=True)


def _holder_among_waiters(culprit, chains, groups, waiting: Set[int]):
    """The rank found elsewhere waits, through its chain, for a rank that waits in the collective for
    it (rank 0 holds the lock, or runs the server thread, that rank 1 needs, and entered all_reduce
    holding it): that rank is the one to change, the culprit."""
    hops = chains[0].hops if chains else []
    if culprit is None or len(hops) < 3 or hops[1].pid != culprit.pid:
        return culprit
    holder = next((h for h in hops[2:] if h.pid != culprit.pid and h.pid in waiting), None)
    group = next((g for g in groups if holder is not None and holder.pid in g.pids), None)
    if group is None:
        return culprit
    reason = (
        f"{hops[1].who} {hops[1].detail}; and {holder.who} waits in the collective for {hops[1].who}: each "
        "waits for the other"
    )
    return Culprit(holder.pid, holder.rank, reason, group, culprit.waiting)


def _end_computes(snap: Snapshot, chains, progress: Progress) -> Progress:
    """A wait that ends at another thread of the job computing inside a library routine (pickling a
    large state under the lock the main thread wants, a long parse) is no hang in one window: such a
    routine runs as long as its input needs. Undecided, as a main thread computing there is."""
    hops = chains[0].hops if chains else []
    end = hops[-1] if len(hops) > 1 else None
    if progress.hung is not True or end is None or end.kind != "cpu" or end.tid is None:
        return progress
    where = thread_computes_in_library(snap, end.pid, end.tid)
    if where is None:
        return progress
    waiter = hops[0].who if hops[0].pid != end.pid else f"the main thread of pid {end.pid}"
    text = (
        f"{waiter} waits for {end.who}, which computes in {where}: a routine whose time grows with its "
        f"input, so one window cannot call it stuck; `py-spy dump --native --pid {end.pid}` twice, a minute "
        "apart, shows whether it moves"
    )
    return Progress(None, [text], undecided_computing=True)


def _transfer_unread(chains, progress: Progress) -> Progress:
    """A wait that ends on a connection whose tcp_info could not be read (`ss` missing, slow on a
    loaded machine): a slow transfer and a stalled one look alike in a frozen stack, so not hung."""
    if progress.hung is not True:
        return progress
    hop = next((c.hops[-1] for c in chains if c.hops and c.hops[-1].facts.get("receiving") == "unread"), None)
    if hop is None:
        return progress
    text = (
        f"{hop.who} waits to read a connection to {hop.object}, and whether data still arrives on it could not "
        "be read (`ss -ti`): a slow transfer and a stalled one look alike in one window"
    )
    return Progress(None, [text])


# chain ends that can never change, whatever the job logs meanwhile (a poll loop that logs as it waits)
FOR_GOOD = ("child-reaped",)


def _deadlock_beside_a_log(chains, progress: Progress) -> Progress:
    """A main thread in a wait cycle (a lock-order deadlock, a process that waits for itself), or in a
    wait that can never end (FOR_GOOD: a loop on is_alive() of a child another wait reaped), is stuck
    for good, whatever is written to the log meanwhile (a heartbeat thread that logs "alive" with the
    step frozen, the loop's own "still waiting" lines): when the log's growth is all the progress
    there is, hung."""
    if progress.hung is not False or not progress.reasons:
        return progress
    if not all(r.startswith("log ") and " grew during the " in r for r in progress.reasons):
        return progress
    hops = chains[0].hops if chains else []
    if not hops or hops[0].tid != hops[0].pid:
        return progress
    if hops[-1].facts.get("end") in FOR_GOOD:
        text = (
            f"{progress.reasons[0]}, but {hops[0].who} {hops[-1].detail}: the log lines are written while it "
            "waits for what can never come"
        )
        return Progress(True, [text])
    if hops[-1].kind not in ("lock-cycle", "cycle"):
        return progress
    text = (
        f"{progress.reasons[0]}, but {hops[0].who} is in a wait cycle that no log line ends: "
        "another thread of the job writes while the main thread waits for good"
    )
    return Progress(True, [text])


# a loop that names what it waits for (`while not os.path.exists(done)`): a poll, whatever its sleep
POLL_HEADER = re.compile(r"^while\s+(?!(True|1)\s*:?\s*$)")
LATER_MAX_SECONDS = 300.0  # a sleep longer than this holds the job up, whatever follows it


def _sleeps_past_the_watch(wait: dict) -> Optional[float]:
    """The seconds a thread's sleep has left (its deadline, read from its memory) when they are more
    than the watch past the window can wait for and at most LATER_MAX_SECONDS, in a loop whose header
    names no condition (one that does is a poll); else None."""
    left = wait.get("sleep_left_s")
    if wait.get("op") != "sleep" or left is None or not WATCH_MAX_SECONDS < left <= LATER_MAX_SECONDS:
        return None
    return None if POLL_HEADER.match(wait.get("loop") or "") else left


def _sleeper_wakes_later(snap: Snapshot, chains, progress: Progress) -> Progress:
    """A job whose wait ends at a thread asleep in a loop of the job's own code that names no condition
    (`while True`, a `for` over steps), with more of its sleep left than the watch past the window can
    wait for (its clock_nanosleep deadline, read from its memory), is not judged from this window: a
    producer that paces itself (a decoder writing a shard every 25 s) and a loop that will never do
    anything else look alike until it wakes. A loop whose header names what it waits for is a poll."""
    hops = chains[0].hops if chains else []
    end = hops[-1] if hops else None
    info = snap.process(end.pid) if end is not None and progress.hung else None
    wait = ((info.waits or {}).get(end.tid or end.pid) or {}) if info is not None else {}
    left = _sleeps_past_the_watch(wait)
    if left is None:
        return progress
    header = wait.get("loop") or ""
    loop = f" in a loop, `{header}`," if header else ""
    text = (
        f"{end.who} sleeps at {end.where}{loop} for {left:.0f} s more (its sleep's deadline), longer than one look "
        f"can wait: what it does when it wakes decides (a paced producer hands over its next item; a loop that "
        f"only sleeps again never will); `py-spy dump --pid {end.pid}` once it has woken, and the job's log then, "
        "tell them apart"
    )
    return Progress(None, [text], undecided_computing=True)


def _feeder_wakes_later(snap: Snapshot, chains, progress: Progress) -> Progress:
    """A job whose wait ends at a thread waiting on a threading or queue primitive (a queue's get)
    while another thread of its process sleeps in the job's own code, with more of its sleep left than
    the watch can wait for, in code that hands items over (put, set, notify: feeders.hands_over), is not
    judged from this window: a producer pacing itself (a rate limit) hands over its next item when it
    wakes, and one that never will looks the same until then."""
    hops = chains[0].hops if chains else []
    end = hops[-1] if hops else None
    info = snap.process(end.pid) if end is not None and progress.hung and not end.facts.get("end") else None
    series = snap.stacks.get(end.pid) if info is not None else None
    dump = series.latest() if series is not None else None
    threads = dump.threads if dump is not None else []
    waiting = next((t for t in threads if t.tid == (end.tid or end.pid)), None)
    if waiting is None or not in_thread_sync(waiting):
        return progress
    for thread in threads:
        left = _sleeps_past_the_watch((info.waits or {}).get(thread.tid) or {}) if thread is not waiting else None
        site = hands_over(end.pid, thread.frames) if left is not None else None
        if site is None:
            continue
        text = (
            f"{end.who} {end.detail}, and thread {thread.name!r} of pid {end.pid} sleeps for {left:.0f} s more (its "
            f"sleep's deadline) in {site}, code that hands items over (put, set or notify): a producer that paces "
            "itself (a rate limit, a polling interval) hands over its next item when it wakes, one that is stuck "
            f"never does; `py-spy dump --pid {end.pid}` once it has woken, and the job's log then, tell them apart"
        )
        return Progress(None, [text], undecided_computing=True)
    return progress


def _compiler_at_work(knowledge: Knowledge, snap: Snapshot, chains, progress: Progress) -> Progress:
    """A job whose wait ends at a compiler it started that keeps running (Inductor's C++ kernels, an
    extension build) is compiling: it progresses while the compiler runs, and nobody is blamed."""
    hops = chains[0].hops if chains else []
    end = hops[-1] if hops else None
    if not progress.hung or end is None or end.kind != "cpu":
        return progress
    info = snap.process(end.pid)
    program = _program(knowledge, info.name if info is not None else "")
    if program is None:
        return progress
    cpu = f", {info.cpu_percent:.0f}% CPU" if info.cpu_percent is not None else ""
    text = (
        f"{end.who} is {program['what']} that the job started, and it keeps running{cpu}: the job compiles, "
        "which takes minutes on a cold cache; a compiler that runs is at work, and new compiler processes after "
        f"it (`ps --ppid {hops[0].pid} -o pid,etime,args` again in a minute) mean the compile moves on"
    )
    return Progress(False, [text])


def _program(knowledge: Knowledge, name: str) -> Optional[dict]:
    return next((p for p in knowledge.programs if name in (p.get("names") or ())), None)


def _cpu_wanted(snap: Snapshot, pid: int) -> float:
    """The CPU a process wants, running or waiting for a CPU (ProcessInfo.cpu_wanted): on a loaded
    machine a rank that computes gets less than it asks for, and is still busy."""
    info = snap.process(pid)
    return cpu_used(info) if info is not None else 0.0


def analyze(knowledge: Knowledge, snap: Snapshot, obs: Observations, tails: Sequence = ()) -> LiveAnalysis:
    alone = lambda pid, host=None: rank_alone(snap, pid)  # noqa: E731
    busy = lambda pid: _cpu_wanted(snap, pid) >= CPU_BUSY  # noqa: E731
    groups = apart_from_waiters(knowledge, group_ranks(snap), alone, busy)
    culprit = find_culprit(knowledge, groups)
    phase_at = lambda pid: stack_phase_frame(snap, knowledge, pid)  # noqa: E731
    left_loop = lambda pids: left_loop_side(JobView(snap), pids)  # noqa: E731
    mismatch = find_mismatch(knowledge, groups, phase_at, left_loop) if culprit is None else None
    if culprit is None and mismatch is None:
        sizes = [p.world_size for p in snap.processes if p.role == "rank" and p.world_size]
        world = max(sizes) if sizes else None
        mismatch = find_p2p_deadlock(knowledge, groups, alone, world) or find_site_mismatch(
            knowledge, groups, alone, world
        )
    waiting = [pid for g in groups if waits_in_collective(knowledge, g) for pid in g.pids]
    _offer_stack_event(knowledge, snap, groups, obs)
    progress = judge_progress(
        snap,
        waiting,
        tails,
        phases=lambda pid: stack_phase(snap, knowledge, pid),
        device_waits=lambda pid: main_thread_wait(snap, knowledge, pid) == "cuda-sync",
        retrying=lambda pid: polls_in_retry_loop(snap, knowledge, pid),
        helpers=lambda pid: busy_helpers(snap, knowledge, pid),
        computes=lambda pid: computes_in_library(snap, knowledge, pid),
    )
    if culprit is None and (mismatch is None or mismatch.odd is None) and progress.hung and progress.stuck_on:
        culprit = stuck_rank(knowledge, groups, progress.stuck_on[0], progress.reasons[0])
        mismatch = None if culprit is not None else mismatch
    chains = build_chains(snap, groups, culprit)
    culprit = _holder_among_waiters(culprit, chains, groups, set(waiting))
    progress = _holder_at_work(snap, chains, progress)
    progress = _end_computes(snap, chains, progress)
    progress = _sleeper_wakes_later(snap, chains, progress)
    progress = _feeder_wakes_later(snap, chains, progress)
    progress = _compiler_at_work(knowledge, snap, chains, progress)
    progress = _deadlock_beside_a_log(chains, progress)
    progress = _transfer_unread(chains, progress)
    for chain in chains:
        for hop in chain.hops:
            obs.add("chain", ObservedLine(hop.fact_line(), subject=hop.who, pid=hop.pid))
    return LiveAnalysis(groups, culprit, mismatch, chains, progress, waiting)


def _offer_stack_event(knowledge: Knowledge, snap: Snapshot, groups: List[StackGroup], obs: Observations) -> None:
    """A main thread inside a save or a validation pass answers the `event` question: the report
    does not ask what the stack already shows."""
    question = knowledge.tree.questions.get("event")
    if question is None:
        return
    for group in groups:
        for pid in group.pids[:1]:
            phase = stack_phase(snap, knowledge, pid)
            if phase in question.values:
                obs.offer_answer(
                    Answer("event", phase, "evidence"), f"the main thread of pid {pid} is in a {phase} pass"
                )
                return


def fill_live(report: Report, knowledge: Knowledge, snap: Snapshot, obs: Observations, live: LiveAnalysis) -> None:
    report.processes = process_entries(snap)
    from debug_stuck.live.kernel_scope import context_notes, kernel_verdicts

    report.notes = list(snap.notes) + context_notes(kernel_verdicts(snap))
    report.missing = [dict(m) for m in snap.missing]
    if snap.gpus is not None:
        report.gpus = [d.to_dict() for d in snap.gpus.devices]
        if not snap.gpus.available:
            report.gpu_note = snap.gpus.note
    report.kernel = list(snap.kernel.lines[-50:]) if snap.kernel is not None else []
    report.stack_groups = [dict(g.to_dict(), label=describe_ranks(g)) for g in live.groups]
    report.chains = [[hop.to_dict() for hop in chain.hops] for chain in live.chains]
    report.chain = report.chains[0] if report.chains else []
    report.verdict.hung = live.progress.hung
    if live.progress.hung is False or live.progress.undecided_computing:
        pass  # a job that progresses, or computes (itself or the helpers it waits for), holds nobody up
    elif live.culprit is not None:
        own = obs.only(descendants(snap, live.culprit.pid))
        apply_culprit(report, knowledge, live.culprit, own, live.facts)
    elif live.mismatch is not None:
        apply_mismatch(report, knowledge, live.mismatch)
    apply_chain(report, live.chains[0] if live.chains else None)
    if report.culprit is None and live.progress.hung is not False and not live.progress.undecided_computing:
        report.culprit = chain_culprit(live.chains[0] if live.chains else None, snap)
    stopped = snap.process(report.culprit["pid"]) if report.culprit else None
    if stopped is not None and stopped.state in STOPPED_STATES:
        report.culprit["state"] = stopped.state
        if "is stopped" not in report.culprit["reason"]:
            report.culprit["reason"] += f"; it is stopped (state {stopped.state}): SIGSTOP, Ctrl+Z or a debugger"
    apply_progress(report, live.progress)


def _answers(report: Report) -> dict:
    """The report's answers as the classifier reads them ({key: Answer})."""
    return {key: Answer(key, a.get("value"), a.get("source") or "") for key, a in (report.answers or {}).items()}


def chain_culprit(chain: Optional[Chain], snap: Optional[Snapshot] = None) -> Optional[dict]:
    """The process at the end of the wait, when it is not the one that waits: whoever the others
    wait for is the culprit, rank or not (a child, a worker, a peer on this machine), and so is the
    holder of the file lock the last hop waits for, a process of the job or not (a leftover run)."""
    end = chain.hops[-1] if chain is not None and chain.hops else None
    holder = end.facts.get("holder") if end is not None and end.facts.get("end") == "held" else None
    if holder and str(holder).isdigit() and int(holder) != end.pid:
        info = snap.process(int(holder)) if snap is not None else None
        whose = "a process of this job" if info is not None else "not a process of this job"
        return {
            "pid": int(holder),
            "rank": info.rank if info is not None else None,
            "role": info.role if info is not None else "other",
            "reason": f"pid {holder} ({whose}) holds the lock on {end.object} that {end.who} waits for",
        }
    reader = end.facts.get("reader") if end is not None and end.facts.get("end") == "not-reading" else None
    if reader and str(reader).isdigit():
        why = f"pid {reader} (not a process of this job) holds the socket {end.who} sends to, and does not read it"
        return {"pid": int(reader), "rank": None, "role": "other", "reason": why}
    if end is not None and len(chain.hops) == 1 and end.kind == "process" and end.facts.get("state") == "T":
        return {"pid": end.pid, "rank": end.rank, "role": end.reported_role, "reason": f"{end.who} {end.detail}"}
    if chain is None or len(chain.hops) < 2:
        return None
    first = chain.hops[0]
    # a Manager's server whose every client waits in it blames no process: the one to blame has ended
    if end.pid == first.pid or end.kind == "cycle" or end.facts.get("end") == "clients-waiting":
        return None
    return {"pid": end.pid, "rank": end.rank, "role": end.reported_role, "reason": f"{end.who} {end.detail}"}


def apply_culprit(report: Report, knowledge: Knowledge, culprit: Culprit, own: Observations, facts=None) -> None:
    """Name the culprit, and lead with what its own evidence (`own`: its lines only) says it is doing,
    when that evidence names a cause on its own; else the others wait for a rank that never joins."""
    verdict = report.verdict
    report.culprit = culprit.to_dict()
    result = classify(knowledge, {}, own)
    conditions = getattr(knowledge, "job_conditions", None) or {}
    allowed = [d for d in result.diagnoses if d.cause != WAITING_CAUSE and not contradicted(conditions, d.cause, facts)]
    primary = allowed[0] if allowed else None
    if primary is None or (primary.confidence if primary.score is None else primary.score) < CAUSE_THRESHOLD:
        return  # its own evidence names no cause: the others wait for a rank that never joins
    primary.evidence.insert(0, Evidence("stack", culprit.reason, weight=CULPRIT_WEIGHT))
    primary.score = round(noisy_or([primary.score, CULPRIT_WEIGHT]), 3)
    primary.thin = False
    report.diagnoses = [primary] + [d for d in report.diagnoses if d.cause != primary.cause]
    assign_probabilities(knowledge, report.diagnoses)
    report.culprit["cause"] = primary.cause
    verdict.cause = primary.cause
    verdict.confidence = primary.confidence
    verdict.phase = phase_for_new_cause(knowledge, primary.cause, _answers(report), verdict.phase)
    who = describe_ranks(culprit.group)
    who = who[:-1] + f", pid {culprit.pid})" if who.endswith(")") else f"{who} (pid {culprit.pid})"
    verdict.finding = {"kind": "culprit", "text": who[:1].upper() + who[1:]}


def apply_mismatch(report: Report, knowledge: Knowledge, mismatch: Mismatch) -> None:
    """Every rank waits, each side in a different collective: a mismatch, never a straggler. The
    side in the extra call is the culprit when the evidence singles it out."""
    verdict = report.verdict
    report.culprit = None
    detail = f"the ranks are in different collectives: {mismatch.describe()} (each side waits for the other)"
    if mismatch.ops == "p2p":
        detail = f"every rank waits in a point-to-point call: {mismatch.describe()}; {mismatch.why()}"
    elif mismatch.ops == "sites":
        lines = f"every rank waits in {mismatch.sides[0][0]}, called from different lines"
        detail = f"{lines}: {mismatch.describe()}; {mismatch.why()}"
    if mismatch.odd is not None:
        report.culprit = dict(mismatch.odd.to_dict(), cause=WAITING_CAUSE)
        detail += f"; {mismatch.odd.reason}"
    top = next((d for d in report.diagnoses if d.cause == WAITING_CAUSE), None)
    if top is None:
        return
    top.evidence.insert(0, Evidence("stack", detail, weight=MISMATCH_WEIGHT))
    top.score = round(noisy_or([top.score, MISMATCH_WEIGHT]), 3)
    top.thin = False
    report.diagnoses = [top] + [d for d in report.diagnoses if d is not top]
    assign_probabilities(knowledge, report.diagnoses)
    verdict.cause, verdict.confidence = top.cause, top.confidence
    verdict.phase = phase_for_new_cause(knowledge, top.cause, _answers(report), verdict.phase)
    text = mismatch.describe() + (f" ({mismatch.odd.reason})" if mismatch.odd is not None else "")
    verdict.finding = {"kind": "mismatch", "text": text, "sides": mismatch.sides_dicts()}
    if mismatch.ops in ("p2p", "sites"):
        verdict.finding.update(ops=mismatch.ops, why=mismatch.why())
    if mismatch.odd is not None:
        verdict.finding["odd"] = mismatch.odd.reason[:1].upper() + mismatch.odd.reason[1:] + "."


def apply_chain(report: Report, chain: Optional[Chain]) -> None:
    """The verdict names the terminal blocker first: what the job waits on, in one sentence."""
    finding = report.verdict.finding or {}
    if chain is None or not chain.hops or finding.get("kind") == "mismatch":
        return
    report.verdict.finding = {"kind": "chain", "text": chain_sentence(chain)}


def apply_progress(report: Report, progress: Progress) -> None:
    """A job that progresses is not hung, whatever the stacks look like; a slow one says why; a
    hung one says how it was seen."""
    verdict = report.verdict
    verdict.state = progress.state
    verdict.state_reasons = list(progress.reasons)
    verdict.slow_because = progress.slow_because
    if progress.state == "progressing":
        verdict.cause = None
        verdict.confidence = 0.0
        # nothing is wrong, so no candidate is a likely cause: each keeps its rank, scaled below a
        # verdict's weight (a healthy job's report never carries a confident cause)
        _scale_candidates(report, PROGRESSING_CEILING)
    elif progress.hung is None and progress.reasons:
        # not told apart from slow work: a cause is only as likely as the hang itself, never a sure one
        _scale_candidates(report, UNDECIDED_CEILING)
        if verdict.cause is not None and report.diagnoses:
            verdict.confidence = report.diagnoses[0].confidence


def _scale_candidates(report: Report, ceiling: float) -> None:
    """Every candidate's confidence scaled so the first is at most `ceiling`; the ranking stays."""
    top = max((d.confidence for d in report.diagnoses), default=0.0)
    for d in report.diagnoses if top > ceiling else ():
        d.confidence = round(d.confidence * ceiling / top, 3)
