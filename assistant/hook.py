"""Inside the job, for when no outside tool may attach (no root, Yama ptrace_scope=1, a container
without SYS_PTRACE): a dump of every thread on a signal, and a cheap step heartbeat.

    import debug_stuck.hook
    debug_stuck.hook.install()          # once, early in the training script

    for step, batch in enumerate(loader):
        ...
        debug_stuck.hook.step(step)     # a clock read and a few bytes into shared memory

Lightning: ``Trainer(callbacks=[debug_stuck.hook.LightningHeartbeat()])``; the HF Trainer:
``Trainer(..., callbacks=[debug_stuck.hook.TrainerHeartbeat()])``. Both install the hook too.

`install()` registers faulthandler for one signal (SIGUSR2, or a real-time signal when the job
already handles SIGUSR2): on that signal every thread's Python stack is appended to this process's
stack file, and the job goes on. It writes a marker file naming that signal, so `debug-stuck
diagnose` and `watch` send it only to a process whose marker they found: the same signal sent to a
process without the handler would end it. Files live in ``$DEBUG_STUCK_HOOK_DIR`` or
``/tmp/debug-stuck-hook-<uid>`` (a private folder, 0700), named by PID, and are removed at exit.

When the job runs with the Flight Recorder on (TORCH_FR_BUFFER_SIZE, formerly
TORCH_NCCL_TRACE_BUFFER_SIZE, above 0), install() also makes a FIFO ``<pid>.frreq`` and a daemon
thread that sleeps in read() on it: a write there makes the thread call torch's own dump
(``_dump_nccl_trace()`` where a CUDA build's NCCL recorder has entries, else ``_dump_fr_trace()``)
and write ``<pid>.fr`` (the pickle NCCL writes at a watchdog timeout; atomic, 0600) or, if that
fails, ``<pid>.fr.err``. A thread, not a signal: faulthandler's C handler cannot
call Python, and a Python signal handler runs only when the main thread gets back to the
interpreter, which a rank blocked in a collective never does; the thread runs while the main
thread waits in C with the GIL released (gloo and NCCL waits release it). The marker names the
FIFO and both files (keys fr_request, fr_dump, fr_error).

Importing this module is cheap (standard library only) and never touches the job until install().
"""

from __future__ import annotations

import atexit
import faulthandler
import json
import mmap
import os
import signal
import stat
import sys
import threading
import time
from typing import Optional

ENV_DIR = "DEBUG_STUCK_HOOK_DIR"
_HEARTBEAT_WIDTH = 64  # the heartbeat file is rewritten in place, always this many bytes
_BLANK = b" " * _HEARTBEAT_WIDTH
FR_BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # the order torch reads them
# NCCL's recorder (CUDA builds; what the watchdog writes), then the generic one (gloo, torch >= 2.7)
_FR_DUMPERS = ("_dump_nccl_trace", "_dump_fr_trace")

_state: dict = {}


def hook_dir(uid: Optional[int] = None, env: Optional[dict] = None) -> str:
    """Where the hook of a process of `uid` (default: ours) keeps its files."""
    env = os.environ if env is None else env
    if env.get(ENV_DIR):
        return env[ENV_DIR]
    return os.path.join("/tmp", f"debug-stuck-hook-{os.getuid() if uid is None else uid}")


def process_start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the PID,
    it names one process, never a later one that reused the PID."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _private_dir(path: str) -> str:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{path} is not a folder of this user: the hook will not write there")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _pick_signal() -> int:
    """SIGUSR2 unless the job already handles it; then a real-time signal nobody handles."""
    candidates = [signal.SIGUSR2]
    if hasattr(signal, "SIGRTMIN"):
        candidates += [signal.SIGRTMIN + n for n in (3, 4, 5, 6)]
    for signum in candidates:
        try:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                return int(signum)
        except (ValueError, OSError):
            continue
    raise OSError("no free signal for the stack dump: SIGUSR2 and the real-time signals are all handled")


def _signal_name(signum: int) -> str:
    if hasattr(signal, "SIGRTMIN") and signum > signal.SIGRTMIN:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}"  # what `kill -s` takes
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def install(folder: Optional[str] = None) -> Optional[str]:
    """Install the dump-on-signal handler and the heartbeat file; returns the marker's path.
    Idempotent; a second call in the same process returns the first one's marker. Never raises:
    a hook that cannot install says why on stderr and the job runs on as before."""
    if _state.get("pid") == os.getpid():
        return _state.get("marker")  # None when an earlier try in this process failed
    made: list = []
    try:
        return _install(folder, made)
    except Exception as exc:
        for path in made:
            try:
                os.unlink(path)
            except OSError:
                pass
        print(f"debug_stuck.hook: not installed: {exc}", file=sys.stderr)
        return None


