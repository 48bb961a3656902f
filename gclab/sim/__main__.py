"""``python -m gclab.sim``: simulate a scheme (or search its parameters) and write results.

Writes into the Hydra run directory: ``summary.json`` (``total_time``, ``waits``,
``retransmissions``, ``load``, ``jobs``, …), ``rounds.csv`` (one row per round) and,
with ``sim.search=true``, ``search.json`` (every grid point, fastest first; the summary
and rounds are the best point's). A bad config is reported in one sentence (exit 2)
before any round runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

import gclab.coding
import gclab.network  # noqa: F401  (both register their config schemas)
from gclab import CONF_DIR, cli
from gclab.coding.base import Scheme
from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig
from gclab.schemas import instantiate_checked
from gclab.sim.engine import SimResult, check_clock, check_run, simulate
from gclab.sim.search import Trial, grid, search


def prepare(cfg: DictConfig) -> tuple[Scheme, DelayModel, NetworkConfig]:
    """Build and validate everything the run needs; raises on a bad config."""
    network = NetworkConfig(**OmegaConf.to_container(cfg.network))
    check_clock(network)
    scheme = instantiate_checked(cfg.scheme, n=cfg.cluster.workers)
    delay = instantiate_checked(cfg.delay)
    check_run(scheme, delay, cfg.sim.jobs, cfg.sim.unit_time)
    if cfg.sim.search and cfg.sim.grid is None:
        grid(cfg.scheme, scheme.n)
    elif cfg.sim.grid is not None and not cfg.sim.grid:
        raise ConfigError(
            "sim.grid=[] is invalid: give at least one setting, or null for the full grid."
        )
    return scheme, delay, network


def reason(exc: Exception) -> str:
    """The one sentence to show: the innermost ConfigError if any, else the error itself."""
    inner: BaseException | None = exc
    while inner is not None:
        if isinstance(inner, ConfigError):
            return str(inner)
        inner = inner.__cause__
    return str(exc).splitlines()[0]


def report(result: SimResult, out: Path, trials: list[Trial] | None = None) -> None:
    """Write the run's files and print a short summary."""
    summary = {**result.summary(), "rounds_file": "rounds.csv"}
    if trials is not None:
        summary["params"] = trials[0].params
        (out / "search.json").write_text(json.dumps([t.record() for t in trials], indent=2))
        for t in trials:
            print(
                f"  {t.params}  load {t.result.load:.6f}  time {t.result.total_time:10.2f} s"
                f"  waits {t.result.waits}"
            )
        print(f"best: {trials[0].params}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    result.write_rounds(out / "rounds.csv")
    print(
        f"{result.scheme}: {result.jobs} jobs in {len(result.durations)} rounds, "
        f"total {result.total_time:.2f} s (mean round {result.durations.mean():.3f} s), "
        f"waits {result.waits}, retransmissions {int(result.retransmissions.sum())}, "
        f"load {result.load:.6f}\nwrote {out / 'summary.json'}"
    )


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="sim")
def main(cfg: DictConfig) -> None:
    """Hydra entry point. In a sweep, a job with a bad value is recorded and skipped."""
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    try:
        scheme, delay, network = prepare(cfg)
        args = (delay, network, cfg.sim.jobs, cfg.seed, cfg.sim.unit_time)
        if cfg.sim.search:
            settings = None if cfg.sim.grid is None else OmegaConf.to_container(cfg.sim.grid)
            trials = search(cfg.scheme, scheme.n, *args, settings=settings)
            report(trials[0].result, out, trials)
        else:
            report(simulate(scheme, *args), out)
    except (ConfigError, InstantiationException, TypeError) as exc:
        print(f"gclab.sim: {reason(exc)}", file=sys.stderr)
        if hydra_cfg.mode.name == "MULTIRUN":  # the sweep's other jobs go on
            (out / "error.txt").write_text(reason(exc) + "\n", encoding="utf-8")
            return
        sys.exit(2)


if __name__ == "__main__":
    cli.run(main, "sim", "gclab.sim: ")
