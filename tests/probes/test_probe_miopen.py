"""miopen probe: the generic variant runner for real (a child that hangs under one setting, its
grandchildren in other sessions), the kdb lookup in a temporary tree, the gfx arch sources, and
the whole probe with a stand-in convolution (this machine has no ROCm: the GPU, rocminfo and
amd-smi are the seams)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from debug_stuck.bounded import CommandResult
from debug_stuck.probes.targeted import miopen as mi
from debug_stuck.probes.targeted.base import ProbeContext
from debug_stuck.probes.targeted.registry import probe_spec, run_probe

pytestmark = pytest.mark.timeout(60)

PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "probes"

HANGS_WHEN_ASKED = r"""
import os, sys, time
if os.environ.get("HANG") == "1":
    print("hanging", flush=True)
    while True:
        time.sleep(1)
print("done", os.environ.get("TAG"), flush=True)
sys.exit(int(os.environ.get("EXIT", "0")))
"""

# Starts a grandchild in its own session (as torchrun starts its ranks), prints its PID, then
# either hangs or exits at once, leaving the grandchild behind.
SPAWNS_A_SESSION = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("grandchild", child.pid, flush=True)
time.sleep(0.5)
if os.environ.get("HANG") == "1":
    while True:
        time.sleep(1)
"""


@pytest.fixture
def reaper():
    """PIDs a test saw; whatever is still alive at the end is killed by PID."""
    pids = []
    yield pids
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def gone(pid: int, wait: float = 2.0) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# run_variants / run_bounded, for real
# ---------------------------------------------------------------------------------------------


def test_run_variants_times_out_the_hanging_variant_and_lets_the_others_finish():
    limit = 1.5
    variants = {
        "plain": {"TAG": "a"},
        "hang": {"HANG": "1"},
        "exit3": {"EXIT": "3"},
        "unset": {"TAG": None},
    }
    started = time.monotonic()
    results = mi.run_variants(
        [sys.executable, "-c", HANGS_WHEN_ASKED], variants, limit, base_env={**os.environ, "TAG": "base"}
    )
    elapsed = time.monotonic() - started
    hang = results["hang"]
    assert hang.timed_out and not hang.finished and hang.returncode is None
    assert limit <= hang.seconds < limit + 0.5
    assert "hanging" in hang.output_tail
    plain = results["plain"]
    assert plain.finished and not plain.timed_out and plain.returncode == 0 and plain.seconds < limit
    assert plain.output_tail.strip() == "done a"
    assert results["exit3"].returncode == 3 and not results["exit3"].finished and not results["exit3"].timed_out
    assert results["unset"].output_tail.strip() == "done None"
    assert list(results) == list(variants)
    assert elapsed < limit + 3 * 1.0 + 1.0  # three quick variants and one bounded one


def test_the_whole_tree_is_killed_at_the_limit_even_in_another_session(reaper):
    result = mi.run_bounded([sys.executable, "-c", SPAWNS_A_SESSION], {**os.environ, "HANG": "1"}, 1.5)
    assert result.timed_out
    pid = int(result.output_tail.split("grandchild", 1)[1].split()[0])
    reaper.append(pid)
    assert gone(pid), "the grandchild in its own session survived"


def test_leftovers_of_a_child_that_finished_are_killed_too(reaper):
    result = mi.run_bounded([sys.executable, "-c", SPAWNS_A_SESSION], dict(os.environ), 10)
    assert result.finished and result.seconds < 5
    pid = int(result.output_tail.split("grandchild", 1)[1].split()[0])
    reaper.append(pid)
    assert gone(pid)


def test_a_missing_program_is_a_result_not_an_exception():
    result = mi.run_bounded(["/nonexistent/python"], dict(os.environ), 1)
    assert not result.finished and not result.timed_out and result.returncode is None
    assert result.output_tail.startswith("could not start /nonexistent/python")


@pytest.mark.timeout(90)
def test_the_real_convolution_script_reports_no_gpu_here():
    result = mi.run_bounded([sys.executable, "-c", mi.CONV_SCRIPT], dict(os.environ), 60)
    marks = mi.child_marks(result.output_tail)
    if marks.get("stage") == "done":
        pytest.skip("this machine has a usable GPU")
    assert result.returncode in (3, 4)
    assert marks["stage"] == "error"


