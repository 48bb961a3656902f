"""The command line of both apps: checked and adjusted before Hydra reads it, and what
the process does when a run fails (one line for bad input, else a traceback).

Before Hydra reads the command line, :func:`prepare` does two things Hydra cannot do
by itself:

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

A validation failure (a :class:`ConfigError`, from :func:`prepare` or from the app, or
a schema error while Hydra composes the config: unknown option, misspelt key, wrong
type, a value outside its key's choices) prints one line and exits 2
(:func:`run_app`). A run stopped from outside (:class:`gclab.rundir.interrupts.Stop`: SIGINT,
SIGTERM, a lost Ray cluster) prints its one line and exits 130, 143 or 3. Anything
else is a bug or a failure of the environment: Python prints its traceback and the
process exits 1. Hydra would print schema errors on several lines and exit 1, so Hydra
is asked to re-raise (``HYDRA_FULL_ERROR=1``) and the error is reported here.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import ConfigCompositionException, HydraException, OverrideParseException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException, ValidationError

from gclab import CONF_DIR
from gclab.errors import REFUSED, ConfigError
from gclab.rundir.interrupts import Stop, stop_of

#: How each app's line for a validation failure starts (by primary config).
PREFIXES = {"config": "gclab: error: ", "sim": "gclab.sim: "}

#: Primary config of each app -> (its command, what it runs).
APPS = {
    "config": ("python -m gclab", "the training app"),
    "sim": ("python -m gclab.sim", "the simulator"),
}

#: Lines of Hydra/OmegaConf messages that only repeat where the error is.
NOISE = ("full_key:", "reference_type=", "object_type=")

#: OmegaConf's message for a value that is not a member of an Enum field's type.
CHOICE = re.compile(r"Invalid value '(?P<value>.*)', expected one of \[(?P<choices>.*)\]")

#: The Hydra config group of launchers.
LAUNCHER = "hydra/launcher"


def run_app(app: Callable[[], Any], config_name: str) -> None:
    """Run the ``@hydra.main`` function ``app`` on the :func:`prepared <prepare>` command line.

    Validation failures exit 2 with one line.
    """
    prefix = PREFIXES[config_name]
    try:
        sys.argv = prepare(sys.argv, config_name)
        with _hydra_reraises():
            app()
    except ConfigError as exc:
        fail(prefix, str(exc))
    except OverrideParseException as exc:  # the command line is not Hydra's override grammar
        fail(prefix, unparsable(sys.argv, exc))
    except ConfigCompositionException as exc:  # Hydra's wrapper of every schema error
        fail(prefix, other_app(config_name, sys.argv[1:]) or one_line(exc))
    except (Stop, Exception) as exc:  # a run stopped from outside: its line and exit code
        stop = stop_of(exc)
        if stop is None:
            raise
        print(f"{prefix.removesuffix('error: ')}{stop.reason}", file=sys.stderr)
        if stop.abandon:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(stop.code)
        sys.exit(stop.code)


def unparsable(argv: list[str], exc: OverrideParseException) -> str:
    """One sentence for a command-line override Hydra's grammar rejects, naming it."""
    parser = OverridesParser.create()
    culprit = str(exc).splitlines()[0]  # Hydra's own words, if no single argument fails
    for arg in (a for a in argv[1:] if not a.startswith("-")):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException:
            culprit = arg
            break
    return (
        f"cannot parse the override {culprit!r}: a value with characters such as "
        "~ * ? [ ] ( ) { } or spaces needs quotes, e.g. data.root='/path/with space', and "
        "a home directory is spelt $HOME/... (the shell does not expand ~ after '=')."
    )


def fail(prefix: str, message: str) -> NoReturn:
    """Print the one line of a validation failure and exit 2.

    A task function calls it itself for its own ConfigError: raised out of the job,
    Hydra would print a line of its own before it ("Error executing job ..."). So does a
    Hydra callback: Hydra turns what a callback raises into a warning and goes on.
    """
    print(f"{prefix}{message}", file=sys.stderr)
    sys.exit(REFUSED)


@contextmanager
def _hydra_reraises() -> Iterator[None]:
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["HYDRA_FULL_ERROR"]
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


def one_line(exc: BaseException) -> str:
    """A composition error and its causes on one line (option lists comma-separated).

    A value that is not one of its key's choices (an Enum field) gets the sentence the
    project's own checks write (:func:`invalid_choice`).
    """
    choice = invalid_choice(exc)
    if choice is not None:
        return choice
    heads, tails = [], []
    while exc is not None:
        lines = []
        for line in str(exc).split("\n"):
            if line.startswith("Config search path:"):
                break
            text = line.strip()
            if not text or text.startswith(NOISE):
                continue
            if line.startswith("\t") and lines:  # one option of a list
                lines[-1] += (" " if lines[-1].endswith(":") else ", ") + text
            else:
                lines.append(text)
        if lines:
            heads.append(lines[0].rstrip("."))
            tails += lines[1:]
        exc = exc.__cause__
    return ". ".join([": ".join(heads), *tails]).rstrip(".") + "."


def invalid_choice(exc: BaseException | None) -> str | None:
    """``<key>='<value>' is invalid: it must be one of <choices>.``, if a choice failed.

    OmegaConf rejects a value of an Enum field, when an override or a config file sets
    it, with a ValidationError that lists the valid names; Hydra wraps it.
    """
    while exc is not None:
        match = CHOICE.match(str(exc))
        if isinstance(exc, ValidationError) and exc.full_key and match:
            return (
                f"{exc.full_key}={match['value']!r} is invalid: "
                f"it must be one of {match['choices']}."
            )
        exc = exc.__cause__
    return None


def other_app(config_name: str, argv: list[str]) -> str | None:
    """The sentence for an ``experiment=`` of the other app, if that is what failed."""
    import gclab.config
    import gclab.sim.config  # noqa: F401  (both apps' schemas)

    tokens = [a for a in argv if a.lstrip("+").startswith("experiment=")]
    for override in OverridesParser.create().parse_overrides(tokens):
        names = (
            list(override.sweep_string_iterator())
            if override.is_sweep_override()
            else [str(override.value())]
        )
        for name in names:
            if _composes(config_name, name):
                continue
            for other, (command, what) in APPS.items():
                if other == config_name or not _composes(other, name):
                    continue
                return (
                    f"experiment={name} belongs to {what} "
                    f"(gclab/conf/experiment/{name}.yaml): run it with {command} "
                    f"experiment={name}."
                )
    return None


def _composes(config_name: str, experiment: str) -> bool:
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            compose(config_name, overrides=[f"experiment={experiment}"])
    except (ConfigCompositionException, OmegaConfBaseException):
        return False
    return True


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
