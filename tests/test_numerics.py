"""The shared numerical conventions (lsnpc._numerics): standardisation and mini-batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.preprocessing import StandardScaler

from lsnpc._numerics import CONSTANT_SCALE, minibatches, standardization
from lsnpc._torch import seeded


def test_standardization_is_scikit_learns_on_ordinary_features() -> None:
    X = np.random.default_rng(0).normal(3.0, 2.0, size=(50, 4)).astype(np.float32)
    mean, scale = standardization(X)
    reference = StandardScaler().fit(X.astype(np.float64))
    np.testing.assert_allclose(mean, reference.mean_, rtol=1e-12)
    np.testing.assert_allclose(scale, reference.scale_, rtol=1e-12)
    assert mean.dtype == scale.dtype == np.float64


def test_a_constant_feature_gets_scale_one_and_so_does_rounding_noise() -> None:
    X = np.random.default_rng(1).normal(size=(30, 3))
    X[:, 1] = 7.0
    X[:, 2] = 5.0 + np.random.default_rng(2).normal(scale=CONSTANT_SCALE / 10, size=30)
    _, scale = standardization(X)
    assert scale[0] != 1.0 and scale[1] == 1.0 and scale[2] == 1.0


def test_maps_are_standardised_per_channel() -> None:
    maps = np.random.default_rng(3).normal(size=(6, 2, 3, 4))
    maps[:, 1] *= 10
    mean, scale = standardization(maps, (0, 2, 3))
    pixels = maps.transpose(0, 2, 3, 1).reshape(-1, 2)  # one row per pixel, one column per channel
    np.testing.assert_allclose(mean, pixels.mean(0))
    np.testing.assert_allclose(scale, pixels.std(0))


@pytest.mark.parametrize("n, batch_size, sizes", [(10, 4, [4, 4, 2]), (9, 4, [4, 4]), (8, 4, [4, 4]),
                                                  (1, 4, [1]), (3, 8, [3])])
def test_minibatches_cover_the_samples_and_drop_a_lone_trailing_one(n, batch_size, sizes) -> None:
    batches = minibatches(n, batch_size, torch.Generator().manual_seed(0))
    assert [len(b) for b in batches] == sizes
    seen = torch.cat(batches)
    assert len(set(seen.tolist())) == len(seen) and set(seen.tolist()) <= set(range(n))


def test_minibatches_are_shuffled_by_the_generator_and_reproducible() -> None:
    first = minibatches(100, 32, torch.Generator().manual_seed(5))
    again = minibatches(100, 32, torch.Generator().manual_seed(5))
    other = minibatches(100, 32, torch.Generator().manual_seed(6))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(torch.cat(first), torch.cat(other))
    assert not torch.equal(torch.cat(first), torch.arange(len(torch.cat(first))))
    # without a generator the global one draws the order, as inside lsnpc._torch.seeded
    with seeded(9):
        a = torch.cat(minibatches(50, 8))
    with seeded(9):
        assert torch.equal(a, torch.cat(minibatches(50, 8)))
