"""Target for test_stacks: a main thread that spins in Python and whose stack keeps changing.

The recursion depth follows the clock (one more level every 0.1 s, wrapping at 50), so two samples
taken 0.2 s to 4.8 s apart can never show the same stack: a deterministic "moving" thread.
"""

import time

START = time.monotonic()


def dive(depth):
    if depth > 0:
        return dive(depth - 1)
    end = time.monotonic() + 0.005
    while time.monotonic() < end:
        pass
    return 0


def main():
    print("ready", flush=True)
    while True:
        dive(int((time.monotonic() - START) * 10) % 50 + 1)


if __name__ == "__main__":
    main()
