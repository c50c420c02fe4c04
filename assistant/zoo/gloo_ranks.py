"""Two gloo ranks that part ways at step 3; one scenario per argument (``gloo_ranks.py <scenario>``).

Run under the launcher as the spawner does (``torch.distributed.run --nproc_per_node=2``), or with
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set by hand for each rank (sibling ranks with no
common launcher, as ``srun`` or ``pdsh`` start them).

- ``busy``: rank 1 spins in a pure-Python loop (``refine_until_converged``, a condition that never
  holds) while rank 0 waits in ``all_reduce``: its line number changes between samples, the job
  does not move.
- ``mismatch``: rank 0 calls ``all_reduce`` and rank 1 calls ``broadcast`` from itself (control
  flow that differs by rank): each waits for the other in a different collective.
- ``straggle``: rank 1 sleeps for ever inside ``__getitem__`` while rank 0 waits in ``all_reduce``.
- ``store_key``: at step 3 the ranks share an eval metric through the job's c10d store: rank 0 calls
  ``store.wait(["eval/3/1"])``, but rank 1 sets ``eval/3/rank1`` (renamed on one side only) and goes on
  into the next ``all_reduce``. Rank 0 waits in the store for ever, rank 1 for rank 0.
- ``new_group``: at step 3 rank 0 alone creates a process group for its evaluation metrics
  (``dist.new_group(backend="gloo")``, inside ``if rank == 0``), which every rank must create; rank 1
  goes on into the next ``all_reduce``. Rank 0 waits in ``new_group`` for ever, rank 1 for rank 0.
- ``p2p_tag``: a two-stage pipeline (rank 0 sends activations, rank 1 sends back gradients) in which
  rank 1 sends its loss to rank 0 every third step. Rank 0 counts its steps after incrementing,
  rank 1 before (and skips step 0): at its third step rank 0 waits in ``recv(tag=METRICS)`` for a
  send rank 1 makes a step later, while rank 1 has gone on into ``recv(tag=ACT)`` for the next
  activation. Both ranks wait to receive, from different lines, and neither sends.
- ``send_tag``: at step 3 rank 0 sends to rank 1 with ``tag=step + 1`` and rank 1 receives with
  ``tag=step``: a send and a recv between the right ranks whose tags differ; each waits for ever.
- ``broadcast_src``: at step 3 every rank calls ``broadcast_object_list(names, src=rank)`` to share the
  run's name: both ranks are in the same broadcast, each the root of its own, and wait for ever.
- ``irecv``: at step 3 rank 0 posts ``dist.irecv(grad, src=1)`` for a correction and waits on it
  (``pending.wait()``); rank 1 has none to send and goes on into the next ``all_reduce`` (the ninth
  hunt's h02, whose irecv was named "a collective": its wait has no torch.distributed Python frame).
- ``isend_tag``: at step 3 rank 0 posts ``dist.isend(grad, dst=1, tag=step)`` and rank 1
  ``dist.irecv(grad, src=0, tag=0)``, and both wait on the request at one line (``req.wait()``): the
  same Python stack on both ranks, a send on one and a recv on the other only in native frames
  (gloo's SendWork and RecvWork; the eleventh hunt's j12, where one rank's native frames were not read).
- ``subgroup``: at step 3 rank 0 alone creates a group of its own (``dist.new_group([0])`` inside
  ``if rank == 0``); then every rank creates the data-parallel group (``dist.new_group([0, 1])``).
  The groups are named by how many each rank has made, so the names differ and both ranks wait in
  the second ``new_group`` for ever (the twelfth hunt's j08, with three ranks: a rendezvous and
  collective tie, a store timeout as the fix).
- ``skip_bad``: each step's work and its ``all_reduce`` sit in a ``try`` whose ``except`` logs the
  error and goes on to the next batch (``continue``); at step 3 rank 1 meets a bad label and skips
  that step's ``all_reduce``. At the end of the epoch rank 1 is in ``barrier`` while rank 0 waits in
  its last ``all_reduce``.
- ``group_order``: the job has a second process group for its metrics (``metrics_pg``, every rank
  makes both groups in one order). At step 3 rank 0 reduces the gradient on ``grad_pg`` and then the
  loss on ``metrics_pg``; rank 1 reduces the loss first. Both ranks wait in ``all_reduce`` from
  different lines, each in the group whose other member waits in the other one (the thirteenth
  hunt's j17).
- ``early_stop``: at step 3 rank 1 stops training on its own early-stopping rule (``break``) and
  waits in the final ``barrier`` after the loop, while rank 0 waits in the step's ``all_reduce``
  inside it (the fourteenth hunt's j03, where no culprit was named).
- ``lock_across``: at step 3 rank 0 takes an exclusive flock on a shared cache file and, holding it,
  enters ``barrier``; rank 1 asks for the same lock before its barrier (the sixteenth hunt's j02, a
  filelock.FileLock there: the waiting rank was named the culprit).
- ``meta_thread``: at step 3 rank 1's main thread waits for an Event that its 'meta-sync' thread sets
  after a ``broadcast`` from rank 0 on a second group; rank 0 makes that broadcast only after the
  step's ``all_reduce`` (the sixteenth hunt's j14: "the pool thread ... find what should set it").
- ``batch_server``: rank 0 serves batches to rank 1 from a server thread over TCP, under
  ``data_lock``; at step 3 rank 0's main thread takes ``data_lock`` and, holding it, enters
  ``all_reduce``, while rank 1 waits for its next batch (the sixteenth hunt's j26: external-service,
  the waiting rank the culprit).

Both ranks init gloo with a 1 h timeout, so nothing errors during a test. READY
(``{"pid", "rank0_pid", "rank1_pid", "scenario"}``) is written by rank 1 once rank 0 has announced it
entered its collective of step 3 and its main thread has slept for 5 consecutive samples.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import timedelta

import _common
import torch
import torch.distributed as dist

STALL_STEP = 3
data_lock = threading.Lock()  # batch_server: guards the sampler that rank 0's server thread reads


def serve_batches(server) -> None:
    """batch_server, on rank 0: one batch per request from rank 1, read under data_lock."""
    conn, _ = server.accept()
    while conn.recv(1):
        with data_lock:
            batch = torch.ones(8).numpy().tobytes()
        conn.sendall(len(batch).to_bytes(4, "big") + batch)


def fetch_batch(conn) -> bytes:
    """batch_server, on rank 1: ask rank 0's server for the next batch (no timeout)."""
    conn.sendall(b"n")
    size = int.from_bytes(_recv_exact(conn, 4), "big")
    return _recv_exact(conn, size)


