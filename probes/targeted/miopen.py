"""miopen: does MIOpen's convolution search (Find) hang or crawl on this ROCm machine, and is the
precompiled kernel database (kdb) for this GPU installed?

Runs our own tiny convolution (not the user's code) in a child Python three times: with MIOpen's
defaults, with MIOPEN_FIND_MODE=FAST and with MIOPEN_DEBUG_DISABLE_FIND_DB=1, each under a time
limit and with its own fresh MIOPEN_USER_DB_PATH / MIOPEN_CUSTOM_CACHE_DIR so that no variant
profits from another's cache (nor from the user's). Each child's whole process tree is killed at
its limit. Then it looks for `<gfx arch>*.kdb` where MIOpen and the torch wheel keep them.
Elsewhere (no ROCm) it is skipped.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import psutil

from debug_stuck.bounded import CommandResult, remove_scratch, run_command, run_tree, scratch_dir
from debug_stuck.probes.collectors.gpu.parse import parse_json_text
from debug_stuck.probes.collectors.procs import InspectError, read_process_environ
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult
from debug_stuck.redact import REDACTED

NAME = "miopen"

CAUSE = "miopen-find"
Runner = Callable[[Sequence[str], float], CommandResult]

# How often the variant runner looks for new descendants: a child that starts a grandchild in a
# new session (as torchrun does) and exits within one interval can escape; anything longer-lived
# is seen and killed by PID.
# Our own convolution should take seconds; a default Find this much slower than FAST is the trap.
SLOW_FACTOR = 3.0
SLOW_MIN_S = 10.0

# --------------------------------------------------------------------------------------------
# The generic variant runner
# --------------------------------------------------------------------------------------------


@dataclass
class VariantResult:
    finished: bool  # exited on its own within the limit with status 0
    seconds: float
    returncode: Optional[int]  # None when it was killed at the limit
    timed_out: bool
    output_tail: str  # the end of stdout and stderr together

    def to_dict(self) -> dict:
        return asdict(self)


def run_bounded(
    argv: Sequence[str], env: Mapping[str, str], timeout: float, cwd: Optional[str] = None, tail_chars: int = 4000
) -> VariantResult:
    """Run argv in its own session; at `timeout` kill its whole tree (debug_stuck.bounded.run_tree)."""
    try:
        result = run_tree(argv, timeout, env=dict(env), cwd=cwd)
    except OSError as exc:
        return VariantResult(False, 0.0, None, False, f"could not start {argv[0]}: {exc}")
    return VariantResult(
        result.ok, round(result.seconds, 3), result.returncode, result.timed_out, result.output[-tail_chars:]
    )


def run_variants(
    argv: Sequence[str],
    variants: Mapping[str, Mapping[str, Optional[str]]],
    timeout: float,
    *,
    base_env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    on_start: Callable[[str], None] = lambda name: None,
) -> Dict[str, VariantResult]:
    """Run the same command once per variant, one after the other, each bounded by `timeout` s.

    A variant is a set of environment changes applied to `base_env` (default: this process's
    environment); a value of None removes the variable.
    """
    base = dict(os.environ if base_env is None else base_env)
    results: Dict[str, VariantResult] = {}
    for name, changes in variants.items():
        env = dict(base)
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        on_start(name)
        results[name] = run_bounded(argv, env, timeout, cwd=cwd)
    return results


# --------------------------------------------------------------------------------------------
# Is this ROCm? Which gfx? Where are the kdb files?
# --------------------------------------------------------------------------------------------

_HIP_VERSION = re.compile(r"^hip\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)


def torch_dir() -> Optional[str]:
    """The installed torch package directory, found without importing torch (slow, may touch GPUs)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


def torch_hip_version(directory: Optional[str]) -> Optional[str]:
    """torch.version.hip, read from torch/version.py as text."""
    if not directory:
        return None
    try:
        with open(os.path.join(directory, "version.py"), encoding="utf-8") as fh:
            m = _HIP_VERSION.search(fh.read())
    except OSError:
        return None
    return m.group(1) if m else None


def rocm_platform(directory: Optional[str], rocm_root: str = "/opt/rocm") -> Tuple[bool, str]:
    """(is ROCm, why) for this machine."""
    hip = torch_hip_version(directory)
    if hip:
        return True, f"torch is a ROCm build (torch.version.hip={hip})"
    tools = [t for t in ("amd-smi", "rocm-smi") if shutil.which(t) or os.path.exists(f"{rocm_root}/bin/{t}")]
    if os.path.isdir(rocm_root) and tools:
        return True, f"{rocm_root} is installed ({', '.join(tools)})"
    parts = [
        "torch here is not a ROCm build" if directory else "torch is not installed for this Python",
        f"no {rocm_root}" if not os.path.isdir(rocm_root) else "no amd-smi/rocm-smi",
    ]
    return False, "not ROCm: " + ", ".join(parts)


