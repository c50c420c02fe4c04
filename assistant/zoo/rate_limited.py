"""A trainer fed through a ``queue.Queue`` by a thread that pulls pages of examples from a labelling
API allowed a few requests a minute; one scenario per argument (``rate_limited.py <scenario>``).

- ``paced`` (healthy): the prefetch thread's rate limiter lets a burst of two requests through, then
  sleeps 40 s before each next one (``time.sleep`` in ``RateLimiter.wait``, called from the loop
  that puts each page on the queue). The trainer takes a page a step and waits in ``get()`` (no
  timeout) for the next: found asleep with far more left than a look can wait for.
- ``producer_died`` (hung): the same trainer; its prefetch thread raises on the third page (a field
  the API stopped sending) and ends, so nothing will ever put again. A heartbeat thread that only
  logs (``while True: time.sleep(40); log``) is asleep beside it.

READY (``{"pid", "scenario"}``): once the trainer's main thread has taken two pages and sits in
``get()``, and the prefetch thread sleeps (``paced``) or has ended (``producer_died``).
"""

from __future__ import annotations

import os
import queue
import threading
import time

import _common
import torch

SLEEP_SECONDS = 40.0  # far past a look's watch (6 s), well inside what it calls a long sleep (300 s)


class RateLimiter:
    def __init__(self, per_minute: float, burst: int):
        self.interval = 60.0 / per_minute
        self.burst = burst
        self.next_ok = time.monotonic()

    def wait(self) -> None:
        if self.burst > 0:
            self.burst -= 1
            return
        now = time.monotonic()
        if now < self.next_ok:
            time.sleep(self.next_ok - now)
        self.next_ok = max(now, self.next_ok) + self.interval


def fetch_page(page: int, fields_dropped: bool) -> dict:
    """Stands in for requests.get(f"{API}/examples?page={page}").json()."""
    generator = torch.Generator().manual_seed(page)
    page_json = {"x": torch.randn(32, 64, generator=generator), "y": torch.randint(0, 4, (32,), generator=generator)}
    if fields_dropped and page >= 2:
        del page_json["y"]  # the API stopped sending labels
    return page_json


def prefetcher(pages: queue.Queue, limiter: RateLimiter, fields_dropped: bool) -> None:
    page = 0
    while True:
        limiter.wait()
        example = fetch_page(page, fields_dropped)
        pages.put((example["x"], example["y"]))
        page += 1


def heartbeat() -> None:
    while True:
        time.sleep(SLEEP_SECONDS)
        _common.log("trainer alive")


def train(scenario: str) -> None:
    torch.set_num_threads(1)
    pages: queue.Queue = queue.Queue(maxsize=2)
    limiter = RateLimiter(per_minute=60.0 / SLEEP_SECONDS, burst=2)
    producer = threading.Thread(
        target=prefetcher, args=(pages, limiter, scenario == "producer_died"), name="api-prefetch", daemon=True
    )
    producer.start()
    if scenario == "producer_died":
        threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    main = threading.main_thread()
    for step in range(1, 10**6):
        x, y = pages.get()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 2:

            def settled() -> bool:
                asleep = _common.sleeping_steadily(os.getpid(), main.native_id)
                return asleep and "get" in _common.stack_functions(main.ident)

            def prefetch_sleeps_or_ended() -> bool:
                if scenario == "producer_died":
                    return not producer.is_alive()
                names = _common.stack_functions(producer.ident)
                return names[:1] == ["wait"] and "put" not in names  # asleep in the limiter, not in a full put

            _common.ready_when(lambda: settled() and prefetch_sleeps_or_ended(), lambda: {"scenario": scenario})


if __name__ == "__main__":
    _common.run_scenario({"paced": lambda: train("paced"), "producer_died": lambda: train("producer_died")})
