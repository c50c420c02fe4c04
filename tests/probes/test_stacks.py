"""debug_stuck.probes.collectors.stacks against real processes and the real py-spy / pystack: no mocks of the tools."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from debug_stuck.probes.collectors import stacks
from debug_stuck.probes.collectors.stacks import (
    Frame,
    StackDump,
    StackError,
    StackSeries,
    ThreadStack,
    dump_stacks,
    sample_stacks,
)

REPO = Path(__file__).resolve().parents[2]
TARGETS = Path(__file__).resolve().parents[1] / "targets"

needs_py_spy = pytest.mark.skipif(stacks._find_py_spy() is None, reason="py-spy is not installed")


def _wait_ready(proc: subprocess.Popen, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if line.strip() == b"ready":
                return
            if not line:
                break
    raise AssertionError(f"target {proc.args} did not get ready (exit status {proc.poll()})")


@pytest.fixture
def spawn(session_job):
    """Start a target in its own session (ended with its tree at the end: conftest.session_job)."""

    def start(argv, ready=True):
        proc = session_job(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if ready:
            _wait_ready(proc)
        return proc

    return start


def threads_target(spawn, *args):
    return spawn([sys.executable, str(TARGETS / "stacks_threads.py"), *map(str, args)])


def by_name(dump: StackDump) -> dict:
    return {thread.name: thread for thread in dump.threads}


def wait_state(pid: int, wanted: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == wanted:
                return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never reached state {wanted}")


# --- the data model -----------------------------------------------------------------------------


def test_frame_text_and_dict():
    frame = Frame("DataLoader._try_get_data", "torch/utils/data/dataloader.py", 1133)
    assert frame.text() == "_try_get_data (torch/utils/data/dataloader.py:1133)"
    assert frame.to_dict() == {
        "function": "DataLoader._try_get_data",
        "file": "torch/utils/data/dataloader.py",
        "line": 1133,
    }
    native = Frame("__new_sem_wait_slow64.constprop.0", "libc.so.6", None, native=True)
    assert native.text() == "__new_sem_wait_slow64.constprop.0 (libc.so.6)"
    assert native.to_dict() == {
        "function": "__new_sem_wait_slow64.constprop.0",
        "file": "libc.so.6",
        "line": None,
        "native": True,
    }


def test_thread_signature_and_motion():
    def thread(line):
        frames = [Frame("wait", "threading.py", line), Frame("memcpy", "libc.so.6", None, native=True)]
        return ThreadStack(tid=7, name="MainThread", state="idle", frames=frames)

    assert thread(1).signature() == (("wait", "threading.py"),)
    assert thread(1).signature(lines=True) == (("wait", "threading.py", 1),)
    assert thread(1).to_dict() == {
        "tid": 7,
        "name": "MainThread",
        "state": "idle",
        "frames": [
            {"function": "wait", "file": "threading.py", "line": 1},
            {"function": "memcpy", "file": "libc.so.6", "line": None, "native": True},
        ],
    }
    one = StackDump(pid=1, threads=[thread(1)], tool="py-spy", seconds=0.1)
    two = StackDump(pid=1, threads=[thread(2)], tool="py-spy", seconds=0.1)
    assert StackSeries(1, [one], None, None).frozen() is None
    assert StackSeries(1, [one], None, None).thread_motion() == {7: "unknown"}
    assert StackSeries(1, [one, one], None, None).frozen() is True
    assert StackSeries(1, [one, two], None, None).thread_motion() == {7: "moving"}
    assert StackSeries(1, [one, two], None, None).frozen() is False


# --- live processes -----------------------------------------------------------------------------


@needs_py_spy
@pytest.mark.timeout(60)
def test_threads_frames_names_and_idle_state(spawn):
    proc = threads_target(spawn)
    dump = dump_stacks(proc.pid)
    assert dump.error is None and dump.tool == "py-spy" and dump.seconds < 5
    threads = by_name(dump)
    assert {"MainThread", "sleeper", "blocked"} <= set(threads)
    assert threads["MainThread"].tid == proc.pid
    for thread in threads.values():
        assert thread.state == "idle", thread
    sleeper = threads["sleeper"]
    assert sleeper.frames[0].text().startswith("sleeper (stacks_threads.py:")
    assert [f.function for f in sleeper.frames][-3:] == ["Thread.run", "Thread._bootstrap_inner", "Thread._bootstrap"]
    assert sleeper.frames[1].text().startswith("run (threading.py:")
    assert threads["blocked"].frames[0].function == "blocked"
    main_functions = [f.function for f in threads["MainThread"].frames]
    assert main_functions[-2:] == ["main", "<module>"] and "Event.wait" in main_functions
    shape = dump.threads[0].to_dict()
    assert set(shape) == {"tid", "name", "state", "frames"}
    first = shape["frames"][0]
    assert {"function", "file", "line"} <= set(first) <= {"function", "file", "line", "path"}
    assert first.get("path", first["file"]).endswith(first["file"])
    # the fix command opens the user's file by this path, so it must be the real one
    assert Path(sleeper.frames[0].path or sleeper.frames[0].file).resolve().name == "stacks_threads.py"
    assert Path(sleeper.frames[0].path or sleeper.frames[0].file).is_file()


@needs_py_spy
@pytest.mark.timeout(60)
def test_native_frames(spawn):
    proc = threads_target(spawn)
    dump = dump_stacks(proc.pid, native=True)
    assert dump.tool in ("py-spy --native", "pystack", "py-spy")
    if dump.tool == "py-spy":
        # Native unwinding is not available everywhere; then the dump says so.
        assert any("native frames unavailable" in note for note in dump.notes)
        return
    blocked = by_name(dump).get("blocked") or next(t for t in dump.threads if t.signature()[0][0] == "blocked")
    assert any(f.native for f in blocked.frames)
    assert any(not f.native and f.function == "blocked" for f in blocked.frames)


@pytest.mark.timeout(60)
def test_pystack_when_py_spy_is_missing(spawn, monkeypatch):
    pytest.importorskip("pystack")
    proc = threads_target(spawn)
    monkeypatch.setattr(stacks, "_find_py_spy", lambda: None)
    for native in (False, True):
        dump = dump_stacks(proc.pid, native=native, timeout=20)
        assert dump.tool == "pystack"
        assert len(dump.threads) == 3
        python = {t.signature()[0][0] for t in dump.threads}
        assert {"sleeper", "blocked"} <= python
        assert any(f.native for t in dump.threads for f in t.frames) == native


@pytest.mark.timeout(60)
def test_no_tool_at_all_is_missing_tool(spawn, monkeypatch):
    proc = threads_target(spawn)
    monkeypatch.setattr(stacks, "_find_py_spy", lambda: None)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")  # pystack runs in a child of this
    with pytest.raises(StackError) as info:
        dump_stacks(proc.pid)
    assert info.value.kind == "missing-tool"
    assert "pip install py-spy" in info.value.message


@needs_py_spy
@pytest.mark.timeout(60)
def test_busy_loop_is_active_and_moving(spawn):
    proc = spawn([sys.executable, str(TARGETS / "stacks_busy.py")])
    series = sample_stacks([proc.pid], samples=3, interval=0.5)[proc.pid]
    assert series.error is None and len(series.dumps) == 3
    main = next(t for t in series.latest().threads if t.tid == proc.pid)
    assert main.state in ("gil", "active")
    assert main.frames[0].function in ("dive", "<module>", "main")
    assert series.thread_motion()[proc.pid] == "moving"
    assert series.frozen() is False


@needs_py_spy
@pytest.mark.timeout(60)
def test_blocked_threads_are_frozen(spawn):
    proc = threads_target(spawn)
    series = sample_stacks([proc.pid], samples=3, interval=0.3)[proc.pid]
    assert series.error is None and len(series.dumps) == 3
    motion = series.thread_motion()
    assert len(motion) == 3 and set(motion.values()) == {"frozen"}
    assert series.frozen() is True


@needs_py_spy
@pytest.mark.timeout(60)
def test_non_python_process(spawn):
    proc = spawn(["sleep", "1000"], ready=False)
    time.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(StackError) as info:
        dump_stacks(proc.pid)
    print(f"not-python answer after {time.monotonic() - started:.2f} s: {info.value.message}")
    assert info.value.kind == "not-python"
    assert info.value.message == f"process {proc.pid} (sleep) is not a Python process; debug-stuck reads Python stacks"


@pytest.mark.timeout(60)
def test_pid_that_does_not_exist():
    pid = 4_000_000  # above the kernel's pid_max limit (2^22), so it can never be in use
    with pytest.raises(StackError) as info:
        dump_stacks(pid)
    assert info.value.kind == "gone"
    assert "does not exist" in info.value.message
    series = sample_stacks([pid], samples=2, interval=0.1)[pid]
    assert series.dumps == [] and series.error_kind == "gone"


@needs_py_spy
@pytest.mark.timeout(60)
def test_process_exiting_during_sampling_keeps_earlier_samples(spawn):
    proc = threads_target(spawn, 1.5)
    series = sample_stacks([proc.pid], samples=4, interval=1.0)[proc.pid]
    assert 1 <= len(series.dumps) <= 3
    assert series.error_kind == "gone"
    assert str(proc.pid) in series.error and "exited" in series.error


@needs_py_spy
@pytest.mark.timeout(60)
def test_sigstopped_process_is_bounded(spawn):
    proc = threads_target(spawn)
    os.kill(proc.pid, signal.SIGSTOP)
    wait_state(proc.pid, "T")
    timeout = 5.0
    for native in (False, True):
        started = time.monotonic()
        try:
            dump = dump_stacks(proc.pid, native=native, timeout=timeout)
        except StackError as exc:
            outcome = f"{exc.kind}: {exc.message}"
            assert exc.kind in ("timeout", "failed")
        else:
            outcome = f"{dump.tool}, {len(dump.threads)} threads, notes {dump.notes}"
            assert {"MainThread", "sleeper", "blocked"} <= set(by_name(dump)) or dump.tool == "pystack"
            assert any("stopped" in note for note in dump.notes)
        elapsed = time.monotonic() - started
        print(f"SIGSTOPped, native={native}: {elapsed:.2f} s -> {outcome}")
        assert elapsed < timeout + 3
    series = sample_stacks([proc.pid], samples=2, interval=0.3, timeout=timeout)[proc.pid]
    assert series.frozen() in (True, None)
    wait_state(proc.pid, "T")  # reading it did not resume it


@needs_py_spy
@pytest.mark.timeout(60)
def test_process_held_by_a_debugger(spawn):
    gdb = shutil.which("gdb")
    if gdb is None:
        pytest.skip("gdb is not installed")
    proc = threads_target(spawn)
    spawn([gdb, "-p", str(proc.pid), "-batch", "-ex", "shell sleep 60"], ready=False)
    try:
        wait_state(proc.pid, "t", seconds=20)
    except AssertionError:
        pytest.skip("gdb could not attach here")
    for native in (False, True):
        started = time.monotonic()
        dump = dump_stacks(proc.pid, native=native)
        print(f"traced, native={native}: {time.monotonic() - started:.2f} s, {dump.tool}, notes {dump.notes}")
        assert {"MainThread", "sleeper", "blocked"} <= set(by_name(dump))
        assert any("debugger" in note for note in dump.notes)


@needs_py_spy
@pytest.mark.timeout(60)
def test_timeout_is_reported_as_timeout(spawn, monkeypatch):
    proc = threads_target(spawn)
    started = time.monotonic()
    with pytest.raises(StackError) as info:
        dump_stacks(proc.pid, timeout=0.01)
    assert info.value.kind == "timeout" and "did not answer within 0.01s" in info.value.message
    assert time.monotonic() - started < 3
    if pytest.importorskip("pystack"):
        # pystack starts a whole interpreter, so this bound really kills a running child.
        monkeypatch.setattr(stacks, "_find_py_spy", lambda: None)
        started = time.monotonic()
        with pytest.raises(StackError) as info:
            dump_stacks(proc.pid, timeout=0.01)
        assert info.value.kind == "timeout"
        assert time.monotonic() - started < 3


@pytest.mark.timeout(60)
def test_permission_denied_says_how_to_fix(spawn):
    setpriv = shutil.which("setpriv")
    py_spy = stacks._find_py_spy()
    if os.geteuid() != 0 or setpriv is None or py_spy is None:
        pytest.skip("needs root, setpriv and py-spy to run the probe as an unprivileged user")
    proc = threads_target(spawn)
    # The unprivileged user may not reach our py-spy (under /root, say): give it a copy it can run.
    bindir = tempfile.mkdtemp(prefix="stacks-test-", dir="/tmp")
    try:
        os.chmod(bindir, 0o755)
        shutil.copy2(py_spy, os.path.join(bindir, "py-spy"))
        code = (
            "import sys; sys.path.insert(0, sys.argv[1])\n"
            "from debug_stuck.probes.collectors.stacks import dump_stacks, StackError\n"
            "try:\n    dump_stacks(int(sys.argv[2]))\nexcept StackError as e:\n    print(e.kind); print(e.message)"
        )
        argv = [setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--inh-caps=-all"]
        argv += [sys.executable, "-c", code, str(REPO), str(proc.pid)]
        env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin")
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    finally:
        shutil.rmtree(bindir, ignore_errors=True)
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) < 2:
        pytest.skip(f"cannot run the probe as nobody here: {result.stderr.strip()[-200:]}")
    print(lines)
    assert lines[0] == "permission"
    assert "CAP_SYS_PTRACE" in lines[1] and "--cap-add SYS_PTRACE" in lines[1]


@needs_py_spy
@pytest.mark.timeout(60)
def test_sampling_many_processes_costs_about_one(spawn):
    procs = [threads_target(spawn) for _ in range(8)]
    pids = [p.pid for p in procs]
    started = time.monotonic()
    one = sample_stacks(pids[:1], samples=2, interval=0.5)
    t_one = time.monotonic() - started
    started = time.monotonic()
    many = sample_stacks(pids, samples=2, interval=0.5)
    t_many = time.monotonic() - started
    print(f"sample_stacks, 2 samples 0.5 s apart: 1 process {t_one:.2f} s, 8 processes {t_many:.2f} s")
    assert all(len(one[pid].dumps) == 2 for pid in pids[:1])
    assert all(len(many[pid].dumps) == 2 and many[pid].error is None for pid in pids)
    assert t_many < 2 * t_one


def test_py_spy_entry_shims_named_by_an_address_are_left_out():
    # `py-spy dump --json --native` of a jax.distributed process (Python 3.11, jax 0.10.2, py-spy 0.4.3):
    # between nanobind's C++ frames and State.initialize py-spy gives two interpreter entry shims,
    # "0x2" and "0x7ffe889a0d00" with no file. Their addresses change from one dump to the next,
    # which read as a thread that moved: a process waiting for its peer was called progressing.
    from debug_stuck.probes.collectors.stacks import _parse_pyspy_json

    fixture = Path(__file__).parents[1] / "fixtures" / "jax" / "distributed-init-py-spy-native.json"
    text = fixture.read_text(encoding="utf-8")
    assert [f["name"] for f in json.loads(text)[0]["frames"] if f["filename"] == "?"] == ["0x2", "0x7ffe889a0d00"]
    (thread,) = _parse_pyspy_json(text)
    names = [frame.function for frame in thread.frames]
    assert not [name for name in names if name.startswith("0x")], names
    assert names.index("xla::CoordinationServiceAgent::Connect") < names.index("State.initialize")
    python = [frame.text() for frame in thread.frames if not frame.native]
    assert python[:2] == ["initialize (jax/_src/distributed.py:173)", "initialize (jax/_src/distributed.py:332)"]
    # the same dump with other shim addresses has the same signature
    other = text.replace("0x7ffe889a0d00", "0x7ffc00000040")
    assert _parse_pyspy_json(other)[0].signature(lines=True) == thread.signature(lines=True)


# A native frame of a `datasets.map(num_proc=2)` worker tokenizing with a PreTrainedTokenizerFast
# (py-spy 0.4, tokenizers 0.22): py-spy left this Rust v0 symbol mangled, and the text summary printed
# all of it. Copied from that report.
TOKENIZERS_V0_SYMBOL = (
    "_RINvMs2_NtNtCsgHYyB3hU8Ec_3std6thread5localINtB6_8LocalKeyINtNtCsevLNFiNqfJP_4core4cell7RefCellINtNtCsiyuKRL4Uo"
    "vW_5ahash8hash_map8AHashMapyIB1w_NtNtCs1C1lLj4PWSY_5alloc6string6StringNtNtNtNtCscxzlFi8rOL3_10tokenizers6models3"
    "bpe4word4WordEEEE4withNCNvMs5_NtB2Y_5modelNtB44_3BPE19tokenize_with_cache0INtNtBZ_6result6ResultINtNtB2m_3vec3Vec"
    "NtNtB32_9tokenizer5TokenEINtNtB2m_5boxed3BoxDNtNtBZ_5error5ErrorNtNtBZ_6marker4SendNtB6t_4SyncEL_EEEB32_"
)


def test_a_mangled_rust_symbol_is_shown_by_the_function_it_names():
    from debug_stuck.probes.collectors.stacks import Frame, readable_symbol

    shown = "<mangled Rust symbol, 442 characters, in tokenize_with_cache>"
    assert readable_symbol(TOKENIZERS_V0_SYMBOL) == shown
    frame = Frame(TOKENIZERS_V0_SYMBOL, "tokenizers.abi3.so", None, native=True)
    assert frame.shown_text() == f"{shown} (tokenizers.abi3.so)"
    assert frame.text() == f"{TOKENIZERS_V0_SYMBOL} (tokenizers.abi3.so)"  # what tables and signals match
    # demangled and short names are left alone
    for name in ("pthread_cond_wait", "rayon_core::registry::WorkerThread::wait_until_cold", "_ZN3foo3barE"):
        assert readable_symbol(name) == name
    # a long C++ name (py-spy --native of a DDP rank's autograd thread, torch 2.13.0): its templates folded
    handler = (
        "std::_Function_handler<void (), c10d::Reducer::mark_variable_ready(unsigned long)::{lambda()#1}>::_M_invoke"
    )
    assert readable_symbol(handler) == "std::_Function_handler<…>::_M_invoke"
    assert readable_symbol("c10d::ProcessGroupGloo::AsyncWork::execute") == "c10d::ProcessGroupGloo::AsyncWork::execute"
