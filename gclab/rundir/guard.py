"""A run directory holds one run's record; nothing may overwrite it, a resume continues it.

The record: Hydra's ``.hydra/`` (config, overrides), metrics.jsonl, checkpoint.pt,
summary.json and the W&B run. Hydra writes ``.hydra/`` into the run directory *before*
the task function runs, so the checks run earlier, in :class:`RunDirGuard`: a Hydra
callback called once the config is composed and before anything touches the directory.

* One process at a time: the guard takes the directory's lock (:mod:`gclab.rundir.lock`)
  and runs its checks under it; a sweep locks its sweep directory, and each job its own
  directory (:func:`gclab.app.run`).
* ``resume=true`` needs a readable checkpoint written by the same config: every key but
  :data:`FREE_KEYS` (not stored) and :data:`WHERE_KEYS` (where the run executes). A
  refused resume leaves the directory byte for byte as it was.
* An accepted resume stores its segment's Hydra record in ``.hydra-resume-<k>/`` beside
  the original ``.hydra/``, which stays the run's first record; the where-keys that
  changed are noted there in ``changed.yaml``.
* A fresh run refuses a directory that already holds a run (a checkpoint.pt, or a
  metrics.jsonl with records), and a sweep a sweep directory that holds any.

:func:`check_run_dir` is the same check for callers of :func:`gclab.app.run`.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, read_write

from gclab.cli import PREFIXES, fail
from gclab.errors import ConfigError
from gclab.rundir.lock import release, take
from gclab.tracking.artifacts import load_checkpoint

#: Files that make a directory hold a run, when they are not empty.
RECORDS = ("metrics.jsonl", "checkpoint.pt")


def _held(run_dir: Path) -> list[str]:
    """The records in ``run_dir`` (a run that stopped before its first round has none)."""
    return [
        name for name in RECORDS if (run_dir / name).is_file() and (run_dir / name).stat().st_size
    ]


#: Keys a resumed run may change: they do not change what is trained (``paths`` holds
#: roots only; the keys that read them, such as ``data.root``, are compared resolved).
FREE_KEYS = ("resume", "logger", "faults", "hydra", "paths")

#: Keys stored in the checkpoint that say where and how a run executes, not what it
#: computes, so a resumed run may change them; the reason for each, and why the other
#: ``cluster`` keys stay refused: docs/design.md, "Outputs".
WHERE_KEYS = (
    "cluster.address",
    "cluster.actors",
    "cluster.worker_cpus",
    "cluster.placement",
    "cluster.timeout",
    "cluster.dashboard",
)


def config_text(cfg: DictConfig) -> str:
    """The parts of a config that must not change when a run is resumed, as YAML."""
    keep = {  # resolved in place: values may read the free keys (``${paths.data_dir}``)
        k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
        for k in cfg
        if k not in FREE_KEYS
    }
    return OmegaConf.to_yaml(OmegaConf.create(keep))


def check_run_dir(cfg: DictConfig, run_dir: Path) -> dict[str, tuple[Any, Any]]:
    """Raise :class:`ConfigError` unless ``cfg`` may write into ``run_dir``.

    Returns the :data:`WHERE_KEYS` a resume changes (:func:`check_resume`).
    """
    if cfg.resume:
        return check_resume(cfg, run_dir)
    held = _held(run_dir)
    if held:
        resumable = (
            "continue it with resume=true"
            if "checkpoint.pt" in held
            else ("it has no checkpoint.pt to resume from: move it away")
        )
        raise ConfigError(
            f"hydra.run.dir={run_dir} already holds a run ({', '.join(held)}); {resumable}, "
            "or choose another directory."
        )
    return {}


def check_resume(cfg: DictConfig, run_dir: Path) -> dict[str, tuple[Any, Any]]:
    """``resume=true`` needs a readable checkpoint in ``run_dir`` written by the same config.

    Returns the :data:`WHERE_KEYS` that differ: ``{key: (in the run, now)}``.
    """
    path = run_dir / "checkpoint.pt"
    if not path.is_file():
        raise ConfigError(
            f"resume=true but {path} does not exist; point hydra.run.dir at the run directory "
            "to continue (its checkpoint.pt), or drop resume."
        )
    try:  # mmap: only the config is read, however large the checkpoint
        checkpoint = load_checkpoint(path, mmap=True)
        saved = checkpoint["config"]
    except Exception as exc:  # arbitrary bytes make the unpickler raise almost anything
        raise ConfigError(  # torch's own message suggests weights_only=False: unsafe advice
            f"resume=true but {path} is not a readable gclab checkpoint ({type(exc).__name__}); "
            "it may be truncated or from another program: restore it or drop resume."
        ) from None
    before, after = _leaves(OmegaConf.create(saved)), _leaves(OmegaConf.create(config_text(cfg)))
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    changed = [k for k in differ if k not in WHERE_KEYS]
    if changed:
        described, only_new_keys = _differences(before, after, changed)
        advice = (
            "an older gclab without these keys wrote it: finish it with that version, or "
            "start the run again in another directory"
            if only_new_keys
            else "resume with the same overrides as the run (its .hydra/overrides.yaml)"
        )
        raise ConfigError(
            f"resume=true but the config differs from the one that wrote {path} "
            f"({described}); {advice}."
        )
    if "coding" not in checkpoint:
        raise ConfigError(
            f"resume=true but {path} holds no coding state (an older gclab wrote it); "
            "start the run again in another directory."
        )
    return {k: (before.get(k), after.get(k)) for k in differ}


def _differences(
    before: dict[str, Any], after: dict[str, Any], keys: list[str], shown: int = 3
) -> tuple[str, bool]:
    """``"train.lr: 0.05 in the run, 0.1 now"`` for the first ``shown`` of ``keys``, and
    whether every one is a key the run's config did not have."""
    parts = [
        f"{k}: {before.get(k, 'unset')} in the run, {after.get(k, 'unset')} now"
        for k in keys[:shown]
    ]
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return "; ".join(parts) + more, all(k not in before for k in keys)


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of every leaf of a config."""
    if not OmegaConf.is_dict(node):
        return {prefix.rstrip("."): node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(_leaves(value, f"{prefix}{key}."))
    return out


def segment_subdir(run_dir: Path) -> str:
    """``.hydra-resume-<k>``, the first ``k`` not taken: the record of a resumed segment."""
    k = 1
    while (run_dir / f".hydra-resume-{k}").exists():
        k += 1
    return f".hydra-resume-{k}"


class RunDirGuard(Callback):
    """Hydra callback (``hydra.callbacks`` in ``gclab/conf/config.yaml``) guarding the record.

    Hydra calls it with the composed config before it creates or writes the run
    directory, so a refusal here leaves the directory untouched. Hydra turns an
    exception raised in a callback into a warning and runs the job anyway, so the
    process ends here: a refusal with the :class:`ConfigError`'s line and exit code 2
    (:func:`gclab.cli.fail`), anything else (a bug) with its traceback and exit code 1.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _ending_on_error(self.check_run, config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _ending_on_error(self.check_sweep, config)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        release(Path(config.hydra.run.dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        release(Path(config.hydra.sweep.dir))

    @staticmethod
    def check_run(config: DictConfig) -> None:
        """Lock the run directory, refuse a run that would overwrite a record, and give
        a resumed segment its own (noting the where-keys it changes)."""
        HydraConfig.instance().set_config(config)  # lets hydra.run.dir use ${hydra:...}
        run_dir = Path(config.hydra.run.dir)
        moved: dict[str, tuple[Any, Any]] = {}
        take(
            run_dir,
            f"hydra.run.dir={run_dir}",
            lambda: moved.update(check_run_dir(config, run_dir)),
        )
        if config.resume:
            subdir = segment_subdir(run_dir)
            with read_write(config.hydra):
                config.hydra.output_subdir = subdir
            if moved:
                note_changes(run_dir / subdir, moved)

    @staticmethod
    def check_sweep(config: DictConfig) -> None:
        """Lock the sweep directory, refuse ``resume`` in a sweep and a sweep directory
        that holds runs."""
        sweep_dir = Path(config.hydra.sweep.dir)
        take(sweep_dir, f"hydra.sweep.dir={sweep_dir}", lambda: RunDirGuard.check_new_sweep(config))

    @staticmethod
    def check_new_sweep(config: DictConfig) -> None:
        """Refuse ``resume`` in a sweep, and a sweep directory that holds runs."""
        overrides = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        swept = {str(key) for key in (config.hydra.sweeper.get("params") or {})}
        if config.resume or "resume" in swept or any(o.key_or_group == "resume" for o in overrides):
            raise ConfigError(
                "resume=true continues one run, not a sweep: resume each job without -m, "
                "with hydra.run.dir=<its directory> and its overrides."
            )
        sweep_dir = Path(config.hydra.sweep.dir)
        held = sorted({p.parent for name in RECORDS for p in sweep_dir.rglob(name)})
        held = [str(run) for run in held if _held(run)]
        if held:
            raise ConfigError(
                f"hydra.sweep.dir={sweep_dir} already holds {len(held)} run(s), e.g. "
                f"{held[0]}; choose another directory."
            )


def note_changes(segment: Path, moved: dict[str, tuple[Any, Any]]) -> None:
    """Write ``changed.yaml`` (``key: {run: ..., now: ...}``) into a resumed segment's record."""
    segment.mkdir(parents=True, exist_ok=True)
    changes = {key: {"run": was, "now": now} for key, (was, now) in moved.items()}
    (segment / "changed.yaml").write_text(OmegaConf.to_yaml(changes), encoding="utf-8")


def _ending_on_error(check: Callable[[DictConfig], None], config: DictConfig) -> None:
    try:
        check(config)
    except ConfigError as exc:
        fail(PREFIXES["config"], str(exc))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
