"""LogitMapCorrector: a map of the base logits fitted on clean rows, that reads the other labels' probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from lsnpc import LogitMapCorrector
from lsnpc.baselines.logit_map import correlated_labels


def swapped_problem(n: int, seed: int):
    """X, P_train, P, Y: labels 0 and 1 follow each other's probability (a swap no threshold undoes), label 2
    its own, label 3 has 3 positives only; on the training rows (P_train, 2n rows) the base probabilities of
    labels 0 and 1 move together, as noise that mixes them makes them."""
    rng = np.random.default_rng(seed)
    P = rng.uniform(0.02, 0.98, size=(n, 4))
    Y = (rng.uniform(size=P.shape) < P[:, [1, 0, 2, 3]]).astype(int)
    Y[:, 3] = 0
    Y[:3, 3] = 1
    P_train = rng.uniform(0.02, 0.98, size=(2 * n, 4))
    P_train[:, 1] = np.clip(P_train[:, 0] + rng.normal(scale=0.05, size=2 * n), 0.02, 0.98)
    X = rng.normal(size=(n, 2))
    return X, P_train, P, Y


def test_the_map_learns_a_swap_and_leaves_labels_the_clean_rows_cannot_see_alone():
    X, P_train, P, Y = swapped_problem(600, 0)
    est = LogitMapCorrector(n_neighbours=1, penalty=1e-4, guard=False, random_state=0)
    est.fit(np.vstack([X, X]), P_train, X_clean=X[:400], y_clean=Y[:400], pred_probs_clean=P[:400])
    assert est.neighbours_.shape == (4, 1) and est.neighbours_[:2, 0].tolist() == [1, 0]
    assert est.mapped_labels_.tolist() == [True, True, True, False]
    assert est.report_["labels_mapped"] == 3 and est.report_["guard"] is None and est.base_weight_ == 0.0
    Q = est.predict_proba(X[400:], P[400:])
    swapped = P[400:, [1, 0]]
    assert np.abs(Q[:, :2] - swapped).mean() < np.abs(P[400:, :2] - swapped).mean() / 2
    np.testing.assert_allclose(Q[:, 3], P[400:, 3], rtol=1e-6)  # unmapped: the base probability back


def test_neighbours_are_the_most_correlated_other_labels():
    rng = np.random.default_rng(0)
    a = rng.normal(size=500)
    logits = np.stack([a, rng.normal(size=500), a + 0.1 * rng.normal(size=500)], axis=1)
    nb = correlated_labels(logits, 5)
    assert nb.shape == (3, 2)  # at most L - 1 others
    assert nb[0, 0] == 2 and nb[2, 0] == 0 and 1 not in nb[:, 0][[0, 2]]


def test_the_output_moves_with_the_other_labels_probabilities():
    X, P_train, P, Y = swapped_problem(600, 1)
    est = LogitMapCorrector(n_neighbours=1, guard=False, random_state=0)
    est.fit(np.vstack([X, X]), P_train, X_clean=X[:400], y_clean=Y[:400], pred_probs_clean=P[:400])
    moved = P[400:].copy()
    moved[:, 1] = P[400:, 1][::-1]  # only label 1's probabilities change
    diff = np.abs(est.predict_proba(X[400:], moved) - est.predict_proba(X[400:], P[400:]))
    assert diff[:, 0].mean() > 0.05  # label 0 reads label 1


def test_the_guard_hands_back_the_base_model_where_the_map_cannot_help():
    rng = np.random.default_rng(2)
    P = rng.uniform(0.02, 0.98, size=(300, 3))
    Y = (rng.uniform(size=P.shape) < P).astype(int)  # the base model is already right
    X = rng.normal(size=(300, 2))
    est = LogitMapCorrector(random_state=0).fit(X, P, X_clean=X[:200], y_clean=Y[:200], pred_probs_clean=P[:200])
    evidence = est.report_["guard"]
    assert set(evidence["scores"]) == {0.0, 0.5, 1.0} and evidence["folds"] == 5
    if est.base_weight_ == 1.0:
        np.testing.assert_allclose(est.predict_proba(X[200:], P[200:]), P[200:])
    assert 0 < est.threshold_ < 1
    again = LogitMapCorrector(random_state=0).fit(X, P, X_clean=X[:200], y_clean=Y[:200], pred_probs_clean=P[:200])
    np.testing.assert_array_equal(again.predict_proba(X[200:], P[200:]), est.predict_proba(X[200:], P[200:]))


def test_predict_decides_at_the_tuned_threshold():
    X, P_train, P, Y = swapped_problem(300, 3)
    est = LogitMapCorrector(guard=False, random_state=0)
    est.fit(np.vstack([X, X]), P_train, X_clean=X[:200], y_clean=Y[:200], pred_probs_clean=P[:200])
    Q = est.predict_proba(X[200:], P[200:])
    np.testing.assert_array_equal(est.predict(X[200:], P[200:]), (Q >= est.threshold_).astype(int))


def test_bad_input_is_named():
    X, _, P, Y = swapped_problem(100, 4)
    with pytest.raises(ValueError, match="needs clean rows"):
        LogitMapCorrector().fit(X, P)
    with pytest.raises(ValueError, match="penalty"):
        LogitMapCorrector(penalty=0).fit(X, P, X_clean=X, y_clean=Y, pred_probs_clean=P)
    with pytest.raises(ValueError, match="guard"):
        LogitMapCorrector(guard="yes").fit(X, P, X_clean=X, y_clean=Y, pred_probs_clean=P)
    with pytest.raises(ValueError, match=r"y_clean must have at least 2 \* val_folds = 10 rows, got 6"):
        LogitMapCorrector().fit(X, P, X_clean=X[:6], y_clean=Y[:6], pred_probs_clean=P[:6])
    est = LogitMapCorrector(guard=False, random_state=0).fit(X, P, X_clean=X, y_clean=Y, pred_probs_clean=P)
    with pytest.raises(ValueError, match="pred_probs"):
        est.predict_proba(X, P[:, :3])


def test_it_clones_as_a_scikit_learn_estimator():
    from sklearn.base import clone

    est = LogitMapCorrector(penalty=0.1, n_neighbours=3, guard=False, random_state=1)
    assert clone(est).get_params() == est.get_params()
