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
class ReportOptions:
    target: float | None = None
    baseline: str | None = None
    band: str = "ci"
    #: Seconds per partition gradient of the normalised clock (``normalised/``), or None.
    partition_compute: float | None = None
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
class StudySpec:
    experiment: str = MISSING
    overrides: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    schemes: dict[str, list[str]] = MISSING
    #: Schemes run only in the ``lossless`` setting (an A/A arm that is no compared scheme).
    lossless_only: list[str] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=lambda: [Pipeline.stale])
    stale_lr: list[StaleLR] = field(default_factory=lambda: [StaleLR.constant])
    losses: dict[str, list[str]] = MISSING
    lossless: str = MISSING
    shortcut: bool = True
    verify: list[VerifyPoint] = field(default_factory=list)
    report: ReportOptions = field(default_factory=ReportOptions)


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
    return spec


def _check(spec: StudySpec, path: Path) -> None:
    if spec.lossless not in spec.losses:
        raise ConfigError(
            f"study spec {path}: lossless={spec.lossless!r} is not one of the losses "
            f"({', '.join(spec.losses)})."
        )
    strays = [label for label in spec.lossless_only if label not in spec.schemes]
    if strays:
        raise ConfigError(
            f"study spec {path}: lossless_only={strays!r} names no scheme of the study "
            f"({', '.join(spec.schemes)})."
        )
    if spec.report.band not in BANDS:
        raise ConfigError(
            f"study spec {path}: report.band={spec.report.band!r} is invalid: it must be one "
            f"of {', '.join(BANDS)}."
        )
    compute = spec.report.partition_compute
    if compute is not None and not compute > 0:
        raise ConfigError(
            f"study spec {path}: report.partition_compute={compute!r} is invalid: it must be "
            "a positive number of seconds (or null for no normalised clock)."
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
    """Every scheme variant of the study, in spec order."""
    out = []
    for label, overrides in spec.schemes.items():
        cfg = compose_run(spec, overrides)
        scheme = instantiate_scheme(cfg)
        if scheme.T == 0:
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
    setting (each variant over every seed); a ``lossless_only`` scheme has no units
    under loss. The runner starts the verification runs once
    the replays are written. Every scheme and loss setting is composed and built first:
    a bad one fails here, before any run.
    """
    faulty = set()  # loss settings that inject faults: a replay does not model them
    for loss, keys in spec.losses.items():
        cfg = compose_run(spec, keys)
        instantiate_checked(cfg.delay)
        if any(cfg.faults[kind] for kind in cfg.faults):
            faulty.add(loss)
    all_variants = variants(spec)
    lossless, replays, lossy = [], [], []
    for loss, loss_keys in spec.losses.items():
        for variant in all_variants:
            if loss != spec.lossless and variant.scheme in spec.lossless_only:
                continue
            for seed in spec.seeds:
                name = f"{variant.label}/{loss}/seed{seed}"
                overrides = (*variant.overrides, *loss_keys, f"seed={seed}")
                if loss == spec.lossless:
                    if not variant.lossy_only:
                        lossless.append(Unit(name, overrides))
                elif spec.shortcut and variant.replayable and loss not in faulty:
                    source = f"{variant.label}/{spec.lossless}/seed{seed}"
                    replays.append(Unit(name, overrides, source))
                else:
                    lossy.append(Unit(name, overrides))
    units = lossless + replays + lossy
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
