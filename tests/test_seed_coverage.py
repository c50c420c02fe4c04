"""Everything in the five source documents must be findable in some playbook."""

import pytest

from conftest import SEEDS

# (seed file prefix, phrase as the seed writes it, cause whose playbook must hold it)
FACTS = [
    ("000", "blocks_to_swap", "cuda-sync"),
    ("000", "custom_offloading_utils", "cuda-sync"),
    ("000", "ThreadPoolExecutor(max_workers=1)", "thread-deadlock"),
    ("000", "future.result(timeout=30", "thread-deadlock"),
    ("000", "prepare_block_swap", "cuda-sync"),
    ("000", "max_data_loader_n_workers", "dataloader"),
    ("000", "persistent_workers", "dataloader"),
    ("000", "multiprocessing.Value", "dataloader"),
    ("000", "load_latents_from_disk", "io-stall"),
    ("000", "timeout_context", "io-stall"),
    ("000", "wait_for_everyone", "collective"),
    ("000", "training_monitor", "collective"),
    ("000", "sample_every_n_steps", "cuda-sync"),
    ("000", "sample_images", "cuda-sync"),
    ("000", "blockwise_fused_optimizers", "optimizer-not-stepping"),
    ("000", "register_post_accumulate_grad_hook", "optimizer-not-stepping"),
    ("000", "empty_cache", "memory-pressure"),
    ("000", "gradient_checkpointing", "memory-pressure"),
    ("000", "cache_latents", "memory-pressure"),
    ("000", "mem_eff_save_file", "checkpoint-save"),
    ("000", "save_every_n_epochs", "checkpoint-save"),
    ("001", "amdgpu_amdkfd_restore_userptr_worker", "dataloader"),
    ("001", "val=False", "dataloader"),
    ("001", "persistent_workers=False", "dataloader"),
    ("001", "4,886", "dataloader"),
    ("002", "NCCL_DEBUG=INFO", "nccl-init"),
    ("002", "nvidia-smi topo -m", "nccl-init"),
    ("002", "create_dataloader", "dataloader"),
    ("002", "GPT", "model-init"),
    ("002", "gc.set_debug", "gc-pause"),
    ("002", "PYTHONGC_THRESHOLD", "gc-pause"),
    ("002", "gc.disable()", "gc-pause"),
    ("002", "NCCL_DEBUG_SUBSYS=COLL", "collective"),
    ("002", "samples_per_step", "bad-sample"),
    ("002", "shard_idx", "bad-sample"),
    ("002", "ECC Errors", "gpu-hardware"),
    ("002", "temperature.gpu", "gpu-hardware"),
    ("002", "clocks.current.graphics", "gpu-hardware"),
    ("002", "ping -c 100", "network"),
    ("002", "base_checkpoints", "checkpoint-save"),
    ("003", "h5py.File", "io-stall"),
    ("003", "precompute_latent_cache", "io-stall"),
    ("003", "VastAI", "io-stall"),
    ("003", "Producer process", "dataloader"),
    ("003", "cache_dir: null", "dataloader"),
    ("003", "write_bytes", "checkpoint-save"),
    ("003", "PreloadedCacheDataset", "memory-pressure"),
    ("003", "check_sufficient_ram", "memory-pressure"),
    ("004", "gfx1030_18.kdb", "miopen-find"),
    ("004", "gfx1010", "miopen-find"),
    ("004", "MIOPEN_FIND_MODE=NORMAL", "miopen-find"),
    ("004", "MIOPEN_DEBUG_DISABLE_FIND_DB=1", "miopen-find"),
    ("004", "torch.set_num_threads(1)", "miopen-find"),
    ("004", "installing-miopen-kernels-package", "miopen-find"),
    ("004", "Starting training for 50 epochs", "miopen-find"),
    ("004", "batch=1", "memory-pressure"),
]


def seed_text(prefix):
    return next(SEEDS.glob(f"{prefix}_*.txt")).read_text(encoding="utf-8", errors="replace")


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds is not beside this checkout")
@pytest.mark.parametrize("prefix, phrase, cause", FACTS, ids=[f"{p}:{w}" for p, w, _ in FACTS])
def test_seed_fact_is_in_its_playbook(knowledge, prefix, phrase, cause):
    assert phrase in seed_text(prefix), "the fact list drifted from the seed"
    assert phrase in knowledge.playbooks[cause].path.read_text(encoding="utf-8")


def test_every_playbook_names_its_sources(knowledge):
    cited = " ".join(" ".join(b.sources) for b in knowledge.playbooks.values()).lower()
    for seed in ("seed 000", "seed 001", "seed 002", "seed 003", "seed 004"):
        assert seed in cited
