"""A job whose secrets come in every shape a redactor must know: Hydra overrides, a URL whose
password holds `/` and `+`, `--wandb-key X`, `--password -hunter2` on its command line, and config
dumps, JSON, dicts, ini lines and HTTP headers in its log. It takes any argument (no argparse: a
value like `-hunter2` must reach it as written), prints the lines of the file named by
SHAPES_LINES, writes READY (the path in SHAPES_READY) and hangs in `wait_for_data`. Each SIGUSR1
prints the next of those lines again, so that each in turn is the log's last line, and writes
SHAPES_READY-<n> once the n-th is out.
"""

import os
import signal
import sys
import time


def wait_for_data() -> None:
    while True:
        time.sleep(1)


def main() -> None:
    with open(os.environ["SHAPES_LINES"], encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    ready = os.environ["SHAPES_READY"]
    print(f"args: {len(sys.argv) - 1}", flush=True)
    for line in lines:
        print(line, flush=True)
    shown = []

    def show_next(signum, frame) -> None:
        print(lines[len(shown) % len(lines)], flush=True)
        shown.append(1)
        with open(f"{ready}-{len(shown)}", "w") as out:
            out.write(str(os.getpid()))

    signal.signal(signal.SIGUSR1, show_next)
    with open(ready, "w") as fh:
        fh.write(str(os.getpid()))
    wait_for_data()


if __name__ == "__main__":
    sys.exit(main())
