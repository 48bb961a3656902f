"""A scheme class states each setting's shape (load, T, packet fraction, description)
as the scheme built with it does: the fast search reads shapes instead of building
thousands of schemes (:meth:`gclab.coding.contract.Scheme.shape`)."""

from __future__ import annotations

import pytest

from gclab.coding.contract import SCHEMES, Shape
from helpers.coding import builtin_schemes

RECOVERY = ("decodable", "wait_all")


def built(name: str, n: int, params: dict) -> Shape:
    scheme = SCHEMES[name](n, **params)
    return Shape(scheme.load, scheme.T, scheme.packet_fraction, scheme.describe())


@pytest.mark.parametrize("name", builtin_schemes())
@pytest.mark.parametrize("n", [8, 12])
def test_every_grid_setting_s_shape_is_the_built_scheme_s(name: str, n: int) -> None:
    grids = [SCHEMES[name].search_grid(n, recovery) for recovery in RECOVERY]
    settings = [p for grid in grids if grid is not None for p in grid] or [{}]
    for params in {tuple(sorted(p.items())): p for p in settings}.values():
        assert SCHEMES[name].shape(n, **params) == built(name, n, params), params


@pytest.mark.parametrize("construction", ["rotation", "real", "tandon"])
def test_a_classic_cr_shape_names_its_construction(construction: str) -> None:
    params = {"s": 2, "construction": construction}
    assert SCHEMES["classic_cr"].shape(8, **params) == built("classic_cr", 8, params)
