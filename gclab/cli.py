"""What both command-line apps do when a run fails: one line for bad input, else a traceback.

A validation failure (a :class:`ConfigError`, or a schema error while Hydra composes
the config: unknown option, misspelt key, wrong type) prints one line and exits 2.
Anything else is a bug or a failure of the environment: Python prints its traceback
and the process exits 1. Hydra would print schema errors on several lines and exit 1,
so Hydra is asked to re-raise (``HYDRA_FULL_ERROR=1``) and the error is reported here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf.errors import OmegaConfBaseException

from gclab import CONF_DIR
from gclab.errors import ConfigError

#: How each app's line for a validation failure starts (by primary config).
PREFIXES = {"config": "gclab: error: ", "sim": "gclab.sim: "}

#: Primary config of each app -> (its command, what it runs).
APPS = {
    "config": ("python -m gclab", "the training app"),
    "sim": ("python -m gclab.sim", "the simulator"),
}

#: Lines of Hydra/OmegaConf messages that only repeat where the error is.
NOISE = ("full_key:", "reference_type=", "object_type=")


def run_app(app: Callable[[], Any], config_name: str) -> None:
    """Run the ``@hydra.main`` function ``app``; validation failures exit 2 with one line."""
    prefix = PREFIXES[config_name]
    try:
        with _hydra_reraises():
            app()
    except ConfigError as exc:
        fail(prefix, str(exc))
    except ConfigCompositionException as exc:  # Hydra's wrapper of every schema error
        fail(prefix, other_app(config_name, sys.argv[1:]) or one_line(exc))


def fail(prefix: str, message: str) -> NoReturn:
    """Print the one line of a validation failure and exit 2.

    A task function calls it itself for its own ConfigError: raised out of the job,
    Hydra would print a line of its own before it ("Error executing job ..."). So does a
    Hydra callback: Hydra turns what a callback raises into a warning and goes on.
    """
    print(f"{prefix}{message}", file=sys.stderr)
    sys.exit(2)


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
    """A composition error and its causes on one line (option lists comma-separated)."""
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
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            compose(config_name, overrides=[f"experiment={experiment}"])
    except (ConfigCompositionException, OmegaConfBaseException):
        return False
    return True
