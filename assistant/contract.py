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

EVIDENCE_SOURCES = ("stack", "process", "gpu", "log", "kernel", "probe", "answer", "chain")

ANSWER_SOURCES = ("user", "evidence", "log")

# The triage keys the contract names; the tree may add follow-up keys of its own.
CONTRACT_ANSWER_KEYS = {
    "phase": ("start", "mid-run"),
    "gpu": ("idle", "busy"),
    "step": ("same-step", "random"),
    "platform": ("cuda", "rocm", "cpu"),
    "cpu": ("idle", "busy"),
    "nodes": None,  # a positive integer
}

UNKNOWN = "unknown"
