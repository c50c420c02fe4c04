"""Hang: a child made with os.fork() after the parent used OpenMP waits for a team that is not there.

``python fork_openmp.py``. The trainer warms torch's CPU kernels (matmuls on 2 threads: GNU OpenMP,
libgomp, starts its thread team), then forks a feature-extraction child with ``os.fork()`` and waits
for it in ``os.waitpid``. The child's first matmul enters a parallel region: libgomp hands it to
the team the parent started, whose threads fork did not copy, and the child waits on its futex for
ever (GCC Bugzilla 60035; OpenBLAS issue 240 shows the same with OpenMP BLAS).

READY (``{"pid", "child", "libgomp"}``): once the child sleeps steadily in its futex wait. ``libgomp``
says whether this torch build's OpenMP is GNU's (the hang needs it).
"""

from __future__ import annotations

import os

import _common


def _libgomp_mapped() -> bool:
    with open("/proc/self/maps") as maps:
        return "libgomp" in maps.read()


def extract_features(shard: int) -> None:
    import torch

    features = torch.randn(600, 600)
    for _ in range(20):
        features = torch.tanh(features @ features)  # the first parallel region waits for the lost team
    torch.save(features[:4], _common.workdir() / f"features_{shard}.pt")


def main() -> None:
    import torch

    torch.set_num_threads(2)
    warm = torch.randn(600, 600)
    for _ in range(5):
        warm = torch.tanh(warm @ warm)
    _common.log("trainer used OpenMP; forking the feature extractor")
    child = os.fork()
    if child == 0:
        extract_features(0)
        os._exit(0)
    _common.ready_when(lambda: _common.sleeping_steadily(child), lambda: {"child": child, "libgomp": _libgomp_mapped()})
    os.waitpid(child, 0)
    _common.log("features done")
    _common.sleep_forever()


if __name__ == "__main__":
    main()