def _recv_exact(conn, n: int) -> bytes:
    data = b""
    while len(data) < n:
        data += conn.recv(n - len(data))
    return data


def rank0_waits_then_ready(step: int) -> None:
    def rank0_waits() -> bool:
        entering = _common.read_marker("rank0_in_collective")
        return (
            bool(entering) and entering["step"] == step and _common.sleeping_steadily(entering["pid"], entering["tid"])
        )

    def watch() -> None:
        if _common.wait_until(rank0_waits, timeout=120):
            r0 = _common.read_marker("rank0_in_collective")
            _common.mark_ready(rank0_pid=r0["pid"], rank1_pid=os.getpid(), scenario=sys.argv[1])
        else:
            _common.log("zoo: rank 0 never entered its collective; READY not written")

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def refine_until_converged(value: float) -> float:
    """A convergence loop whose condition never holds: it runs for ever, in pure Python."""
    error = 1.0
    while error > 0.0:
        value = (value * 1.000001 + 0.5) % 97.0
        error = abs(value) + 1.0
    return value


class ShardDataset:
    def __init__(self, rank: int):
        self.rank = rank

    def __getitem__(self, step: int) -> torch.Tensor:
        if self.rank == 1 and step == STALL_STEP and sys.argv[1] == "straggle":
            rank0_waits_then_ready(step)
            _common.sleep_forever()
        return torch.full((4,), float(step + self.rank))


TAG_ACT, TAG_GRAD, TAG_METRICS = 0, 1, 3