def gfx_from_override(value: Optional[str]) -> Optional[str]:
    """HSA_OVERRIDE_GFX_VERSION=10.3.0 -> gfx1030, 9.0.10 -> gfx90a (the stepping is hex)."""
    if not value:
        return None
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    if not m:
        return None
    major, minor, step = (int(g) for g in m.groups())
    return f"gfx{major}{minor}{step:x}"


def parse_rocminfo(text: str) -> List[dict]:
    """GPU agents of `rocminfo`: [{"arch": "gfx1030", "cus": 36 | None, "name": marketing name}]."""
    agents: List[dict] = []
    current: Optional[dict] = None
    for raw in text.splitlines():
        line = raw.strip()
        if re.fullmatch(r"Agent \d+", line):
            current = {"arch": None, "cus": None, "name": None, "gpu": None}
            agents.append(current)
            continue
        if current is None or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        # only the agent's own fields, not its ISA entries (amdgcn-amd-amdhsa--gfx...)
        if key == "Name" and current["arch"] is None and re.match(r"gfx[0-9a-f]+", value):
            current["arch"] = value.split(":")[0]
        elif key == "Marketing Name" and current["name"] is None:
            current["name"] = value
        elif key == "Compute Unit" and current["cus"] is None and value.isdigit():
            current["cus"] = int(value)
        elif key == "Device Type":
            current["gpu"] = value == "GPU"
    return [
        {"arch": a["arch"], "cus": a["cus"], "name": a["name"]} for a in agents if a["arch"] and a["gpu"] is not False
    ]


def parse_amd_static(doc: object) -> List[dict]:
    """`amd-smi static --json`: asic.target_graphics_version and num_compute_units per GPU."""
    entries = doc.get("gpu_data") if isinstance(doc, dict) else doc
    out = []
    for entry in entries if isinstance(entries, list) else []:
        asic = entry.get("asic") if isinstance(entry, dict) else None
        if not isinstance(asic, dict):
            continue
        arch = asic.get("target_graphics_version")
        if isinstance(arch, str) and arch.startswith("gfx"):
            cus = asic.get("num_compute_units")
            out.append({"arch": arch, "cus": cus if isinstance(cus, int) else None, "name": asic.get("market_name")})
    return out


def kdb_dirs(torch_directory: Optional[str], roots: Sequence[str] = ("/opt",)) -> List[str]:
    """Where MIOpen's system kernel databases live: the ROCm install(s) and the torch wheel."""
    dirs: List[str] = []
    for root in roots:
        for pattern in ("rocm*/share/miopen/db", "rocm*/miopen/share/miopen/db", "rocm*/lib/miopen/db"):
            dirs.extend(sorted(glob.glob(os.path.join(root, pattern))))
    if torch_directory:
        # ROCm wheels: torch/share/miopen/db (MIOpen#1930); some builds keep it under torch/lib
        dirs.extend(sorted(glob.glob(os.path.join(torch_directory, "share", "miopen", "db"))))
        dirs.extend(sorted(glob.glob(os.path.join(torch_directory, "lib", "**", "miopen", "db"), recursive=True)))
    seen, out = set(), []
    for d in dirs:
        real = os.path.realpath(d)
        if real not in seen and os.path.isdir(d):
            seen.add(real)
            out.append(d)
    return out


def expected_kdb_names(arch: str, cus: Optional[int]) -> List[str]:
    """MIOpen names kdb files <arch>_<CUs>.kdb (gfx1030_36) or <arch><CUs in hex>.kdb (gfx90a68)."""
    names = [f"{arch}.kdb"]
    if cus:
        names += [f"{arch}_{cus}.kdb", f"{arch}{cus:x}.kdb"]
    return names


def find_kdb(arch: str, cus: Optional[int], dirs: Sequence[str]) -> dict:
    """{"exact": [paths MIOpen would load], "same_arch": [other CU counts], "expected": [...], "searched": [...]}."""
    wanted = expected_kdb_names(arch, cus)
    arch_file = re.compile(rf"^{re.escape(arch)}(?:_\d+|[0-9a-f]*)\.kdb$")
    exact, same_arch = [], []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not arch_file.match(name):
                continue
            path = os.path.join(d, name)
            (exact if name in wanted else same_arch).append(path)
    if not cus:  # CU count unknown: any kdb of this arch may be the right one
        exact, same_arch = exact + same_arch, []
    return {"exact": exact, "same_arch": same_arch, "expected": wanted, "searched": list(dirs)}


