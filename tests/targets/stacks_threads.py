"""Target for test_stacks: a sleeping thread, a thread blocked on a lock, a main thread waiting.

Optional argument: seconds after which the process exits by itself (to test a process that goes
away while its stacks are being sampled).
"""

import sys
import threading
import time


def sleeper():
    time.sleep(1000)


def blocked(lock):
    lock.acquire()


def main():
    lock = threading.Lock()
    lock.acquire()
    threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
    threading.Thread(target=blocked, args=(lock,), name="blocked", daemon=True).start()
    print("ready", flush=True)
    if len(sys.argv) > 1:
        time.sleep(float(sys.argv[1]))
        return
    threading.Event().wait()


if __name__ == "__main__":
    main()
