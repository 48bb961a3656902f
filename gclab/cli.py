"""The command line of both apps, checked and adjusted before Hydra reads it.

Two things Hydra cannot do by itself:

* **Shared keys of a swept group.** In ``-m scheme=classic_cr,pipelined_cr scheme.s=1``
  Hydra composes the sweep-level config with the group's *default* option (the sweep is
  expanded later, per job) and applies ``scheme.s=1`` to it, so the sweep dies with
  ``Key 's' not in 'UncodedConfig'`` before any job runs. Such an override is handed to
  every job instead (it becomes the one-value sweep ``scheme.s=choice(1)``, which each
  job receives as ``scheme.s=1``), after checking that every option the sweep chooses
  has the key: one that does not fails here, in one sentence naming the option and the
  key, before any job runs.
* **Launcher names.** ``hydra/launcher=<name>`` must name an installed launcher
  (``basic``, ``ray``, ...); another name fails in one sentence instead of Hydra's
  composition error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from omegaconf import DictConfig

from gclab import CONF_DIR
from gclab.errors import ConfigError

LAUNCHER = "hydra/launcher"


def prepare(argv: list[str], config_name: str) -> list[str]:
    """``argv`` (``sys.argv``) ready for Hydra; raises :class:`ConfigError` on bad input."""
    from hydra._internal.utils import get_args_parser  # what @hydra.main itself parses

    if "--version" in argv:
        return argv
    args = get_args_parser().parse_args(argv[1:])
    launcher = any(o.startswith(f"{LAUNCHER}=") for o in args.overrides)
    if args.config_path is not None or not (args.multirun or launcher):
        return argv
    extra = [] if args.config_dir is None else [Path(args.config_dir).absolute()]
    search = [f"hydra.searchpath=[file://{d}]" for d in extra]
    name = args.config_name or config_name
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        overrides = OverridesParser.create(config_loader=loader).parse_overrides(args.overrides)
        for override in overrides:
            if override.key_or_group == LAUNCHER:
                _check_launcher(override, loader.get_group_options(LAUNCHER))
        if not args.multirun:
            return argv
        groups = set(loader.list_groups(""))

        def compose_with(option: str) -> DictConfig:
            return compose(name, overrides=[*search, option])

        deferred = _shared_keys(overrides, groups, compose_with)
    return [argv[0], *(deferred.get(a, a) for a in argv[1:])]


def run(main: Callable[[], Any], config_name: str, prefix: str) -> None:
    """Call the Hydra ``main`` of an app on the prepared command line (exit 2 on bad input)."""
    try:
        sys.argv = prepare(sys.argv, config_name)
    except ConfigError as exc:
        print(f"{prefix}{exc}", file=sys.stderr)
        sys.exit(2)
    main()


def _check_launcher(override: Override, installed: list[str]) -> None:
    names = [override.value()] if isinstance(override.value(), str) else []
    for name in names:
        if name not in installed:
            raise ConfigError(
                f"{LAUNCHER}={name} is not an installed Hydra launcher; "
                f"valid: {', '.join(sorted(installed))}."
            )


def _shared_keys(
    overrides: list[Override], groups: set[str], compose_with: Callable[[str], DictConfig]
) -> dict[str, str]:
    """Plain overrides of keys of swept groups, as one-value sweeps: ``{line: new line}``.

    Every option a swept group takes must have every such key (swept keys included).
    """
    swept = {
        o.key_or_group: list(o.sweep_string_iterator())
        for o in overrides
        if o.is_sweep_override() and o.package is None and o.key_or_group in groups
    }
    deferred = {}
    for o in overrides:
        group, _, key = o.key_or_group.partition(".")
        if group not in swept or not key or o.type is not OverrideType.CHANGE:
            continue
        for option in swept[group]:
            try:
                node = compose_with(f"{group}={option}")[group]
            except HydraException:
                continue  # an option Hydra cannot compose: its own error comes per job
            if not _has_key(node, key):
                raise ConfigError(
                    f"{group}={option} has no key '{key}', so {o.input_line} cannot apply to "
                    f"every job of the sweep; leave {option} out of {group}=... or drop "
                    f"{o.key_or_group}."
                )
        if not o.is_sweep_override():
            line = o.input_line
            deferred[line] = f"{o.key_or_group}=choice({line.split('=', 1)[1]})"
    return deferred


def _has_key(node: DictConfig, dotted: str) -> bool:
    """Whether ``node`` has the (dotted) key, a ``???`` value included."""
    for part in dotted.split("."):
        if not isinstance(node, DictConfig) or part not in list(node):
            return False
        node = node._get_node(part)
    return True
