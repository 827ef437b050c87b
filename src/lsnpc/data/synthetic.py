"""A built-in multilabel problem that needs no files (for ``lsnpc demo`` and quick experiments).

Generative story (a latent factor model):

1. each sample has ``n_topics`` latent topic strengths  u ~ N(0, I);
2. label k has logit  u · w_k + ε_k  (ε_k ~ N(0, label_noise²)); w_k loads strongly on one topic
   (labels are assigned to topics round-robin) and weakly on the others, so labels that share a
   topic co-occur;
3. label k is on when its logit exceeds its (1 - p_k) quantile, with long-tailed frequencies
   p_k = max_frequency · (k + 1) ** (-tail_exponent): label 0 is common, the last ones rare;
4. the features are a noisy nonlinear function of the topics plus nuisance directions:
   x = [tanh(u A), s] B + δ,  s ~ N(0, I) (label-free),  δ ~ N(0, feature_noise²).

Train and test come from the same draw, so they share one distribution and one set of thresholds.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from lsnpc._validation import check_random_state, check_scalar
from lsnpc.data.dataset import MultilabelDataset

__all__ = ["make_synthetic"]

_HIDDEN = 32
_NUISANCE = 8


def make_synthetic(
    n_train: int = 3000,
    n_test: int = 1000,
    n_features: int = 64,
    n_labels: int = 12,
    *,
    n_topics: int = 4,
    max_frequency: float = 0.35,
    tail_exponent: float = 1.0,
    label_noise: float = 0.5,
    feature_noise: float = 0.3,
    random_state: Any = 0,
) -> dict[str, MultilabelDataset]:
    """Draw the synthetic multilabel problem.

    Parameters
    ----------
    n_train, n_test : int
        Number of training and test samples.
    n_features : int
        d, the feature dimension.
    n_labels : int
        L, the number of labels.
    n_topics : int
        Number of latent topics; fewer topics give more strongly correlated labels.
    max_frequency : float in (0, 1)
        Frequency of the most common label.
    tail_exponent : float >= 0
        How fast label frequencies fall with the label index (0 = all equally frequent).
    label_noise : float >= 0
        Standard deviation of the per-label logit noise (irreducible label uncertainty).
    feature_noise : float >= 0
        Standard deviation of the additive feature noise.
    random_state : None, int or numpy Generator
        Seed; the same seed gives the same data.

    Returns
    -------
    dict with keys "train" and "test"
        Each a :class:`MultilabelDataset` named ``"synthetic"`` with ``X`` float32 (n, n_features)
        and ``Y`` int64 (n, n_labels); label names ``label00``, ``label01``, ...
    """
    check_scalar(n_train, "n_train", kind=Integral, low=1)
    check_scalar(n_test, "n_test", kind=Integral, low=0)
    check_scalar(n_features, "n_features", kind=Integral, low=1)
    check_scalar(n_labels, "n_labels", kind=Integral, low=1)
    check_scalar(n_topics, "n_topics", kind=Integral, low=1)
    check_scalar(max_frequency, "max_frequency", kind=Real, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_scalar(tail_exponent, "tail_exponent", kind=Real, low=0.0)
    check_scalar(label_noise, "label_noise", kind=Real, low=0.0)
    check_scalar(feature_noise, "feature_noise", kind=Real, low=0.0)
    rng = check_random_state(random_state)
    n = n_train + n_test

    topics = rng.normal(size=(n, n_topics))
    loadings = 0.3 * rng.normal(size=(n_topics, n_labels))
    loadings[np.arange(n_labels) % n_topics, np.arange(n_labels)] += 2.0
    logits = topics @ loadings + label_noise * rng.normal(size=(n, n_labels))
    frequency = max_frequency * (np.arange(1, n_labels + 1, dtype=np.float64) ** -tail_exponent)
    thresholds = np.array([np.quantile(logits[:, k], 1.0 - frequency[k]) for k in range(n_labels)])
    Y = (logits > thresholds).astype(np.int64)

    mixing = rng.normal(scale=1.5 / np.sqrt(n_topics), size=(n_topics, _HIDDEN))
    hidden = np.concatenate([np.tanh(topics @ mixing), rng.normal(size=(n, _NUISANCE))], axis=1)
    projection = rng.normal(scale=1.0 / np.sqrt(hidden.shape[1]), size=(hidden.shape[1], n_features))
    X = hidden @ projection + feature_noise * rng.normal(size=(n, n_features))
    X = X.astype(np.float32)

    names = [f"label{k:02d}" for k in range(n_labels)]
    return {
        split: MultilabelDataset(
            X=X[rows], Y=Y[rows], label_names=names, name="synthetic", split=split, kind="features"
        )
        for split, rows in (("train", slice(0, n_train)), ("test", slice(n_train, n)))
    }
