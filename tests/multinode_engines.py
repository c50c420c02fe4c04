"""Real engines for the multi-node tests and bench: a single-node Slurm, an sshd on loopback, and a
hung torchrun+gloo job submitted through sbatch.

Facts (from running it here): Debian's slurm-wlm and munge; no systemd, so the
daemons are started directly (own sessions, PIDs recorded) with the config in a temporary
directory, and stopped by PID. Every address is 127.0.0.1: an unresolvable host name makes every
Slurm client hang. Needs root (to install packages and run slurmd and sshd); without it, or
without the packages and a way to install them, `unavailable()` says why and the tests skip.

Plain functions and classes (no pytest), so that bench/multinode.py can use them too.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
ZOO = REPO / "assistant" / "zoo"
APT_PACKAGES = ["slurm-wlm", "munge", "openssh-server"]
SLURM_BINARIES = ["slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo"]


class EngineUnavailable(Exception):
    """This machine cannot run the engine; the message says why (the tests skip with it)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv: List[str], timeout: float = 60, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def _missing(binaries: List[str]) -> List[str]:
    found = {b: shutil.which(b) or next((p for p in (f"/usr/sbin/{b}",) if os.path.exists(p)), None) for b in binaries}
    return [b for b, path in found.items() if not path]


def ensure_packages(binaries: List[str]) -> None:
    """Install slurm-wlm, munge and openssh-server with apt-get when a binary is missing (root only)."""
    if not _missing(binaries):
        return
    if os.geteuid() != 0:
        raise EngineUnavailable(f"{', '.join(_missing(binaries))} not installed, and installing needs root")
    if not shutil.which("apt-get"):
        raise EngineUnavailable(f"{', '.join(_missing(binaries))} not installed, and there is no apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = _run(["apt-get", "install", "-y", *APT_PACKAGES], timeout=900, env=env)
    if result.returncode != 0:
        _run(["apt-get", "update"], timeout=600, env=env)
        result = _run(["apt-get", "install", "-y", *APT_PACKAGES], timeout=900, env=env)
    if result.returncode != 0 or _missing(binaries):
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["?"]
        raise EngineUnavailable(f"apt-get install {' '.join(APT_PACKAGES)} failed: {tail[0]}")


def _stop_pid(proc: subprocess.Popen, seconds: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=seconds)


def _wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)


# --- munge + Slurm --------------------------------------------------------------------------------


