"""Train through the app and single-process SGD on the same batches, and compare weights."""

from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate

from gclab.app import build, run
from gclab.ml.models import init_seed
from gclab.ml.reference import train_single_process
from gclab.tracking.artifacts import load_checkpoint


def reference_weights(cfg, covered: dict[int, list[int]] | None = None) -> dict[str, torch.Tensor]:
    """Weights after plain SGD on the same global batches, from the same initial model;
    with ``covered``, on those shards of a job, rescaled (``network.recovery=partial``)."""
    plan, _ = build(cfg)
    torch.manual_seed(plan.seed)
    model = instantiate(plan.model_cfg)
    flat = train_single_process(
        model, plan.data, plan.scheme.k, plan.batch_size, plan.num_jobs, plan.seed,
        plan.augment, plan.build_optimizer, covered=covered,
    )  # fmt: skip
    return flat.model.state_dict()


def interleaved_references(cfg) -> list[dict]:
    """M independent single-process SGD runs: model m, from its own initial weights at its
    own learning rate, trains on jobs m, m+M, ..."""
    plan, _ = build(cfg)
    weights = []
    for m in range(plan.models):
        torch.manual_seed(init_seed(plan.seed, m))
        flat = train_single_process(
            instantiate(plan.model_cfg), plan.data, plan.scheme.k, plan.batch_size,
            plan.num_jobs, plan.seed, plan.augment,
            lambda flat, m=m: plan.build_optimizer(flat, plan.lrs[m]),
            jobs=range(m, plan.num_jobs, plan.models),
        )  # fmt: skip
        weights.append(flat.model.state_dict())
    return weights


def trained_weights(cfg, run_dir: Path, start_pool=None) -> dict[str, torch.Tensor]:
    """Model 0's weights after ``run`` (on Ray actors unless ``start_pool`` says otherwise)."""
    run(cfg, run_dir, start_pool=start_pool)
    return load_checkpoint(run_dir / "checkpoint.pt")["model"]


def assert_same_weights(got: dict, want: dict, tol: float = 2e-5) -> None:
    assert got.keys() == want.keys()
    for key in want:
        diff = float((got[key] - want[key]).abs().max())
        scale = float(want[key].abs().max()) + 1e-12
        assert diff <= tol * max(1.0, scale), f"{key}: max diff {diff:.3e}"


def rotating_straggler_trace(path: Path, n: int, rounds: int) -> Path:
    """Worker ``r mod n`` is 50x slower in round r: one tolerated erasure per round."""
    durations = np.ones((n, rounds))
    durations[np.arange(rounds) % n, np.arange(rounds)] = 50.0
    np.savez(path, durations=durations, load=0.0)
    return path