def pipeline(rank: int) -> None:
    """Two pipeline stages over send/recv; the loss goes to rank 0 every STALL_STEP steps."""
    stage = torch.nn.Linear(8, 8)
    global_step = 0
    step = 0
    while True:
        if rank == 0:
            act = stage(torch.randn(4, 8))
            dist.send(act.detach(), dst=1, tag=TAG_ACT)
            grad = torch.empty_like(act)
            dist.recv(grad, src=1, tag=TAG_GRAD)
            act.backward(grad)
            global_step += 1
            if global_step % STALL_STEP == 0:
                _common.write_marker("rank0_in_collective", step=STALL_STEP, tid=threading.get_native_id())
                metrics = torch.empty(2)
                dist.recv(metrics, src=1, tag=TAG_METRICS)
                print(f"step {global_step} loss {metrics[0].item():.4f}", flush=True)
        else:
            act = torch.empty(4, 8)
            dist.recv(act, src=0, tag=TAG_ACT)
            act.requires_grad_(True)
            loss = stage(act).pow(2).mean()
            loss.backward()
            dist.send(act.grad, dst=0, tag=TAG_GRAD)
            if step % STALL_STEP == 0 and step > 0:
                dist.send(torch.tensor([loss.item(), 0.01]), dst=0, tag=TAG_METRICS)
            if step == STALL_STEP - 1:
                rank0_waits_then_ready(STALL_STEP)
        print(f"rank {rank} step {step}", flush=True)
        step += 1


EPOCH_STEPS = 5
SCENARIOS = (
    "busy",
    "mismatch",
    "straggle",
    "store_key",
    "p2p_tag",
    "new_group",
    "skip_bad",
    "broadcast_src",
    "send_tag",
    "irecv",
    "isend_tag",
    "subgroup",
    "group_order",
    "early_stop",
    "lock_across",
    "batch_server",
    "meta_thread",
)


def skip_bad(rank: int) -> None:
    """A loop that survives a bad sample by skipping it, on the rank that met it only."""
    for step in range(EPOCH_STEPS):
        if step == EPOCH_STEPS - 1:
            if rank == 0:
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
            else:
                rank0_waits_then_ready(step)
        try:
            label = 7 if (rank == 1 and step == STALL_STEP) else step % 3
            if label >= 3:
                raise IndexError(f"Target {label} is out of bounds.")
            grad = torch.full((4,), float(label))
            dist.all_reduce(grad)
        except Exception as err:
            print(f"rank {rank}: skipping batch {step}: {err}", flush=True)
            continue
        print(f"rank {rank} step {step} grad {grad.sum().item():.1f}", flush=True)
    dist.barrier()  # the end of the epoch


def share_run_name(rank: int) -> None:
    """Rank 0 names the run and shares it: with src=rank, each rank is the root of its own broadcast."""
    names = [f"run-{os.getpid()}"] if rank == 0 else [None]
    dist.broadcast_object_list(names, src=rank)  # the slip: src must be 0 on every rank


def sync_meta(meta, group, synced) -> None:
    """meta_thread, on rank 1: the metadata broadcast from rank 0, then the Event the step waits for."""
    dist.broadcast(meta, src=0, group=group)
    synced.set()


def take_cache_lock():
    """lock_across: an exclusive flock on the ranks' shared feature cache (held while the file is open)."""
    import fcntl

    handle = open(_common.workdir() / "features.lock", "a")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def connect_batch_server(rank: int):
    """batch_server: rank 0 listens and serves from a thread; rank 1 connects once both are up."""
    import socket

    if rank == 0:
        server = socket.create_server(("127.0.0.1", 0))
        _common.write_marker("batch_server", port=server.getsockname()[1])
        threading.Thread(target=serve_batches, args=(server,), name="batch-server", daemon=True).start()
    dist.barrier()
    if rank == 0:
        return None
    return socket.create_connection(("127.0.0.1", _common.read_marker("batch_server")["port"]))


