"""A policy-gradient loop whose rewards come from an async scoring client on a background event loop
thread (``python event_loop_self_wait.py``).

The trainer calls ``score_batch``, which submits ``score()`` to the client's loop with
``asyncio.run_coroutine_threadsafe(...).result()``. After a warm-up of three steps ``score()`` normalises
each reward through ``normalize_sync``, a sync helper written for callers outside the loop: it submits
``_running_stats()`` to the same loop and waits on ``.result()``, from the loop's own thread. The loop
is blocked in that wait, so ``_running_stats()`` never runs; the trainer waits for ``score()`` for ever.

READY (``{"pid", "loop_tid"}``) once both the main thread and the loop thread sleep in their waits.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading

import _common

WARMUP_STEPS = 3


class ScoringClient:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="scoring-loop", daemon=True)
        self.thread.start()
        self.mean, self.count = 0.0, 0

    async def _remote_score(self, sequence: list) -> float:
        await asyncio.sleep(0.01)  # stands in for an HTTP call to the reward model
        return sum(sequence) / len(sequence)

    async def _running_stats(self) -> tuple:
        await asyncio.sleep(0)
        return self.mean, max(self.count, 1)

    def normalize_sync(self, reward: float) -> float:
        """For callers outside the loop (the old evaluation code)."""
        mean, _ = asyncio.run_coroutine_threadsafe(self._running_stats(), self.loop).result()
        return reward - mean

    async def score(self, batch: list, step: int) -> list:
        rewards = await asyncio.gather(*(self._remote_score(s) for s in batch))
        if step > WARMUP_STEPS:  # after the warm-up, rewards are normalised against the running mean
            rewards = [self.normalize_sync(r) for r in rewards]
        self.count += len(rewards)
        self.mean += (sum(rewards) / len(rewards) - self.mean) * 0.1
        return rewards

    def score_batch(self, batch: list, step: int) -> list:
        return asyncio.run_coroutine_threadsafe(self.score(batch, step), self.loop).result()


def ready_when_both_wait(client: ScoringClient) -> None:
    main_id = threading.main_thread().native_id

    def both_wait() -> bool:
        pid = os.getpid()
        return _common.sleeping_steadily(pid, main_id) and _common.sleeping_steadily(pid, client.thread.native_id)

    _common.ready_when(both_wait, lambda: {"loop_tid": client.thread.native_id})


def main() -> None:
    client = ScoringClient()
    rng = random.Random(0)
    baseline = 0.0
    for step in range(1, 10**6):
        batch = [[rng.random() for _ in range(8)] for _ in range(16)]
        if step == WARMUP_STEPS + 1:
            ready_when_both_wait(client)
        rewards = client.score_batch(batch, step)
        baseline = 0.9 * baseline + 0.1 * sum(rewards) / len(rewards)
        print(f"step {step} reward {baseline:.3f}", flush=True)


if __name__ == "__main__":
    main()