@dataclass
class SlurmCluster:
    root: Path
    conf: Path = field(init=False)
    node: str = field(init=False)
    daemons: Dict[str, subprocess.Popen] = field(default_factory=dict)
    munged_pid: Optional[int] = None  # set only when we started munged (else it is not ours to stop)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.conf = self.root / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]

    @property
    def env(self) -> dict:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self) -> None:
        if os.geteuid() != 0:
            raise EngineUnavailable("a test Slurm needs root (slurmd runs jobs as their users)")
        ensure_packages(SLURM_BINARIES + ["munged"])
        self._start_munge()
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self._config())
        for daemon in ("slurmctld", "slurmd"):
            log = open(self.root / "log" / f"{daemon}.out", "ab")  # noqa: SIM115 - the daemon's own
            try:
                self.daemons[daemon] = subprocess.Popen(
                    [daemon, "-D", "-f", str(self.conf)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=self.env,
                    start_new_session=True,
                )
            finally:
                log.close()
        try:
            _wait_for(lambda: self._node_state() in ("idle", "mix", "alloc"), 60, "Slurm node idle")
        except TimeoutError as exc:
            raise EngineUnavailable(f"Slurm did not come up: {exc}; {self.log_tail()}") from None

    def _start_munge(self) -> None:
        def works() -> bool:
            try:
                return _run(["sh", "-c", "munge -n | unmunge"], timeout=10).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                return False

        pidfile = Path("/run/munge/munged.pid")
        if works():
            return  # someone's munged already answers
        if not Path("/etc/munge/munge.key").exists():
            _run(["runuser", "-u", "munge", "--", "mungekey", "--create"], timeout=30)
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        result = _run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], timeout=30)
        if result.returncode != 0:
            raise EngineUnavailable(f"munged did not start: {result.stderr.strip()[:200]}")
        self.munged_pid = int(_wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10, "munged pid"))

    def _config(self) -> str:
        cpus = os.cpu_count() or 1
        r = self.root
        return f"""# debug-stuck test cluster (tests/multinode_engines.py)
ClusterName=dstest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
FirstJobId={random.randint(100_000, 9_000_000)}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""

    def _node_state(self) -> str:
        try:
            result = _run(["sinfo", "-h", "-N", "-o", "%t"], timeout=10, env=self.env)
        except subprocess.TimeoutExpired:
            return ""
        return result.stdout.strip().rstrip("*~#")

    def log_tail(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.root / "log" / name
            if path.exists():
                parts.append(f"{name}: " + " | ".join(path.read_text(errors="replace").splitlines()[-3:]))
        return "; ".join(parts)

    def sbatch(self, script: str, *options: str) -> str:
        path = self.root / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        result = _run(["sbatch", "--parsable", *options, str(path)], timeout=30, env=self.env)
        if result.returncode != 0:
            raise RuntimeError(f"sbatch failed: {result.stderr.strip()}")
        return result.stdout.strip().split(";")[0]

    def job_state(self, jobid: str) -> Optional[str]:
        """The job's state; "" once squeue no longer lists it; None when squeue did not answer."""
        try:
            result = _run(["squeue", "-h", "-j", jobid, "-o", "%T"], timeout=15, env=self.env)
        except subprocess.TimeoutExpired:
            return None
        if result.returncode != 0:
            return "" if "invalid job id" in result.stderr.lower() else None
        return result.stdout.strip()

    def scancel(self, jobid: str) -> None:
        _run(["scancel", jobid], timeout=30, env=self.env)

    def slurmd_pid(self) -> int:
        return self.daemons["slurmd"].pid

    def stop(self) -> None:
        """slurmd, slurmctld, then munged (only if we started it), each by its PID."""
        for name in ("slurmd", "slurmctld"):
            proc = self.daemons.pop(name, None)
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)  # a test may have stopped it
                _stop_pid(proc)
        if self.munged_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.munged_pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                _wait_for(lambda: not psutil.pid_exists(self.munged_pid), 10, "munged exit")
            self.munged_pid = None


# --- the hung job -----------------------------------------------------------------------------------


@dataclass
class SlurmStraggler:
    """gloo_straggler under torchrun with several ranks, submitted with sbatch: rank 1 stalls in
    __getitem__, the others wait in all_reduce."""

    cluster: SlurmCluster
    jobid: str
    workdir: Path
    nproc: int
    seen: Dict[int, float] = field(default_factory=dict)  # pid -> create time of every job process

    def ready(self) -> dict:
        return json.loads((self.workdir / "READY").read_text())

    def rank_pids(self) -> List[int]:
        info = self.ready()
        launcher = psutil.Process(info["rank0_pid"]).parent()
        return sorted(c.pid for c in launcher.children())

    def remember(self) -> None:
        """Every process of the job, found by its private ZOO_WORKDIR (no other job has it)."""
        from debug_stuck.bounded import CallTimedOut, call_with_timeout

        for proc in psutil.process_iter(["pid"]):
            if proc.pid in self.seen:
                continue
            try:
                env = call_with_timeout(proc.environ, 2.0, f"environ of {proc.pid}")
                if env.get("ZOO_WORKDIR") == str(self.workdir):
                    self.seen[proc.pid] = proc.create_time()
            except (psutil.Error, OSError, CallTimedOut):
                continue

    def alive(self) -> List[int]:
        out = []
        for pid, created in self.seen.items():
            try:
                proc = psutil.Process(pid)
                if abs(proc.create_time() - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                pass
        return out

    def cancel(self, timeout: float = 30.0) -> List[int]:
        """scancel, then wait until none of its processes is alive; returns the ones left."""
        self.remember()
        self.cluster.scancel(self.jobid)
        with contextlib.suppress(TimeoutError):
            _wait_for(lambda: not self.alive(), timeout, f"job {self.jobid} gone", interval=0.1)
        left = self.alive()
        for pid in left:  # scancel did not do it: do not leave them behind
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if abs(proc.create_time() - self.seen[pid]) < 0.01:
                    proc.kill()
        return left


def submit_straggler(cluster: SlurmCluster, root: Path, nproc: int = 4, timeout: float = 180.0) -> SlurmStraggler:
    workdir = Path(root) / "straggler"
    workdir.mkdir(parents=True, exist_ok=True)
    script = f"""#!/bin/bash
unset RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT
export ZOO_WORKDIR={workdir} OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONDONTWRITEBYTECODE=1
cd {workdir}
exec {sys.executable} -m torch.distributed.run --nproc_per_node={nproc} --master_addr=127.0.0.1 \\
    --master_port={free_port()} {ZOO / "gloo_straggler.py"}
"""
    jobid = cluster.sbatch(script, "-J", "ds-straggler", "-N", "1", "-o", str(workdir / "slurm.out"))
    job = SlurmStraggler(cluster, jobid, workdir, nproc)
    try:
        _wait_for(lambda: cluster.job_state(jobid) == "RUNNING", 60, f"job {jobid} RUNNING")

        def ready() -> bool:
            job.remember()
            if (workdir / "READY").exists():
                return True
            if cluster.job_state(jobid) not in ("RUNNING", "PENDING", "CONFIGURING", None):
                raise RuntimeError(f"job {jobid} ended before READY: {_tail(workdir / 'slurm.out')}")
            return False

        _wait_for(ready, timeout, f"job {jobid} READY", interval=0.5)
        job.remember()
        # READY says rank 0 sleeps in all_reduce; the other ranks that wait with it get there as well.
        _wait_for(lambda: all(_sleeping(pid) for pid in job.rank_pids()), 60, "every rank asleep")
        job.remember()
    except BaseException:
        job.cancel()
        raise
    return job


def _sleeping(pid: int, samples: int = 5) -> bool:
    for _ in range(samples):
        try:
            if psutil.Process(pid).status() not in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP):
                return False
        except psutil.Error:
            return False
        time.sleep(0.05)
    return True


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError as exc:
        return f"(no output: {exc})"


