"""gc: how much of a Python program's time goes to the cyclic garbage collector.

Script mode (`--script FILE [-- ARGS]`, or any Python command after `--`): the program runs for a
bounded time with a `sitecustomize` (in a temporary folder put first on PYTHONPATH) that installs a
`gc.callbacks` timer before the program's first line. Every Python process of the command (ranks,
DataLoader workers: forked children restart the count) writes its counts, totals and longest pause
per generation to a JSON file every GC_WRITE_INTERVAL seconds and at exit (atexit, and os._exit,
which multiprocessing children end with), so a run killed at the limit still reports. Any
sitecustomize the environment already had is still loaded, after ours. A collection still running
when the program is killed is not counted (the writer needs the GIL).

PID mode (`--pid P`, no script or command): nothing is run. The live process's native stacks are
sampled (py-spy --native) and the share of samples inside the collector (gc_collect_main, collect
in gcmodule.c, _PyGC_Collect...) is reported. Only script mode runs the user's code: probes.yaml
declares the pid mode as reads-only, so --allow-exec is asked only with --script or a command. A
PID that is gone is exit 3 (TargetNotInspectable), not a result.

Findings (cause gc-pause): GC above WARN_SHARE of wall time or a pause above WARN_PAUSE_S -> warn;
above FAIL_SHARE or FAIL_PAUSE_S -> fail.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import List

from debug_stuck.bounded import remove_scratch, run_tree, scratch_dir
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult, ProbeUsageError, TargetNotInspectable

NAME = "gc"

WARN_SHARE = 0.20
FAIL_SHARE = 0.50
WARN_PAUSE_S = 1.0
FAIL_PAUSE_S = 5.0
MIN_GC_SECONDS = 0.25  # below this much GC in all, a share says nothing (a 0.05 s script)
GC_WRITE_INTERVAL = 0.25
PID_SAMPLES = 10
PID_INTERVAL = 0.3
MAX_PROCESSES = 64

# Installed as sitecustomize: runs at interpreter start-up, before the user's script.
_SITECUSTOMIZE = r'''
"""debug-stuck gc probe: times every garbage collection (written by the probe, removed after the run)."""
import os as _os


def _debug_stuck_gc():
    import atexit, gc, json, sys, threading, time

    out_dir = _os.environ.get("DEBUG_STUCK_GC_DIR")
    if not out_dir:
        return
    interval = float(_os.environ.get("DEBUG_STUCK_GC_INTERVAL") or 0.25)
    perf = time.perf_counter
    bounds = (0.001, 0.01, 0.1, 1.0, 10.0)
    st = {}

    def reset():
        st.update(pid=_os.getpid(), start=perf(), t0=None, count=[0, 0, 0], total=[0.0, 0.0, 0.0],
                  max=[0.0, 0.0, 0.0], hist=[0] * (len(bounds) + 1), collected=0, uncollectable=0)

    def on_gc(phase, info):
        if phase == "start":
            st["t0"] = perf()
            return
        t0 = st["t0"]
        if t0 is None:
            return
        dt = perf() - t0
        st["t0"] = None
        g = info.get("generation", 2)
        g = g if g in (0, 1, 2) else 2
        st["count"][g] += 1
        st["total"][g] += dt
        if dt > st["max"][g]:
            st["max"][g] = dt
        st["collected"] += info.get("collected", 0) or 0
        st["uncollectable"] += info.get("uncollectable", 0) or 0
        i = 0
        while i < len(bounds) and dt >= bounds[i]:
            i += 1
        st["hist"][i] += 1

    def write(final=False):
        data = {
            "pid": st["pid"], "argv": list(getattr(sys, "argv", []))[:20], "elapsed": perf() - st["start"],
            "count": st["count"], "total": st["total"], "max": st["max"], "hist": st["hist"],
            "collected": st["collected"], "uncollectable": st["uncollectable"], "enabled": gc.isenabled(),
            "threshold": list(gc.get_threshold()),
            "frozen": gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else None,
            "final": final, "python": sys.version.split()[0],
        }
        path = _os.path.join(out_dir, "gc-%d.json" % st["pid"])
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh)
        _os.replace(tmp, path)

    def loop():
        while True:
            time.sleep(interval)
            try:
                write()
            except Exception:
                pass

    def start_writer():
        threading.Thread(target=loop, name="debug-stuck-gc", daemon=True).start()

    def final_write():
        try:
            write(final=True)
        except Exception:
            pass

    real_exit = _os._exit

    def exit_writing(code):
        # multiprocessing children (DataLoader workers) end with os._exit: atexit never runs there.
        final_write()
        real_exit(code)

    reset()
    gc.callbacks.append(on_gc)
    start_writer()
    atexit.register(final_write)
    _os._exit = exit_writing
    if hasattr(_os, "register_at_fork"):
        # A forked child (a DataLoader worker) counts its own collections in its own file.
        _os.register_at_fork(after_in_child=lambda: (reset(), start_writer()))


def _chain():
    # Ours shadows the environment's own sitecustomize (conda, Debian); load that one too.
    import importlib.machinery, importlib.util, sys

    here = _os.path.dirname(_os.path.abspath(__file__))
    path = [p for p in sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _debug_stuck_gc()
except Exception:
    pass
_chain()
'''

_GC_NATIVE = re.compile(
    r"^(gc_collect_main|gc_collect_region|gc_collect_full|gc_collect_young|gc_collect_increment|"
    r"gc_collect_with_callback|gc_collect_generations|collect_with_callback|collect_generations|_PyGC_Collect|"
    r"gc_collect_impl|gc_collect|_Py_RunGC|deduce_unreachable|move_unreachable|subtract_refs|update_refs|"
    r"visit_reachable|visit_decref|mark_all_reachable|mark_stacks)(\.\w+)*$"
)
_COLLECT = re.compile(r"^collect(\.constprop\.\d+|\.isra\.\d+)*$")
_PYTHON_LIB = re.compile(r"python|gcmodule|gc\.c")


def is_gc_frame(frame) -> bool:
    """A frame of CPython's cyclic collector (native), or pystack's 'Garbage collecting' marker."""
    name = frame.function
    if "Garbage collecting" in name:
        return True
    if not frame.native:
        return False
    if _GC_NATIVE.match(name):
        return True
    return bool(_COLLECT.match(name) and _PYTHON_LIB.search(frame.file or ""))


# --- script mode --------------------------------------------------------------------------------


def summarize(records: List[dict]) -> dict:
    """Per-process and overall GC statistics from the files the processes wrote."""
    procs = []
    for r in records:
        elapsed = max(float(r.get("elapsed") or 0.0), 1e-9)
        total = sum(r.get("total") or [0.0])
        count = sum(r.get("count") or [0])
        procs.append(
            {
                "pid": r.get("pid"),
                "argv": " ".join(r.get("argv") or [])[:300],
                "elapsed_s": round(elapsed, 3),
                "pauses": count,
                "total_s": round(total, 4),
                "max_pause_s": round(max(r.get("max") or [0.0]), 4),
                "share": round(total / elapsed, 4),
                "per_generation": [
                    {
                        "generation": g,
                        "count": r["count"][g],
                        "total_s": round(r["total"][g], 4),
                        "max_s": round(r["max"][g], 4),
                    }
                    for g in range(3)
                ],
                "histogram": dict(zip(["<1ms", "<10ms", "<100ms", "<1s", "<10s", ">=10s"], r.get("hist") or [])),
                "collected": r.get("collected"),
                "uncollectable": r.get("uncollectable"),
                "gc_enabled": r.get("enabled"),
                "threshold": r.get("threshold"),
                "frozen": r.get("frozen"),
                "exited": bool(r.get("final")),
            }
        )
    procs.sort(key=lambda p: p["share"], reverse=True)
    out: dict = {"processes": procs[:MAX_PROCESSES], "worst_pid": procs[0]["pid"] if procs else None}
    if procs:
        # The headline numbers are the worst process's: one slow rank stalls all the others.
        worst = procs[0]
        out.update({k: worst[k] for k in ("pauses", "total_s", "max_pause_s", "share", "per_generation")})
    return out


def _read_records(folder: str) -> List[dict]:
    records = []
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("gc-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, name)) as fh:
                records.append(json.load(fh))
        except (OSError, ValueError):
            continue  # a file cut short by the kill; the others still count
    return records


def judge_share(worst: dict) -> tuple:
    """(status, findings) for the process that spent the largest share of its time in GC."""
    findings: List[Finding] = []
    share, pause = worst["share"], worst["max_pause_s"]
    what = (
        f"pid {worst['pid']} spent {share:.0%} of {worst['elapsed_s']:.1f} s in {worst['pauses']} garbage "
        f"collection(s) (total {worst['total_s']:.2f} s, longest {pause:.3f} s)"
    )
    gen2 = worst["per_generation"][2]
    if worst["total_s"] < MIN_GC_SECONDS:
        share = 0.0
    if share > FAIL_SHARE or pause > FAIL_PAUSE_S:
        severity = "fail"
    elif share > WARN_SHARE or pause > WARN_PAUSE_S:
        severity = "warn"
    else:
        return "ok", findings
    findings.append(
        Finding(
            severity,
            f"{what}; full (generation 2) collections: {gen2['count']}, {gen2['total_s']:.2f} s: "
            f"gc.freeze() after setup, or gc.disable() with a scheduled gc.collect()",
            "gc-pause",
        )
    )
    return severity, findings


def _run_script(ctx: ProbeContext, argv: List[str]) -> ProbeResult:
    tmp = scratch_dir("debug-stuck-gc-")
    try:
        site = os.path.join(tmp, "site")
        out = os.path.join(tmp, "out")
        os.makedirs(site)
        os.makedirs(out)
        with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
            fh.write(_SITECUSTOMIZE)
        env = dict(os.environ)
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["DEBUG_STUCK_GC_DIR"] = out
        env["DEBUG_STUCK_GC_INTERVAL"] = str(GC_WRITE_INTERVAL)
        limit = max(1.0, ctx.timeout - min(2.0, ctx.timeout * 0.1))
        ctx.progress(f"running {os.path.basename(argv[1] if len(argv) > 1 else argv[0])} with a GC timer")
        tail: List[str] = []

        def keep(line: str) -> None:
            if line.strip():
                tail.append(line[:300])
                del tail[:-10]

        try:
            result = run_tree(argv, limit, env=env, cwd=ctx.cwd, on_line=keep)
        except OSError as exc:
            raise ProbeUsageError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
        records = _read_records(out)
    finally:
        remove_scratch(tmp)

    stats = summarize(records)
    data = {
        "mode": "script",
        "command": " ".join(argv)[:1000],
        "exit_code": result.returncode,
        "timed_out": result.timed_out,
        "run_seconds": round(result.seconds, 2),
        "output_tail": tail,
        **stats,
    }
    worst = stats["processes"][0] if stats["processes"] else None
    ran = "killed at the limit" if result.timed_out else f"exit {result.returncode}"
    if worst is None:
        return ProbeResult(
            NAME,
            "skipped",
            f"no GC data: no Python process of the command loaded the timer ({ran}; run with -I/-S/-E, or not Python?)",
            data=data,
        )
    status, findings = judge_share(worst)
    for proc in stats["processes"]:
        if proc["gc_enabled"] is False:
            findings.append(Finding("info", f"pid {proc['pid']} runs with gc disabled (gc.disable())", "gc-pause"))
            break
    if result.returncode not in (0, None):
        findings.append(Finding("info", f"the program exited with status {result.returncode}"))
    summary = (
        f"GC took {worst['share']:.0%} of the time of pid {worst['pid']} ({worst['pauses']} pauses, "
        f"total {worst['total_s']:.2f} s, longest {worst['max_pause_s']:.3f} s; {ran})"
    )
    if len(stats["processes"]) > 1:
        summary += f"; {len(stats['processes'])} Python processes"
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


# --- pid mode -----------------------------------------------------------------------------------


def _sample_pid(ctx: ProbeContext, pid: int) -> ProbeResult:
    from debug_stuck.probes.collectors.stacks import StackError, dump_stacks

    deadline = time.monotonic() + max(1.0, ctx.timeout - 1.0)
    samples, in_gc, notes = 0, 0, []
    where: dict = {}
    errors: List[str] = []
    native = True
    ctx.progress(f"sampling the native stacks of {pid}")
    for i in range(PID_SAMPLES):
        left = deadline - time.monotonic()
        if left < 0.5:
            break
        try:
            dump = dump_stacks(pid, native=True, timeout=min(5.0, left))
        except StackError as exc:
            if exc.kind == "gone" and samples:
                notes.append(f"process {pid} exited after {samples} sample(s)")
                break
            if exc.kind == "gone" and "zombie" not in exc.message:
                raise TargetNotInspectable(exc.message, "give the PID of a running process of the job") from None
            if exc.kind in ("permission", "not-python", "missing-tool") or samples == 0 and i >= 2:
                return ProbeResult(NAME, "skipped", f"cannot sample process {pid}: {exc.message}", data={"mode": "pid"})
            errors.append(exc.message)
            continue
        for note in dump.notes:
            if note not in notes:
                notes.append(note)
        if not any(f.native for t in dump.threads for f in t.frames):
            native = False
        samples += 1
        gc_threads = [t for t in dump.threads if any(is_gc_frame(f) for f in t.frames)]
        if gc_threads:
            in_gc += 1
            python = [f for f in gc_threads[0].frames if not f.native]
            site = python[0].text() if python else "?"
            where[site] = where.get(site, 0) + 1
        time.sleep(max(0.0, min(PID_INTERVAL, deadline - time.monotonic())))
    data = {
        "mode": "pid",
        "pid": pid,
        "samples": samples,
        "samples_in_gc": in_gc,
        "share": round(in_gc / samples, 3) if samples else None,
        "gc_sites": dict(sorted(where.items(), key=lambda kv: -kv[1])[:5]),
        "notes": notes,
        "errors": errors[:5],
    }
    if samples == 0:
        return ProbeResult(NAME, "skipped", f"no stack sample of {pid} within the time limit", data=data)
    if not native:
        return ProbeResult(
            NAME,
            "skipped",
            f"native frames unavailable for {pid} (GC is only visible in them): {'; '.join(notes)[:200]}",
            data=data,
        )
    share = in_gc / samples
    findings: List[Finding] = []
    summary = f"{in_gc} of {samples} native stack samples of pid {pid} were inside the garbage collector ({share:.0%})"
    if share > FAIL_SHARE:
        status = "fail"
    elif share > WARN_SHARE:
        status = "warn"
    else:
        return ProbeResult(NAME, "ok", summary, data=data)
    top = next(iter(data["gc_sites"]), "?")
    findings.append(
        Finding(
            status,
            f"{summary}; most often triggered at {top}: gc.freeze() after setup, or gc.disable() with a "
            f"scheduled gc.collect()",
            "gc-pause",
        )
    )
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


def run(ctx: ProbeContext) -> ProbeResult:
    if ctx.script:
        script = ctx.script if os.path.isabs(ctx.script) or not ctx.cwd else os.path.join(ctx.cwd, ctx.script)
        if not os.path.isfile(script):
            raise ProbeUsageError(f"--script {ctx.script!r}: no such file")
        return _run_script(ctx, [sys.executable, script, *ctx.command])
    if ctx.command:
        return _run_script(ctx, list(ctx.command))
    if ctx.pids:
        return _sample_pid(ctx, ctx.pids[0])
    raise ProbeUsageError(
        "give --script FILE (or a Python command after --) to time its collections, or --pid P to sample a live process"
    )