def train() -> None:
    scenario = sys.argv[1]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    if scenario == "p2p_tag":
        pipeline(rank)
        return
    if scenario == "skip_bad":
        skip_bad(rank)
        _common.sleep_forever()  # never reached: rank 0 waits in all_reduce, rank 1 in barrier
    if scenario == "group_order":
        grad_pg, metrics_pg = dist.new_group([0, 1]), dist.new_group([0, 1])
    meta_pg = dist.new_group([0, 1]) if scenario == "meta_thread" else None
    data = ShardDataset(rank)
    conn = connect_batch_server(rank) if scenario == "batch_server" else None
    step = 0
    while True:
        grad = data[step] * 2.0
        if conn is not None and step == STALL_STEP:  # rank 1, once rank 0 holds data_lock in its all_reduce
            rank0_waits_then_ready(step)
            _common.wait_until(lambda: _common.read_marker("rank0_in_collective"), timeout=120)
            fetch_batch(conn)  # rank 0's server thread waits for data_lock
        if step == STALL_STEP and meta_pg is not None:
            meta = torch.zeros(1)
            if rank == 0:
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                dist.all_reduce(grad)  # the step's reduce first...
                dist.broadcast(meta, src=0, group=meta_pg)  # ...then the metadata: the other order from rank 1's
            else:
                synced = threading.Event()
                threading.Thread(target=sync_meta, args=(meta, meta_pg, synced), name="meta-sync", daemon=True).start()
                rank0_waits_then_ready(step)
                synced.wait()  # the all_reduce below waits for the metadata
        if step == STALL_STEP and scenario == "batch_server" and rank == 0:
            with data_lock:  # keep the sampler still while the ranks agree on its position
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                dist.all_reduce(grad)
        if step == STALL_STEP and scenario == "subgroup":
            if rank == 0:
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                dist.new_group([0])  # the slip: every rank must enter new_group, members or not
            else:
                rank0_waits_then_ready(step)
            dist.new_group([0, 1])  # named differently on each rank now: both wait for ever
        elif step == STALL_STEP and scenario == "group_order":
            loss = grad.mean().reshape(1)
            if rank == 0:
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                dist.all_reduce(grad, group=grad_pg)
                dist.all_reduce(loss, group=metrics_pg)
            else:
                rank0_waits_then_ready(step)
                dist.all_reduce(loss, group=metrics_pg)  # the slip: the metrics first on this rank
                dist.all_reduce(grad, group=grad_pg)
        elif step == STALL_STEP and scenario == "isend_tag":
            if rank == 0:
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                req = dist.isend(grad, dst=1, tag=step)  # tagged with the step
            else:
                rank0_waits_then_ready(step)
                req = dist.irecv(grad, src=0, tag=0)  # the slip: the default tag, not the step
            req.wait()
        elif step == STALL_STEP:
            if rank == 0:
                # lock_across: the lock is taken before the marker, so rank 1 can never take it first
                cache_lock = take_cache_lock() if scenario == "lock_across" else None
                _common.write_marker("rank0_in_collective", step=step, tid=threading.get_native_id())
                if scenario == "store_key":
                    dist.distributed_c10d._get_default_store().wait(
                        [f"eval/{step}/1"]
                    )  # rank 1's key, as rank 0 names it
                if scenario == "new_group":
                    dist.new_group(backend="gloo")  # the eval metrics' own group, made where only rank 0 evaluates
                if scenario == "broadcast_src":
                    share_run_name(rank)
                if scenario == "send_tag":
                    dist.send(grad, dst=1, tag=step + 1)  # the activation's tag, counted after the step
                if cache_lock is not None:  # held from here on: the slip is the barrier inside it
                    dist.barrier()
                    cache_lock.close()
                if scenario == "irecv":
                    pending = dist.irecv(grad, src=1)  # rank 1's correction, which it sends only when it has one
                    pending.wait()
            elif scenario == "store_key":
                rank0_waits_then_ready(step)
                dist.distributed_c10d._get_default_store().set(f"eval/{step}/rank{rank}", "0.5")
            elif scenario in ("new_group", "irecv"):
                rank0_waits_then_ready(step)  # irecv: no correction this step, nothing is sent
            elif scenario == "broadcast_src":
                rank0_waits_then_ready(step)
                share_run_name(rank)
            elif scenario == "send_tag":
                rank0_waits_then_ready(step)
                dist.recv(grad, src=0, tag=step)  # counted before: the tags never match
            elif scenario == "busy":
                rank0_waits_then_ready(step)
                refine_until_converged(float(step))
            elif scenario == "mismatch":
                rank0_waits_then_ready(step)
                dist.broadcast(grad, src=1)  # rank 0 is in all_reduce: they never meet
            elif scenario == "lock_across":
                rank0_waits_then_ready(step)
                _common.wait_until(lambda: _common.read_marker("rank0_in_collective"), timeout=120)
                take_cache_lock()  # rank 0 holds it, and waits in barrier for this rank
            elif scenario == "early_stop":
                rank0_waits_then_ready(step)
                print(f"rank {rank}: no improvement for 3 steps, early stopping at step {step}", flush=True)
                break  # the slip: decided on this rank's own loss, not on all ranks'
        dist.all_reduce(grad)
        print(f"rank {rank} step {step} grad {grad.sum().item():.1f}", flush=True)
        step += 1
    dist.barrier()  # the end of training, which rank 0 never reaches


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: gloo_ranks.py {{{','.join(SCENARIOS)}}}")
    train()
