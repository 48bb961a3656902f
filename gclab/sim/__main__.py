"""``python -m gclab.sim``: simulate a scheme (or search its parameters) and write results.

Writes into the Hydra run directory: ``summary.json`` (``total_time``, ``waits``,
``retransmissions``, ``load``, ``jobs``, …), ``rounds.csv`` (one row per round) and,
with ``sim.search=true``, ``search.json`` (every grid point, fastest first; the summary
and rounds are the best point's, and the summary adds ``settings``, ``search_seconds``
and the best setting of each scheme). ``sim.schemes=[uncoded,classic_cr,sr_sgc,m_sgc]``
searches several schemes' grids in one run; ``adapt=search`` re-chooses the scheme
while the run goes (:mod:`gclab.adapt`: the summary adds the switches and the decision
time, ``rounds.csv`` a ``switched`` column). A bad config is reported in one sentence
(exit 2) before any round runs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from gclab import CONF_DIR
from gclab.adapt.decide import controller
from gclab.adapt.simulate import simulate_adaptive
from gclab.cli import PREFIXES, fail, run_app
from gclab.coding.contract import Scheme
from gclab.errors import ConfigError, under
from gclab.network import DelayModel, NetworkConfig
from gclab.network.protocol import check_recovery
from gclab.schemas import instantiate_checked, instantiate_scheme
from gclab.sim.engine import SimResult, check_clock, check_run, simulate, unit_time
from gclab.sim.fast import load_kernels
from gclab.sim.search import Trial, grid, scheme_name, scheme_options, search

PREFIX = PREFIXES["sim"]


def prepare(cfg: DictConfig) -> tuple[Scheme, DelayModel, NetworkConfig, list[DictConfig]]:
    """Build and validate everything the run needs; raises on a bad config. The last item
    is the scheme configs a search covers (:func:`searched`; empty without a search)."""
    with under("network"):
        network = NetworkConfig(**OmegaConf.to_container(cfg.network))
    check_clock(network)
    scheme = instantiate_scheme(cfg)
    delay = instantiate_checked(cfg.delay)
    with under("delay"):  # check_run checks the delay model against the run
        check_run(
            scheme, delay, cfg.sim.jobs, unit_time(cfg.sim.unit_time, delay), cfg.sim.payload_bytes
        )
    with under("network"):
        check_recovery(scheme, network)
    if cfg.sim.grid is not None and not cfg.sim.grid:
        raise ConfigError(
            "sim.grid=[] is invalid: give at least one setting, or null for the full grid."
        )
    if cfg.sim.schemes is not None and cfg.sim.grid is not None:
        raise ConfigError(
            "sim.grid and sim.schemes cannot be combined: a grid subset is one scheme's "
            "parameters; search several schemes with their full grids (sim.grid=null)."
        )
    nodes = searched(cfg) if cfg.sim.search else []
    if cfg.sim.grid is None:
        for node in nodes:
            grid(node, scheme.n, network.recovery)
    return scheme, delay, network, nodes


def searched(cfg: DictConfig) -> list[DictConfig]:
    """The schemes a search covers: ``sim.schemes`` if given, else the one ``scheme``."""
    if cfg.sim.schemes is None:
        return [cfg.scheme]
    if not cfg.sim.schemes:
        raise ConfigError(
            "sim.schemes=[] is invalid: give at least one scheme option, or null to search "
            "the configured scheme."
        )
    return scheme_options(list(cfg.sim.schemes))


def report(
    result: SimResult,
    out: Path,
    delay: DelayModel,
    compute: float,
    trials: list[Trial] | None = None,
    seconds: float | None = None,
) -> None:
    """Write the run's files and print a short summary (with a search: the best of each
    scheme); the summary records the delay model's ``loss_rate`` for reports and the
    compute seconds per unit load the run used (``unit_time``)."""
    summary = {
        **result.summary(),
        "loss_rate": delay.loss_rate,
        "unit_time": compute,
        "rounds_file": "rounds.csv",
    }
    if trials is not None:
        best = {}
        for t in trials:  # fastest first: the first trial of a scheme is its best
            best.setdefault(t.name, t)
        summary["params"] = trials[0].params
        summary["settings"] = len(trials)
        summary["search_seconds"] = seconds
        summary["best"] = {
            name: {"params": t.params, "scheme": t.result.scheme, "total_time": t.result.total_time}
            for name, t in best.items()
        }
        lines = ",\n".join(json.dumps(t.record()) for t in trials)  # one setting a line
        (out / "search.json").write_text(f"[\n{lines}\n]\n")
        for t in best.values():
            print(
                f"  {t.result.scheme}  load {t.result.load:.6f}  time {t.result.total_time:10.2f} s"
                f"  waits {t.result.waits}"
            )
        print(f"best: {trials[0].params} ({len(trials)} settings searched in {seconds:.3f} s)")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    result.write_rounds(out / "rounds.csv")
    print(
        f"{result.scheme}: {result.jobs} jobs in {len(result.durations)} rounds, "
        f"total {result.total_time:.2f} s (mean round {result.durations.mean():.3f} s), "
        f"waits {result.waits}, retransmissions {int(result.retransmissions.sum())}, "
        f"load {result.load:.6f}, compute {compute:g} s per unit load"
        f"\nwrote {out / 'summary.json'}"
    )


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="sim")
def _hydra_main(cfg: DictConfig) -> None:
    """Hydra's task function. In a sweep, a job with a bad value is recorded and skipped."""
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    try:
        scheme, delay, network, nodes = prepare(cfg)
        compute = unit_time(cfg.sim.unit_time, delay)
        args = (delay, network, cfg.sim.jobs, cfg.seed, compute, cfg.sim.payload_bytes)
        payload = cfg.sim.payload_bytes
        adaptive = controller(cfg, scheme, delay, network, payload, cfg.sim.jobs, "sim.jobs")
        if adaptive is not None:
            if cfg.sim.search:
                raise ConfigError(
                    "adapt=search cannot be combined with sim.search=true: the adaptive run "
                    "searches by itself; choose one."
                )
            report(simulate_adaptive(scheme, adaptive, *args), out, delay, compute)
        elif cfg.sim.search:
            settings = None if cfg.sim.grid is None else OmegaConf.to_container(cfg.sim.grid)
            if settings is None:  # start-up: search_seconds times the search alone
                load_kernels([scheme_name(node) for node in nodes], network, compile_missing=False)
            start = time.perf_counter()
            trials = sorted(
                (t for node in nodes for t in search(node, scheme.n, *args, settings)),
                key=lambda t: t.result.total_time,
            )
            report(trials[0].result, out, delay, compute, trials, time.perf_counter() - start)
        else:
            report(simulate(scheme, *args), out, delay, compute)
    except ConfigError as exc:
        if hydra_cfg.mode.name != "MULTIRUN":
            fail(PREFIX, str(exc))
        print(f"{PREFIX}{exc}", file=sys.stderr)  # the sweep's other jobs go on
        (out / "error.txt").write_text(f"{exc}\n", encoding="utf-8")


def main() -> None:
    """``python -m gclab.sim``: bad input exits 2 with one line, a bug shows its traceback."""
    run_app(_hydra_main, "sim")


if __name__ == "__main__":
    main()