# --------------------------------------------------------------------------------------------
# The test convolution (our own code, run in a child)
# --------------------------------------------------------------------------------------------

CONV_SCRIPT = r"""
import json, sys, time
def say(**kw):
    print("DEBUG_STUCK " + json.dumps(kw), flush=True)
t0 = time.monotonic()
say(stage="import")
try:
    import torch
except Exception as exc:
    say(stage="error", error=f"cannot import torch: {exc}")
    sys.exit(3)
say(stage="device", hip=torch.version.hip, torch_file=torch.__file__, import_s=round(time.monotonic() - t0, 3))
if not torch.cuda.is_available():
    say(stage="error", error="torch.cuda.is_available() is False: no usable GPU for this process")
    sys.exit(4)
props = torch.cuda.get_device_properties(0)
say(stage="props", arch=getattr(props, "gcnArchName", None), cus=props.multi_processor_count, name=props.name)
t1 = time.monotonic()
torch.ones(1, device="cuda").add_(1)
torch.cuda.synchronize()
say(stage="conv", init_s=round(time.monotonic() - t1, 3))
t2 = time.monotonic()
conv = torch.nn.Conv2d(3, 8, 3, padding=1).cuda()
conv(torch.randn(2, 3, 32, 32, device="cuda"))
torch.cuda.synchronize()
say(stage="done", conv_s=round(time.monotonic() - t2, 3))
"""

STAGES = ("import", "device", "props", "conv", "done")
_MARK = re.compile(r"^DEBUG_STUCK (\{.*\})\s*$", re.M)

# MIOpen settings that change the search; every variant starts without the user's ones.
MIOPEN_SEARCH_VARS = ("MIOPEN_FIND_MODE", "MIOPEN_DEBUG_DISABLE_FIND_DB", "MIOPEN_FIND_ENFORCE")
VARIANTS: Dict[str, Dict[str, str]] = {
    "default": {},
    "fast": {"MIOPEN_FIND_MODE": "FAST"},
    "no-find-db": {"MIOPEN_DEBUG_DISABLE_FIND_DB": "1"},
}


def child_marks(output: str) -> dict:
    """The stage markers the child printed, merged: last stage reached, arch, timings, error."""
    merged: dict = {}
    for m in _MARK.finditer(output):
        try:
            merged.update(json.loads(m.group(1)))
        except ValueError:
            continue
    return merged


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("DEBUG_STUCK ")]
    return lines[-1][:200] if lines else ""


# --------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------