# ---------------------------------------------------------------------------------------------
# gfx arch and kdb lookup
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,arch",
    [("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), ("9.4.2", "gfx942"), ("x", None), ("", None)],
)
def test_hsa_override_to_gfx(value, arch):
    assert mi.gfx_from_override(value) == arch


def test_rocminfo_recorded_output():
    # tests/fixtures/probes/rocminfo-rx6700xt.txt: ollama/ollama#8463, truncated by its author
    text = (PROBES / "rocminfo-rx6700xt.txt").read_text(encoding="utf-8")
    assert mi.parse_rocminfo(text) == [{"arch": "gfx1031", "cus": None, "name": "AMD Radeon RX 6700 XT"}]


def test_rocminfo_compute_units_features_and_isa_names():
    text = """
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942:sramecc+:xnack-
  Marketing Name:          AMD Instinct MI300X
  Device Type:             GPU
  Compute Unit:            304
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
"""
    assert mi.parse_rocminfo(text) == [{"arch": "gfx942", "cus": 304, "name": "AMD Instinct MI300X"}]


def test_amd_smi_static_arch():
    # the asic fields of amd-smi static (amdsmi CLI: num_compute_units, target_graphics_version)
    doc = {
        "gpu_data": [
            {"gpu": 0, "asic": {"market_name": "MI300X", "num_compute_units": 304, "target_graphics_version": "gfx942"}}
        ]
    }
    assert mi.parse_amd_static(doc) == [{"arch": "gfx942", "cus": 304, "name": "MI300X"}]
    assert mi.parse_amd_static([{"gpu": 0, "asic": {"market_name": "Navi 23"}}]) == []


@pytest.fixture
def kdb_tree(tmp_path):
    """/opt/rocm-6.1.0/share/miopen/db, the older /opt/rocm/miopen/share/miopen/db, a torch wheel."""
    files = {
        "opt/rocm-6.1.0/share/miopen/db": ["gfx1030_36.kdb", "gfx90a68.kdb", "gfx942130.kdb", "gfx1030_36.db"],
        "opt/rocm/miopen/share/miopen/db": ["gfx900_56.kdb"],
        "site-packages/torch/share/miopen/db": ["gfx1100_48.kdb"],
    }
    for folder, names in files.items():
        (tmp_path / folder).mkdir(parents=True)
        for name in names:
            (tmp_path / folder / name).write_bytes(b"SQLite format 3\x00")
    (tmp_path / "site-packages/torch/version.py").write_text("hip: Optional[str] = '6.2.41133-dd7f95766'\n")
    return tmp_path


def test_kdb_dirs_cover_rocm_and_the_torch_wheel(kdb_tree):
    dirs = mi.kdb_dirs(str(kdb_tree / "site-packages/torch"), roots=[str(kdb_tree / "opt")])
    assert [os.path.relpath(d, kdb_tree) for d in dirs] == [
        "opt/rocm-6.1.0/share/miopen/db",
        "opt/rocm/miopen/share/miopen/db",
        "site-packages/torch/share/miopen/db",
    ]


@pytest.mark.parametrize(
    "arch,cus,exact,same_arch",
    [
        ("gfx1030", 36, ["gfx1030_36.kdb"], []),
        ("gfx1030", 40, [], ["gfx1030_36.kdb"]),  # MIOpen#1606: a 40-CU card wants gfx1030_40.kdb
        ("gfx90a", 104, ["gfx90a68.kdb"], []),  # hex CU count (MIOpen#1651: MI210 = 104 = 0x68)
        ("gfx942", 304, ["gfx942130.kdb"], []),
        ("gfx90a", None, ["gfx90a68.kdb"], []),  # CU count unknown: any kdb of the arch
        ("gfx900", 64, [], ["gfx900_56.kdb"]),  # gfx900 is not gfx90a
        ("gfx1100", 48, ["gfx1100_48.kdb"], []),  # from the torch wheel
        ("gfx1031", 40, [], []),
    ],
)
def test_find_kdb(kdb_tree, arch, cus, exact, same_arch):
    dirs = mi.kdb_dirs(str(kdb_tree / "site-packages/torch"), roots=[str(kdb_tree / "opt")])
    found = mi.find_kdb(arch, cus, dirs)
    assert [os.path.basename(p) for p in found["exact"]] == exact
    assert [os.path.basename(p) for p in found["same_arch"]] == same_arch
    assert found["searched"] == dirs


def test_rocm_detection_without_importing_torch(kdb_tree, tmp_path):
    torch_here = str(kdb_tree / "site-packages/torch")
    assert mi.torch_hip_version(torch_here) == "6.2.41133-dd7f95766"
    assert mi.rocm_platform(torch_here, rocm_root=str(tmp_path / "none")) == (
        True,
        "torch is a ROCm build (torch.version.hip=6.2.41133-dd7f95766)",
    )
    cpu_torch = mi.torch_dir()
    assert mi.torch_hip_version(cpu_torch) is None  # the CPU build installed here
    ok, why = mi.rocm_platform(cpu_torch, rocm_root=str(tmp_path / "none"))
    assert not ok and why == "not ROCm: torch here is not a ROCm build, no " + str(tmp_path / "none")


# ---------------------------------------------------------------------------------------------
# Judging constructed results
# ---------------------------------------------------------------------------------------------


def vr(finished=True, seconds=1.0, timed_out=False, rc=0, **marks):
    import json

    tail = "".join(f"DEBUG_STUCK {json.dumps({k: v})}\n" for k, v in marks.items())
    return mi.VariantResult(finished, seconds, None if timed_out else rc, timed_out, tail)


def test_assess_default_hangs_fast_finishes():
    results = {
        "default": vr(False, 50, True, stage="conv"),
        "fast": vr(seconds=2.1, stage="done", conv_s=0.4),
        "no-find-db": vr(False, 50, True, stage="conv"),
    }
    findings = mi.assess(results, 50, None, None, None, None, {})
    assert findings[0].severity == "fail" and findings[0].cause == "miopen-find"
    assert findings[0].message.startswith(
        "MIOpen's default Find did not finish a tiny convolution in 50 s (stuck at stage conv); with"
        " MIOPEN_FIND_MODE=FAST it took 2.1 s: set MIOPEN_FIND_MODE=FAST"
    )


def test_assess_nothing_gets_past_device_init_is_the_gpu():
    results = {name: vr(False, 50, True, stage="device") for name in mi.VARIANTS}
    findings = mi.assess(results, 50, None, "gfx90a", "rocminfo", None, {})
    assert findings[0].severity == "fail" and findings[0].cause == "gpu-hardware"
    assert findings[0].message.startswith("no variant got past stage device in 50 s")


def test_assess_all_stuck_in_the_convolution_is_miopen():
    results = {name: vr(False, 50, True, stage="conv") for name in mi.VARIANTS}
    findings = mi.assess(results, 50, None, "gfx90a", "rocminfo", None, {})
    assert findings[0].cause == "miopen-find" and "even MIOPEN_FIND_MODE=FAST" in findings[0].message


def test_assess_slow_default_is_a_warning():
    results = {
        "default": vr(seconds=31, stage="done", conv_s=30.0),
        "fast": vr(seconds=2, stage="done", conv_s=0.5),
        "no-find-db": vr(seconds=33, stage="done", conv_s=31.0),
    }
    findings = mi.assess(results, 50, None, None, None, None, {})
    assert [(f.severity, f.message[:45]) for f in findings] == [
        ("warn", "MIOpen's default Find took 30.0 s for one tin"),
        ("info", "could not tell the GPU's gfx arch (rocminfo, "),
    ]


def test_assess_no_torch_kdb_override_and_job_env(kdb_tree):
    results = {
        name: vr(False, 0.3, rc=3, stage="error", error="cannot import torch: No module named 'torch'")
        for name in mi.VARIANTS
    }
    dirs = mi.kdb_dirs(None, roots=[str(kdb_tree / "opt")])
    kdb = mi.find_kdb("gfx1030", 40, dirs)
    findings = mi.assess(results, 50, kdb, "gfx1030", "rocminfo", "10.3.0", {"MIOPEN_DEBUG_DISABLE_FIND_DB": "1"})
    got = [(f.severity, f.cause, f.message.split(":")[0]) for f in findings]
    assert got == [
        ("info", None, "the test convolution could not run"),
        ("warn", "miopen-find", "the job sets MIOPEN_DEBUG_DISABLE_FIND_DB=1"),
        ("info", "miopen-find", "HSA_OVERRIDE_GFX_VERSION=10.3.0"),
        (
            "warn",
            "miopen-find",
            "a kernel database for gfx1030 is installed for another CU count (gfx1030_36.kdb) "
            "but MIOpen looks for gfx1030_40.kdb or gfx103028.kdb",
        ),
    ]
    none = mi.assess({}, 50, mi.find_kdb("gfx1031", None, dirs), "gfx1031", "rocminfo", None, {})
    assert none[0].severity == "warn" and none[0].message.startswith("no kernel database (kdb) for gfx1031 (searched ")


# ---------------------------------------------------------------------------------------------
# The whole probe with a stand-in convolution
# ---------------------------------------------------------------------------------------------

# Behaves like MIOpen's trap: the default search never ends, FAST (or no find db) returns.
FAKE_CONV = r"""
import json, os, time
def say(**kw):
    print("DEBUG_STUCK " + json.dumps(kw), flush=True)
say(stage="props", arch="gfx1031", cus=40)
say(stage="conv", mode=os.environ.get("MIOPEN_FIND_MODE"), db=os.environ.get("MIOPEN_USER_DB_PATH"),
    cache=os.environ.get("MIOPEN_CUSTOM_CACHE_DIR"), cwd=os.getcwd())
if os.environ.get("MIOPEN_FIND_MODE") != "FAST" and os.environ.get("MIOPEN_DEBUG_DISABLE_FIND_DB") != "1":
    while True:
        time.sleep(1)
say(stage="done", conv_s=0.01)
"""


def rocminfo_runner(text):
    def run(argv, timeout):
        if argv[0] != "rocminfo":
            raise FileNotFoundError(argv[0])
        return CommandResult(argv=argv, returncode=0, stdout=text, stderr="", timed_out=False)

    return run


def test_probe_end_to_end_with_a_hanging_default_find(kdb_tree, monkeypatch):
    monkeypatch.setenv("MIOPEN_FIND_MODE", "NORMAL")  # the user's setting must not leak into the variants
    text = (PROBES / "rocminfo-rx6700xt.txt").read_text(encoding="utf-8")
    started = time.monotonic()
    result = mi.probe(
        8,
        rocm=(True, "test: ROCm assumed"),
        conv_argv=[sys.executable, "-c", FAKE_CONV],
        kdb_roots=[str(kdb_tree / "opt")],
        torch_directory=str(kdb_tree / "site-packages/torch"),
        runner=rocminfo_runner(text),
        env={"HSA_OVERRIDE_GFX_VERSION": ""},
    )
    elapsed = time.monotonic() - started
    assert elapsed < 8
    assert result.status == "fail"
    assert result.summary.startswith("MIOpen's default Find did not finish a tiny convolution in 2 s")
    variants = result.data["variants"]
    assert variants["default"]["timed_out"] and variants["fast"]["finished"] and variants["no-find-db"]["finished"]
    assert variants["default"]["stage"] == "conv" and variants["fast"]["conv_s"] == 0.01
    marks = {name: mi.child_marks(v["output_tail"]) for name, v in variants.items()}
    assert marks["default"]["mode"] is None and marks["fast"]["mode"] == "FAST"
    dbs = {m["db"] for m in marks.values()} | {m["cache"] for m in marks.values()}
    assert len(dbs) == 6  # a fresh user db and kernel cache per variant
    assert not any(os.path.exists(p) for p in dbs)  # removed afterwards
    assert result.data["arch"] == "gfx1031" and result.data["arch_source"] == "rocminfo"
    kdb = [f for f in result.findings if "kernel database" in f.message]
    assert kdb[0].severity == "warn" and kdb[0].message.startswith("no kernel database (kdb) for gfx1031")


def test_probe_arch_from_the_override_and_from_torch(kdb_tree):
    quick = [sys.executable, "-c", FAKE_CONV.replace('!= "FAST"', '== "never"')]
    result = mi.probe(
        10,
        rocm=(True, "test"),
        conv_argv=quick,
        kdb_roots=[str(kdb_tree / "opt")],
        runner=rocminfo_runner(""),
        env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
    )
    assert result.data["arch"] == "gfx1030" and result.data["cus"] == 40  # CUs from the child (torch)
    assert any(
        f.message.startswith("HSA_OVERRIDE_GFX_VERSION=10.3.0: the GPU runs as gfx1030") for f in result.findings
    )
    assert result.status == "warn"  # gfx1030_36.kdb only, this card has 40 CUs
    assert all(v["finished"] for v in result.data["variants"].values())
    result = mi.probe(
        10, rocm=(True, "test"), conv_argv=quick, kdb_roots=[str(kdb_tree / "opt")], runner=rocminfo_runner(""), env={}
    )
    assert result.data["arch"] == "gfx1031" and result.data["arch_source"] == "torch"


def test_probe_without_a_usable_torch_is_skipped_with_the_reason(kdb_tree):
    no_torch = [sys.executable, "-c", NO_TORCH]
    result = mi.probe(
        10,
        rocm=(True, "test"),
        conv_argv=no_torch,
        kdb_roots=[str(kdb_tree / "opt")],
        runner=rocminfo_runner(""),
        env={},
    )
    assert result.status == "skipped"
    assert result.summary == "the test convolution could not run: cannot import torch: No module named 'torch'"
    assert all(v["returncode"] == 3 for v in result.data["variants"].values())


NO_TORCH = """
import json
print("DEBUG_STUCK " + json.dumps({"stage": "error", "error": "cannot import torch: No module named 'torch'"}))
raise SystemExit(3)
"""


def test_real_run_here_is_skipped():
    ok, _ = mi.rocm_platform(mi.torch_dir())
    if ok:
        pytest.skip("this machine has ROCm")
    started = time.monotonic()
    result = run_probe("miopen", ProbeContext(timeout=probe_spec("miopen").timeout))
    assert time.monotonic() - started < 2
    assert result.status == "skipped" and result.summary.startswith("not ROCm: ")
