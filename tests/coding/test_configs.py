"""gclab/conf/scheme/*.yaml match their registered schemas and instantiate with n from the app."""

from __future__ import annotations

import pytest
from hydra.core.config_store import ConfigStore
from hydra.utils import instantiate
from omegaconf import OmegaConf

import gclab.coding  # noqa: F401  (registers the schemas)
from gclab import CONF_DIR
from gclab.coding.base import Scheme

SCHEME_DIR = CONF_DIR / "scheme"
NAMES = [
    "uncoded", "ignore_stragglers", "classic_fr", "classic_cr", "cce_cr", "cce_fr",
    "pipelined_cr", "pipelined_fr", "sr_sgc", "m_sgc",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_yaml_matches_schema_and_instantiates(name: str) -> None:
    text = (SCHEME_DIR / f"{name}.yaml").read_text()
    assert text.startswith("# ")
    yaml = OmegaConf.create(text)
    assert list(yaml.defaults) == [f"/schema/scheme/{name}@_here_", "_self_"]
    schema = ConfigStore.instance().repo["schema"]["scheme"][f"{name}.yaml"].node
    params = {k: v for k, v in yaml.items() if k != "defaults"}
    assert set(params) == set(schema)
    cfg = OmegaConf.merge(schema, params)  # struct schema: unknown keys or bad types fail
    scheme = instantiate(cfg, n=12)
    assert isinstance(scheme, Scheme) and scheme.name == name and scheme.n == 12
