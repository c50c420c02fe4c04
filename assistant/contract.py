"""Names fixed by the stable interface (docs/contract.md). Scripts and agents depend on them: add, never rename."""

SCHEMA_VERSION = "1"

CAUSE_IDS = (
    "rendezvous",
    "nccl-init",
    "collective",
    "dataloader",
    "io-stall",
    "checkpoint-save",
    "gc-pause",
    "thread-deadlock",
    "cuda-sync",
    "memory-pressure",
    "gpu-hardware",
    "miopen-find",
    "compile",
    "cpu-spin",
    "output-blocked",
    "model-init",
    "bad-sample",
    "network",
    "optimizer-not-stepping",
    "external-service",
    "input-wait",
)

PATTERNS = ("A", "B", "C", "D", "E")

PHASES = ("startup", "data", "step", "validation", "sampling", "checkpoint", "shutdown", "unknown")

EVIDENCE_SOURCES = ("stack", "process", "gpu", "log", "kernel", "probe", "answer", "chain", "flight-recorder")
# What a playbook signal may match: the evidence sources, and the facts read from them against the
# libraries' own tables (debug_stuck.core.facts); a fact's evidence carries the source it was read from.
SIGNAL_SOURCES = EVIDENCE_SOURCES + ("fact",)

ANSWER_SOURCES = ("user", "evidence", "log")

# The triage keys the contract names; the tree may add follow-up keys of its own.
CONTRACT_ANSWER_KEYS = {
    "phase": ("start", "mid-run"),
    "gpu": ("idle", "busy", "none"),
    "step": ("same-step", "random"),
    "platform": ("cuda", "rocm", "cpu"),
    "cpu": ("idle", "busy"),
    "nodes": None,  # a positive integer
}

UNKNOWN = "unknown"

# What a check, a fix command or a probe does to the machine and the job: every one carries one.
# Strongest first: a block that does several things carries the strongest.
SAFETY_LABELS = {
    "stops-job": "stops the job",
    "changes": "changes files or system settings",
    "runs-code": "runs your code",
    "disturbs": "may disturb the running job",
    "writes-temp": "writes a temporary file",
    "config": "a setting for the next run; nothing runs now",
    "edit": "an edit to your code; nothing runs now",
    "reads": "reads only",
}

# Named placeholders in playbook commands, filled from the job the report looked at.
PLACEHOLDERS = {
    "pid": "the process to inspect (the stuck rank, or the culprit)",
    "main_pid": "the job's main process (the launcher, or the DataLoader's parent)",
    "rank_pids": "the rank processes, space separated",
    "worker_pids": "the DataLoader worker processes, space separated",
    "launch_command": "the job's launch command, as it was run",
    "script": "the training script",
    "cwd": "the job's working directory",
    "output_dir": "the job's output folder",
    "checkpoint": "the job's newest checkpoint",
    "partial_checkpoint": "the checkpoint file a hung save left half-written (never the one resume starts from)",
    "blocked_path": "the file the job is blocked on",
    "fr_dumps": "where the job's Flight Recorder dumps go (TORCH_FR_DUMP_TEMP_FILE, default /tmp/nccl_trace_rank_)",
    "fr_pipe": "the pipe that makes a rank dump its Flight Recorder (TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe)",
    "log": "the job's log file",
    "master_addr": "the rendezvous address (MASTER_ADDR)",
    "master_port": "the rendezvous port (MASTER_PORT)",
    "nproc": "the number of rank processes",
    "nnodes": "the number of nodes the launcher was told (--nnodes, --num_machines)",
    "python": "the job's Python interpreter",
    "dataset_path": "a data file or folder the job reads",
    "writer_pid": "the job's process blocked writing its output to a pipe or terminal (else the stuck process)",
    "reader_pid": "the process holding the read end of the pipe the job is blocked writing (tee, a wrapper, a parent)",
    "threads_per_process": "the job's CPUs shared among its ranks and DataLoader workers (1 with no live job)",
    "blocked_fd": "the descriptor the job's process is blocked writing (1 for stdout where no wait was read)",
}

# What a fix may declare it applies to (playbook frontmatter `fixes:`), and the values each takes.
FIX_CONTEXT = {
    "framework": ("accelerate", "hf-trainer", "kohya", "lightning", "nanochat", "pytorch", "ultralytics", "python"),
    "launcher": ("torchrun", "accelerate", "deepspeed", "python"),
    "platform": ("cuda", "rocm", "cpu"),
    "backend": ("nccl", "gloo"),
    "os": ("linux", "windows", "macos"),
    # the numerical library the job trains with, from its stacks, imports or logs; absent (torch
    # presumed, advice.applies.PRESUMED) when none of them says
    "stack": ("torch", "tensorflow", "jax", "paddle"),
    # a library the fix is about (a tracker, the Hub client): seen in the job's frames, imports or
    # log messages, the fix applies; not seen, it is kept last "if you use" it (absence proves nothing)
    "uses": ("wandb", "huggingface_hub", "transformers", "git", "boto3", "botocore", "s3fs"),
    # the process reading the pipe the job is blocked writing (reader_pid): stopped (state T or t),
    # or running (any other state: it is alive but does not read)
    "reader": ("stopped", "running"),
    # a process of the job stopped in pdb's prompt (a breakpoint() left in the code), seen on its
    # live stacks or in a dump pasted in its log; stacks read and none in pdb: the fix is left out
    "stopped_in": ("debugger",),
    # what a busy thread of the job is seen computing in (frames.yaml facts): the regex engine
    "busy_in": ("regex",),
    # the descriptor a write is blocked on: stdout or stderr (std), or a pipe or FIFO of the job's own
    # (other); captured: stdout or stderr that a process of the job reads after it waits for the writer
    # (subprocess.PIPE then wait())
    "stream": ("std", "other", "captured"),
    # what the job's wait ends at: threads holding each other's locks, or a lock or condition the
    # chain could not follow (lock); anywhere else (other): a queue, a join, a fork- or self-held lock
    "wait": ("lock", "other"),
    # where a job that waits reading stdin gets it: the stdin its launch command was given (launch,
    # presumed where no chain says), or a pipe a process of the job made (piped-inside: a
    # `producer | torchrun ...` line of its launch script, whose own stdin does not reach the job)
    "stdin": ("launch", "piped-inside"),
    # the scheduler that placed the job's processes, from their environment (SLURM_JOB_ID; Ray's
    # RAY_ADDRESS or RAY_RAYLET_PID); none: the environment was read and names neither
    "scheduler": ("slurm", "ray", "none"),
}

# Every report file the tool writes (session save, stop, watch incidents) is named
# debug-stuck-report-[<pid>-]<YYYYmmdd-HHMMSS>.md and .json.
REPORT_PREFIX = "debug-stuck-report-"