def assess(
    results: Mapping[str, VariantResult],
    limit: float,
    kdb: Optional[dict],
    arch: Optional[str],
    arch_source: Optional[str],
    override: Optional[str],
    job_env: Mapping[str, str],
) -> List[Finding]:
    out: List[Finding] = []
    marks = {name: child_marks(r.output_tail) for name, r in results.items()}
    default, fast = results.get("default"), results.get("fast")

    def stage(name: str) -> str:
        return marks.get(name, {}).get("stage", "start")

    def conv_s(name: str) -> Optional[float]:
        return marks.get(name, {}).get("conv_s")

    errors = {name: m.get("error") for name, m in marks.items() if m.get("stage") == "error"}
    if results and len(errors) == len(results):
        first = next(iter(errors.values()))
        out.append(Finding("info", f"the test convolution could not run: {first}"))
    elif default is not None and fast is not None:
        if default.timed_out and fast.finished:
            out.append(
                Finding(
                    "fail",
                    f"MIOpen's default Find did not finish a tiny convolution in {limit:.0f} s (stuck at stage "
                    f"{stage('default')}); with MIOPEN_FIND_MODE=FAST it took {fast.seconds:.1f} s: set "
                    "MIOPEN_FIND_MODE=FAST for the job (and a per-job MIOPEN_USER_DB_PATH)",
                    CAUSE,
                )
            )
        elif default.timed_out and fast.timed_out:
            reached = stage("default")
            before_conv = reached not in STAGES or STAGES.index(reached) < STAGES.index("conv")
            if before_conv:
                out.append(
                    Finding(
                        "fail",
                        f"no variant got past stage {reached} in {limit:.0f} s: the GPU or the HIP runtime does not "
                        "complete even a trivial operation (check dmesg for amdgpu errors, `amd-smi`)",
                        "gpu-hardware",
                    )
                )
            else:
                out.append(
                    Finding(
                        "fail",
                        f"no variant finished a tiny convolution in {limit:.0f} s, even MIOPEN_FIND_MODE=FAST: "
                        "MIOpen kernel compilation is stuck (is the cache dir writable and local? is the CPU "
                        "saturated?); run with MIOPEN_LOG_LEVEL=5 to watch it",
                        CAUSE,
                    )
                )
        elif default.finished and fast.finished:
            d_s, f_s = conv_s("default") or default.seconds, conv_s("fast") or fast.seconds
            if d_s >= SLOW_MIN_S and d_s >= SLOW_FACTOR * max(f_s, 0.001):
                out.append(
                    Finding(
                        "warn",
                        f"MIOpen's default Find took {d_s:.1f} s for one tiny convolution, {f_s:.1f} s with "
                        "MIOPEN_FIND_MODE=FAST: every new shape pays this at the first batch",
                        CAUSE,
                    )
                )
        for name, result in results.items():
            if not result.timed_out and not result.finished and name not in errors:
                out.append(
                    Finding(
                        "warn",
                        f"the {name} variant crashed (exit {result.returncode}): {_last_line(result.output_tail)}",
                        CAUSE,
                    )
                )
        nofind = results.get("no-find-db")
        if nofind is not None and nofind.timed_out and default.finished:
            out.append(
                Finding(
                    "info",
                    f"with MIOPEN_DEBUG_DISABLE_FIND_DB=1 it did not finish in {limit:.0f} s: every run searches "
                    "again; keep it unset",
                    CAUSE,
                )
            )
    if str(job_env.get("MIOPEN_DEBUG_DISABLE_FIND_DB", "")).strip() in ("1", "true", "on", "yes"):
        out.append(Finding("warn", "the job sets MIOPEN_DEBUG_DISABLE_FIND_DB=1: MIOpen searches on every run", CAUSE))
    if override:
        out.append(
            Finding(
                "info",
                f"HSA_OVERRIDE_GFX_VERSION={override}: the GPU runs as {arch or '?'}, kernels and kdb are looked up "
                "for that arch",
                CAUSE,
            )
        )
    if kdb is not None and arch:
        if kdb["exact"]:
            out.append(Finding("info", f"kernel database for {arch} installed: {', '.join(kdb['exact'][:3])}", CAUSE))
        elif kdb["same_arch"]:
            out.append(
                Finding(
                    "warn",
                    f"a kernel database for {arch} is installed for another CU count "
                    f"({', '.join(os.path.basename(p) for p in kdb['same_arch'][:3])}) but MIOpen looks for "
                    f"{' or '.join(kdb['expected'][1:]) or kdb['expected'][0]}: it compiles kernels at first use",
                    CAUSE,
                )
            )
        else:
            where = ", ".join(kdb["searched"]) or "no MIOpen db directory found"
            out.append(
                Finding(
                    "warn",
                    f"no kernel database (kdb) for {arch} (searched {where}): the first convolution of every shape "
                    "compiles kernels, minutes per shape; install the miopen kdb package for this gfx or use "
                    "MIOPEN_FIND_MODE=FAST",
                    CAUSE,
                )
            )
    elif arch is None:
        out.append(Finding("info", "could not tell the GPU's gfx arch (rocminfo, amd-smi and torch all silent)"))
    return out


# --------------------------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------------------------


def _worst(findings: Sequence[Finding]) -> str:
    for level in ("fail", "warn"):
        if any(f.severity == level for f in findings):
            return level
    return "ok"


def _gpu_arch(runner: Runner, timeout: float) -> Tuple[Optional[dict], Optional[str], List[str]]:
    """(first GPU agent, source, errors) from rocminfo, else amd-smi static."""
    errors: List[str] = []
    for argv, source in ((["rocminfo"], "rocminfo"), (["amd-smi", "static", "--json"], "amd-smi static")):
        try:
            result = runner(argv, timeout)
        except FileNotFoundError:
            continue
        except Exception as exc:
            errors.append(f"{source}: {exc}")
            continue
        if result.timed_out:
            errors.append(f"{source} did not finish within {timeout:g} s")
            continue
        if source == "rocminfo":
            agents = parse_rocminfo(result.stdout)
        else:
            try:
                agents = parse_amd_static(parse_json_text(result.stdout))
            except ValueError:
                agents = []
        if agents:
            return agents[0], source, errors
    return None, None, errors


