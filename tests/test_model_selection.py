"""Out-of-fold probabilities (lsnpc.model_selection)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from lsnpc import MLPClassifier, cross_val_pred_probs
from lsnpc.model_selection import multilabel_folds
from tests.conftest import make_toy_multilabel


def test_folds_cover_every_row_once_and_keep_label_shares() -> None:
    _, Y = make_toy_multilabel(500, 6, 5, seed=0)
    folds = multilabel_folds(Y, 5, random_state=0)
    tests = np.concatenate([test for _, test in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(len(Y)))
    for train, test in folds:
        assert np.intersect1d(train, test).size == 0
        # each label's positives split evenly: within one row of a fifth of them
        assert np.all(np.abs(Y[test].sum(0) - Y.sum(0) / 5) <= 1.5)
    again = multilabel_folds(Y, 5, random_state=0)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))


def test_each_row_is_scored_by_a_model_that_did_not_see_it() -> None:
    # 1-nearest-neighbour reproduces its training labels exactly; out of fold it cannot
    X, Y = make_toy_multilabel(300, 6, 4, seed=1)
    knn = KNeighborsClassifier(n_neighbors=1)
    P = cross_val_pred_probs(knn, X, Y, cv=3, random_state=0)
    assert P.shape == Y.shape and P.dtype == np.float32
    assert (P != Y).any()
    assert not hasattr(knn, "classes_")  # the estimator passed in is never fitted
    inside = KNeighborsClassifier(n_neighbors=1).fit(X, Y).predict(X)
    np.testing.assert_array_equal(inside, Y)


def test_mlp_out_of_fold_is_reproducible_and_accepts_index_lists() -> None:
    X, Y = make_toy_multilabel(200, 6, 4, seed=2)
    model = MLPClassifier(epochs=3, n_threads=1, random_state=0)
    P = cross_val_pred_probs(model, X, Y, cv=4, random_state=1)
    lists = [list(np.flatnonzero(row)) for row in Y]
    np.testing.assert_array_equal(P, cross_val_pred_probs(model, X, lists, cv=4, random_state=1))
    assert not hasattr(model, "network_")
    assert np.isfinite(P).all() and P.min() >= 0 and P.max() <= 1


def test_given_folds_and_bad_input() -> None:
    X, Y = make_toy_multilabel(60, 4, 3, seed=3)
    knn = KNeighborsClassifier(n_neighbors=3)
    halves = [(np.arange(30, 60), np.arange(30)), (np.arange(30), np.arange(30, 60))]
    assert cross_val_pred_probs(knn, X, Y, cv=halves).shape == Y.shape
    with pytest.raises(ValueError, match="cover each of the 60 rows"):
        cross_val_pred_probs(knn, X, Y, cv=halves[:1])
    with pytest.raises(ValueError, match="trains on some of its own test rows"):
        cross_val_pred_probs(knn, X, Y, cv=[(np.arange(60), np.arange(30)), (np.arange(30), np.arange(30, 60))])
    with pytest.raises(ValueError, match="cv must be >= 2"):
        cross_val_pred_probs(knn, X, Y, cv=1)
    with pytest.raises(ValueError, match="same number of samples"):
        cross_val_pred_probs(knn, X[:50], Y)
    with pytest.raises(ValueError, match="fit and predict_proba"):
        cross_val_pred_probs(object(), X, Y)