# --- sshd on loopback -------------------------------------------------------------------------------


@dataclass
class LoopbackSshd:
    root: Path
    port: int = 0
    proc: Optional[subprocess.Popen] = None

    @property
    def user_key(self) -> Path:
        return self.root / "user_key"

    @property
    def options(self) -> List[str]:
        """What `--ssh-option` needs to reach it: our key, a private known_hosts, no prompts."""
        return [
            f"IdentityFile={self.user_key}",
            "IdentitiesOnly=yes",
            f"UserKnownHostsFile={self.root / 'known_hosts'}",
            "StrictHostKeyChecking=no",
            "LogLevel=ERROR",
        ]

    def start(self) -> None:
        if os.geteuid() != 0:
            raise EngineUnavailable("a test sshd needs root (privilege separation, logging in as root)")
        ensure_packages(["sshd", "ssh", "ssh-keygen"])
        self.root.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "user_key"):
            if not (self.root / key).exists():
                result = _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / key)])
                if result.returncode != 0:
                    raise EngineUnavailable(f"ssh-keygen failed: {result.stderr.strip()}")
        authorized = self.root / "authorized_keys"
        authorized.write_text((self.root / "user_key.pub").read_text())
        authorized.chmod(0o600)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation directory
        self.port = free_port()
        config = self.root / "sshd_config"
        config.write_text(
            f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.root / "host_key"}
AuthorizedKeysFile {authorized}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile {self.root / "sshd.pid"}
"""
        )
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        log = open(self.root / "sshd.log", "ab")  # noqa: SIM115 - the daemon's own
        try:
            self.proc = subprocess.Popen(
                [sshd, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise EngineUnavailable(f"sshd exited: {_tail(self.root / 'sshd.log', 400)}")
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        _wait_for(listening, 15, "sshd listening", interval=0.05)

    def stop(self) -> None:
        if self.proc is not None:
            _stop_pid(self.proc)
            self.proc = None


class Blackhole:
    """A TCP port on loopback that accepts connections and never says a word: a wedged node."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def running(engine, what: str):
    """The engine started for a module's tests and stopped however they end; the tests are skipped,
    with the reason, where it cannot run."""
    try:
        engine.start()
    except EngineUnavailable as exc:
        engine.stop()
        pytest.skip(f"no test {what} on this machine: {exc}")
    except BaseException:
        engine.stop()
        raise
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real sshd on loopback for the module's tests (skipped, with the reason, where it cannot run)."""
    with running(LoopbackSshd(tmp_path_factory.mktemp("sshd")), "sshd") as server:
        yield server
