"""A training-like job that holds secrets everywhere a report could pick them up: its options, its
environment, the log line it prints. It prints a few steps, writes READY (the path in the
SECRETS_READY variable), then hangs in `wait_for_data`; with --steps-then-hang it hangs after
--steps steps (for watch).
"""

import argparse
import os
import sys
import time


def wait_for_data() -> None:
    while True:
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--password")
    parser.add_argument("--api_key")
    parser.add_argument("--hf_token")
    parser.add_argument("--db_url")
    parser.add_argument("--client-secret")
    parser.add_argument("--slack")
    parser.add_argument("--tokenizer_name", required=True)
    parser.add_argument("--max_new_tokens", type=int, required=True)
    parser.add_argument("--session_dir", required=True)
    parser.add_argument("--author", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--resume")
    args = parser.parse_args()
    print(f"connecting to https://loguser:{os.environ.get('LOG_SECRET', '')}@hub.example/ as {args.author}", flush=True)
    for step in range(1, args.steps + 1):
        print(f"step {step} loss=0.5", flush=True)
        time.sleep(args.step_seconds)
    ready = os.environ.get("SECRETS_READY")
    if ready:
        with open(ready, "w") as fh:
            fh.write(str(os.getpid()))
    wait_for_data()


if __name__ == "__main__":
    sys.exit(main())
