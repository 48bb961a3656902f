"""The config tree against the code: every option composes, and its YAML restates no default.

The schemas are derived from the constructors (:mod:`gclab.schemas`); an option's YAML
may only set values that differ from the code's defaults, each marked ``# differs:``
with a reason. Defaults the config layer sets itself are listed in :data:`CONFIG_ONLY`.
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest
from hydra.utils import get_object
from omegaconf import OmegaConf

from gclab import CONF_DIR
from gclab.coding.contract import SCHEMES, Scheme
from helpers.config import compose_config

GROUPS = ("scheme", "delay", "data", "model", "cluster", "logger")
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((CONF_DIR / g).glob("*.yaml"))]

#: Defaults that the config layer, not the constructor, gives (gclab/config.py).
CONFIG_ONLY = {
    ("model", "cnn"): {"num_classes": None},
    ("model", "resnet18"): {"num_classes": None},
}

#: Keys whose value another option supplies through the YAML's defaults list.
COMPOSED = {("delay", "composite"): {"compute", "loss"}}

#: Parameters the app passes when it builds the option (not config keys).
PASSED = {"scheme": {"n"}}


def code_defaults(target: str, group: str) -> dict[str, object]:
    """The constructor's parameters and defaults (``???`` where it has none); a dataclass
    default as its config node (its ``_target_`` and fields)."""
    return {
        p.name: "???" if p.default is inspect.Parameter.empty else _node(p.default)
        for p in parameters(get_object(target))
        if p.name not in PASSED.get(group, set())
    }


def parameters(target: object) -> list[inspect.Parameter]:
    """``target``'s parameters; a class's ``**kwargs`` stand for its base class's
    (``cluster=netns`` extends ``Cluster``: :func:`gclab.schemas.schema`'s ``base``)."""
    params = list(inspect.signature(target).parameters.values())
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD and isinstance(target, type):
        return params[:-1] + parameters(target.__mro__[1])
    return params


def _node(default: object) -> object:
    if dataclasses.is_dataclass(default) and not isinstance(default, type):
        kind = type(default)
        return {"_target_": f"{kind.__module__}.{kind.__qualname__}", **dataclasses.asdict(default)}
    return default


def yaml_values(group: str, option: str) -> tuple[dict[str, object], dict[str, str]]:
    """The option YAML's values (less defaults and ``_target_``) and each line's comment."""
    text = (CONF_DIR / group / f"{option}.yaml").read_text()
    raw = OmegaConf.to_container(OmegaConf.create(text), resolve=False)  # ${paths...} as written
    values = {k: v for k, v in raw.items() if k not in ("defaults", "_target_")}
    comments = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in values:
            comments[key] = rest.partition("#")[2].strip()
    return values, comments


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_with_the_code_defaults_and_marked_differences(
    group: str, option: str
) -> None:
    extra = ["data.root=/nowhere"] if option == "image_folder" else []
    node = compose_config([f"{group}={option}", *extra])[group]
    defaults = code_defaults(node._target_, group) | CONFIG_ONLY.get((group, option), {})
    values, comments = yaml_values(group, option)
    composed = OmegaConf.to_container(node)
    assert set(composed) - {"_target_"} == set(defaults), "schema keys != constructor parameters"
    for key, value in values.items():
        assert comments[key].startswith("differs:"), f"{key}: a YAML value needs '# differs: why'"
        assert value != defaults[key], f"{key}={value!r} restates the code's default"
    given = {k.split("=")[0].removeprefix(f"{group}.") for k in extra}
    skip = COMPOSED.get((group, option), set()) | set(values) | given
    for key, default in defaults.items():
        if key in skip:
            continue
        assert composed[key] == (list(default) if isinstance(default, tuple) else default), key


def test_every_scheme_class_has_an_option_that_builds_it() -> None:
    options = {o for g, o in OPTIONS if g == "scheme"}
    built_in = {name for name, cls in SCHEMES.items() if cls.__module__.startswith("gclab.")}
    assert options == built_in
    for name in sorted(built_in):
        cfg = compose_config([f"scheme={name}"]).scheme
        scheme = get_object(cfg._target_)(n=12, **{k: v for k, v in cfg.items() if k != "_target_"})
        assert isinstance(scheme, Scheme) and scheme.name == name and scheme.n == 12


def test_coding_and_network_import_neither_hydra_nor_torch() -> None:
    code = (
        "import sys, gclab.coding, gclab.network\n"
        "print(sorted(m for m in ('hydra', 'omegaconf', 'torch', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
