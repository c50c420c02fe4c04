"""Target for test_probe_gc: a short script that allocates little and barely collects; exits 0."""

from __future__ import annotations

import sys


def main() -> None:
    total = 0
    for i in range(300_000):
        total += i * i % 7
    print(f"total {total} args {sys.argv[1:]}", flush=True)


if __name__ == "__main__":
    main()
