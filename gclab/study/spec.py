"""What a study runs: its YAML spec, and the units of work it implies.

A spec (``gclab/study/packet_loss.yaml`` is the packaged one) names the base experiment,
the seeds, the schemes, the loss settings and which replayed points to verify. Every
(scheme variant, loss setting, seed) becomes a :class:`Unit`: a real training run, or,
with ``shortcut: true`` and a scheme whose weights per job do not depend on the losses
(:func:`gclab.study.replay.not_replayable`), a replay of the lossless run of the same
variant and seed. A scheme named in ``lossless_only`` runs without loss alone: an A/A
arm that is the same algorithm as another scheme only there (``report.aa_at``). Scheme
variants: each scheme with T = 0 as is; with T > 0, one per ``pipelines`` entry, and
``pipeline=stale`` once per ``stale_lr`` entry under loss (the rule has no effect
without loss: every job decodes in its own round).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import gclab.config  # noqa: F401  (registers every schema, to compose the runs' configs)
from gclab import CONF_DIR
from gclab.config import Pipeline
from gclab.errors import ConfigError
from gclab.ml.optim import StaleLR
from gclab.report.groups import parse_setting
from gclab.report.intervals import BANDS
from gclab.schemas import instantiate_checked, instantiate_scheme
from gclab.study.replay import not_replayable

#: The packaged spec: the study of docs/study.md.
PACKET_LOSS = Path(__file__).with_name("packet_loss.yaml")


@dataclass
class VerifyPoint:
    run: str  # a scheme variant, e.g. classic_cr or pipelined_fr-interleaved
    loss: str
    seed: int = 0


@dataclass
class Regime:
    """The regime of a study in dimensionless terms, fixed before its runs: the baseline's
    round (``report.baseline``, without loss) computes ``k`` partition gradients of
    ``partition_seconds`` each (a pilot's measured speed), so

    * ``compute_per_rto`` = k·partition_seconds / ``network.rto``;
    * ``bytes_per_compute`` = (payload / ``network.bandwidth``) / (k·partition_seconds).

    :func:`load_spec` checks that the experiment's config realises them (1 % tolerance),
    and the normalised clock can take ``partition_seconds`` as its constant."""

    partition_seconds: float = MISSING
    compute_per_rto: float = MISSING
    bytes_per_compute: float = MISSING


@dataclass
class ReportOptions:
    target: float | None = None
    #: The arm every other is compared with: a scheme label of the spec (its runs' group)
    #: or a group's name as the report's tables show it.
    baseline: str | None = None
    band: str = "ci"
    #: Seconds per partition gradient of the normalised clock (``normalised/``): a number,
    #: ``regime`` (the spec's pre-registered ``regime.partition_seconds``), ``median`` (the
    #: median of the runs' recorded ``partition_seconds``), or None for no normalised clock.
    partition_compute: Any = None
    #: What the normalised clock scales: ``compute`` (compute and server time, study v2) or
    #: ``all`` (also the rto and the bytes' time: one change of unit, the regime as it ran).
    normalise: str = "compute"
    #: Whether the normalised clock charges every run's recorded server time (scaled like
    #: its compute), also for runs whose config did not (``network.server_time=0``, or runs
    #: recorded before the clock charged it: their decode time alone).
    charge_server_time: bool = False
    #: Horizon (virtual s) of the restricted mean time to target; None: per loss setting.
    horizon: float | None = None
    #: An A/A pair, [GROUP_A, GROUP_B] (report group names), whose ratio sets the noise floor.
    aa: list[str] = field(default_factory=list)
    #: Where the A/A pair is the same algorithm: DELAY or DELAY:RATE; None: wherever both ran.
    aa_at: str | None = None
    #: Evaluations averaged for the crossing of the target (1: the first at or above it).
    smooth: int = 1


@dataclass
class MapCorner:
    """A regime of the map run for real, for some seeds: its check (:mod:`regime_map`)."""

    run: str  # a scheme variant
    rho: float  # compute per round / rto
    loss: str  # a loss label of ``map.losses``
    seeds: list[int] = field(default_factory=lambda: [0])


@dataclass
class MapSpec:
    """The regime map (:mod:`gclab.study.regime_map`): its grid, which baseline each
    variant is compared with (``baselines``: baseline variant -> variants), and the
    corners run for real."""

    rhos: list[float] = field(default_factory=lambda: [0.03, 0.1, 0.3, 1.0, 3.0])
    losses: dict[str, list[str]] = MISSING
    baselines: dict[str, list[str]] = MISSING
    verify: list[MapCorner] = field(default_factory=list)


@dataclass
class StudySpec:
    experiment: str = MISSING
    overrides: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    schemes: dict[str, list[str]] = MISSING
    #: Schemes run only in the ``lossless`` setting (an A/A arm that is no compared scheme).
    lossless_only: list[str] = field(default_factory=list)
    #: Schemes run only under loss (e.g. a second stale rule, which changes nothing where
    #: no job is late).
    lossy_only: list[str] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=lambda: [Pipeline.stale])
    stale_lr: list[StaleLR] = field(default_factory=lambda: [StaleLR.constant])
    losses: dict[str, list[str]] = MISSING
    lossless: str = MISSING
    shortcut: bool = True
    verify: list[VerifyPoint] = field(default_factory=list)
    report: ReportOptions = field(default_factory=ReportOptions)
    #: The A/A control: two scheme labels with identical overrides, one arm run twice
    #: through the same code; the second's runs draw their losses from ``network.stream=1``.
    aa: list[str] = field(default_factory=list)
    #: Running order within a loss setting: ``points`` (each variant over every seed, so
    #: whole points come first) or ``seeds`` (every variant of a seed, then the next seed:
    #: arms interleaved in time, so a drift of the machine's speed touches them alike).
    order: str = "points"
    regime: Regime | None = None
    map: MapSpec | None = None


def load_spec(path: Path | None = None, sets: list[str] | None = None) -> StudySpec:
    """The spec at ``path`` (default: the packaged one), with ``key=value`` changes ``sets``;
    a misspelt key, a wrong type or a dangling name is a :class:`ConfigError`."""
    path = path or PACKET_LOSS
    try:
        spec = OmegaConf.merge(
            OmegaConf.structured(StudySpec),
            OmegaConf.load(path),
            OmegaConf.from_dotlist(sets or []),
        )
        spec = OmegaConf.to_object(spec)
    except (OmegaConfBaseException, OSError) as exc:
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"study spec {path} is invalid: {reason}.") from None
    _check(spec, path)
    check_regime(spec, path)
    return spec


def _check(spec: StudySpec, path: Path) -> None:
    if spec.lossless not in spec.losses:
        raise ConfigError(
            f"study spec {path}: lossless={spec.lossless!r} is not one of the losses "
            f"({', '.join(spec.losses)})."
        )
    for key in ("lossless_only", "lossy_only"):
        strays = [label for label in getattr(spec, key) if label not in spec.schemes]
        if strays:
            raise ConfigError(
                f"study spec {path}: {key}={strays!r} names no scheme of the study "
                f"({', '.join(spec.schemes)})."
            )
    if spec.report.band not in BANDS:
        raise ConfigError(
            f"study spec {path}: report.band={spec.report.band!r} is invalid: it must be one "
            f"of {', '.join(BANDS)}."
        )
    compute = spec.report.partition_compute
    named = compute in ("median", "regime")
    if compute is not None and not named and not (_positive(compute)):
        raise ConfigError(
            f"study spec {path}: report.partition_compute={compute!r} is invalid: it must be "
            "a positive number of seconds, 'regime', 'median', or null (no normalised clock)."
        )
    if compute == "regime" and spec.regime is None:
        raise ConfigError(
            f"study spec {path}: report.partition_compute='regime' needs a regime section "
            "with the pre-registered partition_seconds."
        )
    if spec.report.normalise not in ("compute", "all"):
        raise ConfigError(
            f"study spec {path}: report.normalise={spec.report.normalise!r} is invalid: it "
            "must be 'compute' or 'all'."
        )
    if spec.order not in ("points", "seeds"):
        raise ConfigError(
            f"study spec {path}: order={spec.order!r} is invalid: it must be 'points' or 'seeds'."
        )
    if spec.map is not None:
        _check_map(spec, path)
    if spec.aa:
        if len(spec.aa) != 2 or any(label not in spec.schemes for label in spec.aa):
            raise ConfigError(
                f"study spec {path}: aa={spec.aa!r} is invalid: it names two scheme labels "
                f"of the study ({', '.join(spec.schemes)})."
            )
        a, b = (spec.schemes[label] for label in spec.aa)
        if list(a) != list(b):
            raise ConfigError(
                f"study spec {path}: aa={spec.aa!r} is no A/A pair: its arms' overrides differ "
                f"({a} against {b}); an A/A control runs one arm twice, with identical overrides."
            )
    options = spec.report
    if options.horizon is not None and not 0 < options.horizon < math.inf:
        raise ConfigError(
            f"study spec {path}: report.horizon={options.horizon!r} is invalid: it must be a "
            "positive number of virtual seconds (or null for each loss setting's own)."
        )
    if options.smooth < 1:
        raise ConfigError(
            f"study spec {path}: report.smooth={options.smooth!r} is invalid: it must be a "
            "number of evaluations >= 1 (1: the first evaluation at or above the target)."
        )
    if options.aa and (len(options.aa) != 2 or options.target is None):
        raise ConfigError(
            f"study spec {path}: report.aa={options.aa!r} is invalid: it names two groups "
            "(an A/A pair) and needs a report.target."
        )
    try:
        if options.aa_at is not None:
            parse_setting(options.aa_at)
    except ValueError:
        raise ConfigError(
            f"study spec {path}: report.aa_at={options.aa_at!r} is invalid: it must be a loss "
            "setting, DELAY or DELAY:RATE (e.g. none or bernoulli:0.1)."
        ) from None
    for point in spec.verify:
        if point.loss not in spec.losses or point.seed not in spec.seeds:
            raise ConfigError(
                f"study spec {path}: verify point {point.run}/{point.loss}/seed{point.seed} names "
                "a loss setting or seed the study does not run."
            )


def _check_map(spec: StudySpec, path: Path) -> None:
    grid = spec.map
    if spec.regime is None:
        raise ConfigError(
            f"study spec {path}: a map needs the regime section (its grid is stated in the "
            "regime's terms)."
        )
    if not grid.rhos or not all(_positive(rho) for rho in grid.rhos):
        raise ConfigError(
            f"study spec {path}: map.rhos={list(grid.rhos)!r} is invalid: it must list "
            "compute-per-rto values > 0."
        )
    named = [v for base, others in grid.baselines.items() for v in (base, *others)]
    strays = [label for label in named if label not in spec.schemes]
    if strays:
        raise ConfigError(
            f"study spec {path}: map.baselines names {strays!r}, none of the schemes "
            f"({', '.join(spec.schemes)})."
        )
    for corner in grid.verify:
        if corner.run not in named or corner.loss not in grid.losses or corner.rho not in grid.rhos:
            raise ConfigError(
                f"study spec {path}: map.verify point {corner.run}/rho{corner.rho}/{corner.loss} "
                "is not a cell of the map (a mapped variant, one of map.rhos and map.losses)."
            )


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def check_regime(spec: StudySpec, path: Path | str = "the spec") -> dict[str, float]:
    """The regime the experiment's config realises for the baseline's lossless round
    (``compute_per_rto``, ``bytes_per_compute``, from ``regime.partition_seconds``, and the
    round's ``partitions``); a :class:`ConfigError` if it differs from the spec's
    ``regime`` by more than 1 %."""
    regime, baseline = spec.regime, spec.report.baseline
    if regime is None:
        return {}
    if baseline not in spec.schemes:
        raise ConfigError(
            f"study spec {path}: a regime is stated for the baseline's round, and "
            f"report.baseline={baseline!r} is none of the schemes ({', '.join(spec.schemes)})."
        )
    cfg = compose_run(spec, [*spec.schemes[baseline], *spec.losses[spec.lossless]])
    scheme = instantiate_scheme(cfg)
    model = instantiate_checked(cfg.model, num_classes=cfg.model.num_classes or 10)
    payload = 4 * sum(p.numel() for p in model.parameters())
    compute = scheme.load * scheme.n * regime.partition_seconds
    bandwidth = cfg.network.bandwidth
    realised = {
        "partitions": scheme.load * scheme.n,
        "compute_per_rto": compute / cfg.network.rto,
        "bytes_per_compute": 0.0 if bandwidth is None else payload / bandwidth / compute,
    }
    for key in ("compute_per_rto", "bytes_per_compute"):
        value, stated = realised[key], getattr(regime, key)
        if not math.isclose(value, stated, rel_tol=0.01):
            raise ConfigError(
                f"study spec {path}: regime.{key}={stated} is not what the runs' config "
                f"realises ({value:.4g} for {baseline}'s round of {scheme.load * scheme.n:g} "
                f"partitions at {regime.partition_seconds} s); fix the experiment or the regime."
            )
    return realised


@dataclass(frozen=True)
class Unit:
    """One run of the study: ``name`` is ``<variant>/<loss>/seed<k>``.

    ``source`` is the name of the run a replay replays (None: a real run).
    """

    name: str
    overrides: tuple[str, ...]
    source: str | None = None

    @property
    def replay(self) -> bool:
        return self.source is not None


def run_overrides(spec: StudySpec, overrides: list[str] | tuple[str, ...]) -> list[str]:
    """A run's command-line overrides: the experiment, the spec's ``overrides`` (shared by
    every run), then the run's own, which win where they set the same key."""
    return [f"experiment={spec.experiment}", *spec.overrides, *overrides]


def compose_run(spec: StudySpec, overrides: list[str] | tuple[str, ...]) -> DictConfig:
    """The config ``python -m gclab <run_overrides(spec, overrides)>`` would run (with the
    ``hydra`` node, whose ``runtime.choices`` names the options chosen); a
    :class:`ConfigError` if it does not compose."""
    keys = run_overrides(spec, overrides)
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=keys, return_hydra_config=True)
    except HydraException as exc:
        reason = str(exc).splitlines()[0].rstrip(".")
        raise ConfigError(f"the study run {' '.join(keys)} does not compose: {reason}.") from None


@dataclass(frozen=True)
class Variant:
    """A scheme with its pipeline and staleness rule: one curve per loss setting."""

    label: str
    scheme: str  # the spec's scheme label
    overrides: tuple[str, ...]
    replayable: bool  # its weights per job do not depend on the losses
    lossy_only: bool = False  # without loss it repeats another variant's run


def variants(spec: StudySpec) -> list[Variant]:
    """Every scheme variant of the study, in spec order. A scheme whose overrides set
    ``train.pipeline`` is one variant, as given; another with T > 0 expands over the
    spec's ``pipelines`` and ``stale_lr``."""
    out = []
    for label, overrides in spec.schemes.items():
        cfg = compose_run(spec, overrides)
        scheme = instantiate_scheme(cfg)
        explicit = any(key.startswith("train.pipeline=") for key in overrides)
        if scheme.T == 0 or explicit:  # as given: no pipelines or stale rules to expand
            replayable = not_replayable(cfg, scheme) is None
            out.append(Variant(label, label, tuple(overrides), replayable))
            continue
        for pipeline in spec.pipelines:
            keys = (*overrides, f"train.pipeline={pipeline.name}")
            if pipeline is Pipeline.interleaved:
                replayable = not_replayable(compose_run(spec, keys), scheme) is None
                out.append(Variant(f"{label}-interleaved", label, keys, replayable))
                continue
            for rule in spec.stale_lr:
                out.append(
                    Variant(
                        f"{label}-stale-{rule.name}",
                        label,
                        (*keys, f"train.stale_lr={rule.name}"),
                        replayable=False,
                        lossy_only=rule is not spec.stale_lr[0],
                    )
                )
    return out


def plan(spec: StudySpec) -> tuple[list[Unit], list[Unit]]:
    """The study's units in running order, and the real runs that verify replayed points.

    The order puts whole points first, so that a study stopped part-way has every seed of
    the points it has: the lossless real runs (each variant over every seed), then the
    replays of the exact variants, then the real runs under loss, loss setting by loss
    setting (each variant over every seed); a ``lossless_only`` scheme has no units under
    loss. With ``order: seeds`` the real runs go seed by seed instead (every loss setting
    and variant of a seed before the next seed), then the replays. The A/A arm's second
    label (``aa``) runs with ``network.stream=1``. The runner starts the verification runs
    once the replays are written. Every scheme and loss setting is composed and built first:
    a bad one fails here, before any run.
    """
    faulty = set()  # loss settings that inject faults: a replay does not model them
    for loss, keys in spec.losses.items():
        cfg = compose_run(spec, keys)
        instantiate_checked(cfg.delay)
        if any(cfg.faults[kind] for kind in cfg.faults):
            faulty.add(loss)
    all_variants = variants(spec)
    replicate = spec.aa[1] if spec.aa else None  # the A/A arm's second run: its own losses
    lossless, replays, lossy = [], [], []
    for loss, loss_keys in spec.losses.items():
        for variant, seed in [(v, seed) for v in all_variants for seed in spec.seeds]:
            if loss != spec.lossless and variant.scheme in spec.lossless_only:
                continue
            name = f"{variant.label}/{loss}/seed{seed}"
            stream = ("network.stream=1",) if variant.scheme == replicate else ()
            overrides = (*variant.overrides, *loss_keys, *stream, f"seed={seed}")
            if loss == spec.lossless:
                if not variant.lossy_only and variant.scheme not in spec.lossy_only:
                    lossless.append(Unit(name, overrides))
            elif spec.shortcut and variant.replayable and loss not in faulty:
                source = f"{variant.label}/{spec.lossless}/seed{seed}"
                replays.append(Unit(name, overrides, source))
            else:
                lossy.append(Unit(name, overrides))
    units = lossless + replays + lossy
    if spec.order == "seeds":  # every real run of a seed, then the next seed; replays last
        real = sorted(lossless + lossy, key=lambda u: spec.seeds.index(_seed(u)))
        units = real + replays
    by_name = {unit.name: unit for unit in units}
    checks = []
    for point in spec.verify:
        name = f"{point.run}/{point.loss}/seed{point.seed}"
        if name not in by_name or not by_name[name].replay:
            raise ConfigError(
                f"verify point {name} is not a replayed run of the study; verify one of: "
                f"{', '.join(u.name for u in units if u.replay) or 'none (shortcut is off)'}."
            )
        checks.append(Unit(name, by_name[name].overrides))
    return units, checks


def _seed(unit: Unit) -> int:
    return int(unit.name.rsplit("/seed", 1)[1])


def select(
    units: list[Unit], checks: list[Unit], patterns: list[str]
) -> tuple[list[Unit], list[Unit]]:
    """The units and verification runs whose names (``<variant>/<loss>/seed<k>``) match
    one of the shell-style ``patterns`` (``*`` also matches ``/``), in plan order; all of
    them without patterns. A pattern that matches no unit is a :class:`ConfigError`."""
    if not patterns:
        return units, checks
    names = [unit.name for unit in (*units, *checks)]
    for pattern in patterns:
        if not fnmatch.filter(names, pattern):
            raise ConfigError(
                f"--only {pattern!r} matches no unit of the study; units are named "
                f"<variant>/<loss>/seed<k>, e.g. {names[0]}."
            )

    def chosen(unit: Unit) -> bool:
        return any(fnmatch.fnmatchcase(unit.name, pattern) for pattern in patterns)

    return [u for u in units if chosen(u)], [u for u in checks if chosen(u)]


def map_units(spec: StudySpec) -> list[Unit]:
    """The real runs of the map's corners (``map.verify``), named
    ``<variant>/rho<ρ>/<loss>/seed<k>``: the variant's overrides, the map loss's, and the
    rto of ρ for the baseline's round (:func:`rto_of`)."""
    if spec.map is None:
        return []
    overrides = {v.label: v.overrides for v in variants(spec)}
    base = compose_run(spec, []).train.time_budget
    units = []
    for corner in spec.map.verify:
        # a longer rto slows every round down to at most rto/rto0 times: so the budget
        stretch = max(1.0, spec.regime.compute_per_rto / corner.rho)
        budget = () if base is None else (f"train.time_budget={base * stretch:.6g}",)
        for seed in corner.seeds:
            units.append(
                Unit(
                    f"{corner.run}/rho{corner.rho:g}/{corner.loss}/seed{seed}",
                    (
                        *overrides[corner.run],
                        *spec.map.losses[corner.loss],
                        f"network.rto={rto_of(spec, corner.rho):.6g}",
                        *budget,
                        f"seed={seed}",
                    ),
                )
            )
    return units


def rto_of(spec: StudySpec, rho: float) -> float:
    """The rto at which the baseline's round has compute per rto ``rho``: k·partition
    seconds / ρ (the regime's pre-registered partition time)."""
    return check_regime(spec)["partitions"] * spec.regime.partition_seconds / rho
