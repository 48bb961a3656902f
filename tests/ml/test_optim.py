"""The staleness rule of ``train.stale_lr``."""

import pytest

from gclab.ml.optim import StaleLR, stale_weight


def test_scaled_weighs_a_gradient_by_one_over_one_plus_its_staleness():
    assert [stale_weight(StaleLR.scaled, tau) for tau in range(4)] == [1.0, 0.5, 1 / 3, 0.25]


def test_constant_keeps_every_gradient_at_full_weight():
    assert {stale_weight(StaleLR.constant, tau) for tau in range(4)} == {1.0}


def test_negative_staleness_is_a_bug():
    with pytest.raises(ValueError, match="staleness must be >= 0"):
        stale_weight(StaleLR.scaled, -1)