def _install(folder: Optional[str], made: list) -> str:
    pid = os.getpid()
    where = _private_dir(folder or hook_dir())
    signum = _pick_signal()
    stacks_path = os.path.join(where, f"{pid}.stacks")
    beat_path = os.path.join(where, f"{pid}.heartbeat")
    marker_path = os.path.join(where, f"{pid}.json")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    made += [stacks_path, beat_path, marker_path]
    stacks = os.fdopen(os.open(stacks_path, flags | os.O_APPEND, 0o600), "w")
    beat_fd = os.open(beat_path, (flags & ~os.O_WRONLY) | os.O_RDWR, 0o600)
    faulthandler.register(signum, file=stacks, all_threads=True, chain=False)
    marker = {
        "hook": 1,
        "pid": pid,
        "start_ticks": process_start_ticks(pid),
        "signal": signum,
        "signal_name": _signal_name(signum),
        "stacks": stacks_path,
        "heartbeat": beat_path,
        "python": sys.version.split()[0],
        "installed": time.time(),
    }
    from debug_stuck.writer import write_file  # 0600, fsynced, renamed into place, never through a link

    fr_files = _offer_fr_dumps(where, pid, made) if fr_enabled() else None
    if fr_files:
        marker.update(fr_request=fr_files[0], fr_dump=fr_files[1], fr_error=fr_files[2])
    write_file(marker_path, json.dumps(marker))
    os.pwrite(beat_fd, _BLANK[:-1] + b"\n", 0)
    beat = mmap.mmap(beat_fd, _HEARTBEAT_WIDTH)  # shared: readers of the file see every step at once
    os.close(beat_fd)
    _state.update(pid=pid, marker=marker_path, stacks=stacks, beat=beat, signum=signum)
    _state["files"] = [marker_path, stacks_path, beat_path, *(fr_files or ())]
    atexit.register(_remove)
    if fr_files:
        threading.Thread(target=_serve_fr_requests, args=fr_files, name="debug_stuck.hook:fr", daemon=True).start()
    _beat(None)
    return marker_path


def fr_enabled(env: Optional[dict] = None) -> bool:
    """The Flight Recorder is on in this job: the first of FR_BUFFER_VARS that is set is above 0."""
    env = os.environ if env is None else env
    for name in FR_BUFFER_VARS:
        value = env.get(name, "").strip()
        if value:
            try:
                return int(value) > 0
            except ValueError:
                return False
    return False


def _offer_fr_dumps(where: str, pid: int, made: list) -> tuple:
    """(request FIFO, dump file, error file) in the hook's folder; the FIFO is made here."""
    request = os.path.join(where, f"{pid}.frreq")
    try:
        os.unlink(request)  # left by an earlier process with our PID
    except FileNotFoundError:
        pass
    os.mkfifo(request, 0o600)
    made.append(request)
    return request, os.path.join(where, f"{pid}.fr"), os.path.join(where, f"{pid}.fr.err")


def _serve_fr_requests(request: str, dump_path: str, error_path: str) -> None:
    """Sleep in read() on the FIFO (no polling, no CPU); every request gets one dump."""
    try:
        # O_RDWR: the open never waits for a writer, and read() never sees end-of-file
        fd = os.open(request, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    while _state.get("pid") == os.getpid():
        try:
            if not os.read(fd, 4096):
                return
        except OSError:
            return
        _write_fr_dump(dump_path, error_path)


def _write_fr_dump(dump_path: str, error_path: str) -> None:
    from debug_stuck.writer import write_file

    try:
        write_file(dump_path, _fr_bytes())
    except Exception as exc:
        try:
            write_file(error_path, f"{type(exc).__name__}: {exc}\n")
        except Exception:
            pass


def _fr_bytes() -> bytes:
    """torch's own Flight Recorder dump, from the torch the job already imported (importing it from
    this thread could deadlock against the main thread's imports)."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    if c10d is None:
        torch = sys.modules.get("torch")
        c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    if c10d is None:
        raise RuntimeError("torch.distributed is not loaded in the job (yet)")
    dumps = [bytes(getattr(c10d, name)()) for name in _FR_DUMPERS if hasattr(c10d, name)]
    if not dumps:
        raise RuntimeError("this torch has no Flight Recorder dump function (_dump_fr_trace)")
    return next((d for d in dumps if _has_entries(d)), dumps[-1])


def _has_entries(dump: bytes) -> bool:
    import pickle  # torch's own output from this very process: plain pickle is safe here

    try:
        return bool(pickle.loads(dump).get("entries"))
    except Exception:
        return False


def step(n: Optional[int] = None) -> None:
    """Record progress: the step number (when given) and the time. A few bytes written into a
    shared memory page (no system call): about 2 µs (bench/hook.py); installs the hook on first use."""
    if _state.get("pid") != os.getpid():
        if install() is None:
            _state["pid"] = os.getpid()  # failed once: stay out of the way
            return
    _beat(n)


def _beat(n: Optional[int]) -> None:
    page = _state.get("beat")
    if page is None:
        return
    line = f"{time.time():.3f} {'' if n is None else int(n)}".encode("ascii")
    page[: len(line)] = line
    page[len(line) : _HEARTBEAT_WIDTH - 1] = _BLANK[: _HEARTBEAT_WIDTH - 1 - len(line)]


def _remove() -> None:
    if _state.get("pid") != os.getpid():
        return  # a forked child (a DataLoader worker) must not remove its parent's files
    try:
        faulthandler.unregister(_state["signum"])
    except Exception:
        pass
    for path in _state.get("files", []):
        try:
            os.unlink(path)
        except OSError:
            pass


def _lightning_base():
    try:
        from lightning.pytorch.callbacks import Callback  # lightning >= 2
    except ImportError:
        from pytorch_lightning.callbacks import Callback
    return Callback


def _trainer_base():
    from transformers import TrainerCallback

    return TrainerCallback


def __getattr__(name: str):
    """The framework callbacks, built on first use so importing the hook imports no framework."""
    if name == "LightningHeartbeat":

        class LightningHeartbeat(_lightning_base()):
            """Installs the hook at fit start; a heartbeat after every training batch."""

            def on_fit_start(self, trainer, pl_module):
                install()

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                step(trainer.global_step)

        globals()[name] = LightningHeartbeat
        return LightningHeartbeat
    if name == "TrainerHeartbeat":

        class TrainerHeartbeat(_trainer_base()):
            """Installs the hook at train begin; a heartbeat after every optimizer step."""

            def on_train_begin(self, args, state, control, **kwargs):
                install()

            def on_step_end(self, args, state, control, **kwargs):
                step(state.global_step)

        globals()[name] = TrainerHeartbeat
        return TrainerHeartbeat
    raise AttributeError(name)
