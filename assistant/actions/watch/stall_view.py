"""What a watcher shows of a stall: the tree's CPU, I/O and states, the GPUs, and the stack that
explains it (under a launcher, a rank's, not the launcher's). A mixin of Watcher: it reads the
watcher's last samples and dumps."""

from __future__ import annotations

from typing import List

import psutil

from debug_stuck.actions.watch.phases import describe_stack
from debug_stuck.probes.collectors.stacks import main_thread


class StallView:
    def _stall_evidence(self) -> dict:
        out: dict = {}
        sample = self.last_sample
        if sample is not None:
            out["cpu_percent"] = sample.cpu_percent
            out["io_bytes_per_second"] = sample.io_bytes_per_second
            out["processes"] = sample.processes
            odd = {str(pid): s for pid, s in sample.states.items() if s in ("disk-sleep", "stopped", "zombie")}
            if odd:
                out["states"] = odd
        if self.last_gpu is not None:
            out["gpu"] = self.last_gpu
        if self.clock.verdict is not None:
            out["motion"] = self.clock.verdict  # what the stacks said: stuck, busy (one chain), moving
        found = self._stall_thread()
        if found is not None:
            pid, thread = found
            out["stack"] = describe_stack(thread)
            out["stack_pid"] = pid
        return out

    def _stall_thread(self):
        """(pid, main thread) to show in the stall line: the job's own process, but under a launcher
        (torchrun, accelerate, deepspeed) a rank's, the one not waiting in a collective when one
        stands out: the launcher only waits for its workers."""
        if not self.dumps:
            return None
        root = self.job.pid
        threads = {pid: main_thread(dump, pid) for pid, dump in self.dumps.items()}
        threads = {pid: t for pid, t in threads.items() if t is not None}
        if not threads:
            return None
        if root in threads and not (self._under_launcher() and len(threads) > 1):
            return root, threads[root]
        ranks = self._rank_pids([pid for pid in threads if pid != root])
        if not ranks:
            pid = root if root in threads else next(iter(threads))
            return pid, threads[pid]
        waiting = [pid for pid in ranks if _in_collective(threads[pid])]
        pid = next((p for p in ranks if p not in waiting), ranks[0])
        return pid, threads[pid]

    def _under_launcher(self) -> bool:
        from debug_stuck.probes.collectors.procs import LAUNCHER

        return bool(LAUNCHER.search(" ".join(self.job.command)))

    def _rank_pids(self, pids: List[int]) -> List[int]:
        """The launcher's direct children among pids (its ranks; their DataLoader workers are grandchildren)."""
        root = self.job.pid
        procs = self.tree.procs if self.tree is not None else {}
        out = []
        for pid in sorted(pids):
            proc = procs.get(pid)
            try:
                ppid = proc.ppid() if proc is not None else psutil.Process(pid).ppid()
            except psutil.Error:
                continue
            if ppid == root:
                out.append(pid)
        return out


def _in_collective(thread) -> bool:
    """The main thread waits in a collective or a barrier (torch.distributed, NCCL, gloo)."""
    text = " ".join(f.text() for f in thread.frames).lower()
    return any(word in text for word in ("distributed_c10d", "all_reduce", "allreduce", "barrier", "all_gather"))