def probe(
    timeout: float,
    *,
    pid: Optional[int] = None,
    rocm: Optional[Tuple[bool, str]] = None,
    conv_argv: Optional[Sequence[str]] = None,
    kdb_roots: Sequence[str] = ("/opt",),
    torch_directory: Optional[str] = None,
    runner: Runner = run_command,
    env: Optional[Mapping[str, str]] = None,
    progress: Callable[[str], None] = lambda message: None,
) -> ProbeResult:
    """The keywords replace what this machine lacks in tests (ROCm, a GPU, rocminfo)."""
    started = time.monotonic()
    if torch_directory is None:
        torch_directory = torch_dir()
    is_rocm, why = rocm if rocm is not None else rocm_platform(torch_directory)
    data: dict = {"platform": why}
    if not is_rocm:
        return ProbeResult(NAME, "skipped", why, data=data)

    job_env: Mapping[str, str] = os.environ if env is None else env
    interpreter = sys.executable
    if pid is not None:
        try:
            job_env = read_process_environ(pid)
            interpreter = psutil.Process(pid).exe() or interpreter
        except (InspectError, psutil.Error) as exc:
            data["errors"] = [f"could not read process {pid}: {getattr(exc, 'message', exc)}"]

    agent, arch_source, errors = _gpu_arch(runner, min(10.0, timeout * 0.1))
    override = job_env.get("HSA_OVERRIDE_GFX_VERSION")
    arch = gfx_from_override(override) or (agent or {}).get("arch")
    cus = (agent or {}).get("cus")
    data.update({"gpu": agent, "arch": arch, "arch_source": arch_source, "cus": cus, "interpreter": interpreter})
    if errors:
        data.setdefault("errors", []).extend(errors)

    # The conv runs take what is left, split evenly, with room to clean up.
    left = timeout - (time.monotonic() - started)
    limit = max(2.0, (left - min(15.0, 0.15 * timeout)) / len(VARIANTS))
    argv = list(conv_argv) if conv_argv is not None else [interpreter, "-c", CONV_SCRIPT]
    scratch = scratch_dir("debug-stuck-miopen-")
    variants: Dict[str, Dict[str, Optional[str]]] = {}
    for name, changes in VARIANTS.items():
        db = os.path.join(scratch, name, "db")
        cache = os.path.join(scratch, name, "cache")
        os.makedirs(db)
        os.makedirs(cache)
        variant: Dict[str, Optional[str]] = {k: None for k in MIOPEN_SEARCH_VARS}
        variant.update(changes)
        variant.update({"MIOPEN_USER_DB_PATH": db, "MIOPEN_CUSTOM_CACHE_DIR": cache})
        variants[name] = variant
    base = dict(os.environ)
    for key in ("HSA_OVERRIDE_GFX_VERSION", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if job_env.get(key) and job_env.get(key) != REDACTED:
            base[key] = str(job_env[key])
    try:
        results = run_variants(
            argv,
            variants,
            limit,
            base_env=base,
            cwd=scratch,
            on_start=lambda name: progress(f"tiny convolution, {name} MIOpen settings (up to {limit:.0f} s)"),
        )
    finally:
        remove_scratch(scratch)

    marks = {name: child_marks(r.output_tail) for name, r in results.items()}
    if arch is None:
        arch = next((m.get("arch").split(":")[0] for m in marks.values() if m.get("arch")), None)
        arch_source = "torch" if arch else None
    cus = cus or next((m.get("cus") for m in marks.values() if m.get("cus")), None)
    child_torch = next((m.get("torch_file") for m in marks.values() if m.get("torch_file")), None)
    directory = os.path.dirname(child_torch) if child_torch else torch_directory
    kdb = find_kdb(arch, cus, kdb_dirs(directory, kdb_roots)) if arch else None
    findings = assess(results, limit, kdb, arch, arch_source, override, job_env)
    data.update(
        {
            "arch": arch,
            "arch_source": arch_source,
            "cus": cus,
            "limit_s": round(limit, 1),
            "variants": {
                name: {**r.to_dict(), "stage": marks[name].get("stage"), "conv_s": marks[name].get("conv_s")}
                for name, r in results.items()
            },
            "kdb": kdb,
        }
    )
    status = _worst(findings)
    unable = [m.get("error") for m in marks.values() if m.get("stage") == "error"]
    if status == "ok" and results and len(unable) == len(results):
        # nothing was measured: not a clean bill of health
        return ProbeResult(NAME, "skipped", f"the test convolution could not run: {unable[0]}", data, findings)
    ran = ", ".join(
        f"{name} {'ok ' + format(r.seconds, '.1f') + ' s' if r.finished else 'TIMEOUT' if r.timed_out else 'failed'}"
        for name, r in results.items()
    )
    top = [f for f in findings if f.severity == status]
    summary = top[0].message if top and status != "ok" else f"{arch or 'unknown gfx'}: {ran}"
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


def run(ctx: ProbeContext) -> ProbeResult:
    return probe(ctx.timeout, pid=ctx.pids[0] if ctx.pids else None, progress=ctx.progress)
