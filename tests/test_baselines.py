"""Tests for the baseline post-processors KNNCorrector and NPCCorrector."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from sklearn.neighbors import KNeighborsClassifier

from lsnpc import NotFittedError
from lsnpc.baselines import KNNCorrector, NPCCorrector
from lsnpc.metrics import micro_f1
from tests.conftest import make_toy_multilabel

FAST_NPC = dict(epochs=5, hidden_dim=64, batch_size=32, lr=5e-3, n_threads=1)


@pytest.fixture(scope="module")
def noisy_problem():
    """Toy labels and a base model that is confident everywhere but wrong on 20% of entries."""
    X, Y = make_toy_multilabel(n=800, d=4, n_labels=4, seed=0)
    rng = np.random.default_rng(1)
    P = np.where(Y == 1, 0.95, 0.05)
    P = np.where(rng.random(Y.shape) < 0.2, 1 - P, P)
    P = np.clip(P + rng.normal(0, 0.03, P.shape), 0, 1).astype(np.float32)
    split = {"train": slice(0, 500), "clean": slice(500, 600), "test": slice(600, 800)}
    return X, Y, P, split


def _chance_f1(Y: np.ndarray) -> float:
    """F1 of predicting every label positive (beats any random guess at this label density)."""
    return micro_f1(Y, np.ones(Y.shape))


def _reference_knn(X, P, Xq, k, weights, metric, low=0.1, high=0.9, label=0):
    confident = (P[:, label] < low) | (P[:, label] > high)
    model = KNeighborsClassifier(min(k, confident.sum()), weights=weights, metric=metric)
    model.fit(X[confident], (P[confident, label] > high).astype(int))
    return model.predict_proba(Xq)[:, 1]


# --- KNNCorrector ------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", ["distance", "uniform"])
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_knn_equals_per_label_scikit_learn(weights, metric):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    P = rng.random((300, 4))
    # Label 2 is rarely confident, so the shared candidates are widened for many queries.
    P[:, 2] = np.where(rng.random(300) < 0.06, np.round(P[:, 2]), 0.5)
    Xq, Pq = rng.normal(size=(40, 5)), rng.random((40, 4))
    knn = KNNCorrector(n_neighbors=7, weights=weights, metric=metric).fit(X, P)
    out = knn.predict_proba(Xq, Pq)
    assert out.shape == (40, 4) and out.dtype == np.float32
    for k in range(4):
        ref = _reference_knn(X, P, Xq, 7, weights, metric, label=k)
        np.testing.assert_allclose(out[:, k], ref, atol=1e-6, err_msg=f"label {k}")


def test_knn_widening_search_matches_scikit_learn_on_a_sparse_label():
    rng = np.random.default_rng(3)
    n = 2500  # 12 confident samples in 2500: the first search (capped at 512) misses many
    X = rng.normal(size=(n, 3))
    P = np.full((n, 2), 0.5)
    P[:, 0] = np.round(rng.random(n))
    sparse = rng.choice(n, 12, replace=False)
    P[sparse, 1] = np.tile([0.02, 0.98], 6)
    Xq = rng.normal(size=(60, 3))
    knn = KNNCorrector(n_neighbors=5).fit(X, P)
    out = knn.predict_proba(Xq, np.full((60, 2), 0.5))
    assert knn.n_train_per_label_.tolist() == [n, 12]
    for k in range(2):
        ref = _reference_knn(X, P, Xq, 5, "distance", "euclidean", label=k)
        np.testing.assert_allclose(out[:, k], ref, atol=1e-6)


def test_knn_returns_probabilities_not_hard_labels(noisy_problem):
    X, _, P, s = noisy_problem
    out = KNNCorrector().fit(X[s["train"]], P[s["train"]]).predict_proba(X[s["test"]], P[s["test"]])
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert ((out > 0.01) & (out < 0.99)).mean() > 0.1


@pytest.mark.parametrize("n_neighbors, gain", [(5, 0.02), (10, 0.04)])  # the paper's k; the authors' code's
def test_knn_corrects_noisy_predictions(noisy_problem, n_neighbors, gain):
    # the toy's flips are independent of X, so a vote over more neighbours averages more of them away
    X, Y, P, s = noisy_problem
    tr, te = s["train"], s["test"]
    knn = KNNCorrector(n_neighbors=n_neighbors).fit(X[tr], P[tr])
    base = micro_f1(Y[te], P[te])
    corrected = micro_f1(Y[te], knn.predict_proba(X[te], P[te]))
    assert corrected > base + gain
    assert corrected > _chance_f1(Y[te]) + 0.2
    np.testing.assert_array_equal(knn.predict(X[te], P[te]), knn.predict_proba(X[te], P[te]) >= 0.5)


def test_knn_falls_back_to_base_probabilities_for_one_class_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    P = rng.random((100, 3))
    P[:, 1] = 0.5 * P[:, 1]  # never > 0.9: no confident positive
    P[:, 2] = 0.5  # never confident at all
    knn = KNNCorrector().fit(X, P)
    assert knn.fallback_labels_.tolist() == [False, True, True]
    Pq = rng.random((10, 3)).astype(np.float32)
    out = knn.predict_proba(rng.normal(size=(10, 3)), Pq)
    np.testing.assert_array_equal(out[:, 1:], Pq[:, 1:])


def test_knn_clean_samples_join_with_their_true_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 2))
    P = np.full((50, 2), 0.5)  # nothing confident: alone, every label falls back
    X_clean = rng.normal(size=(30, 2))
    y_clean = (X_clean[:, :2] > 0).astype(int)
    knn = KNNCorrector(n_neighbors=5).fit(
        X, P, X_clean=X_clean, y_clean=y_clean, pred_probs_clean=np.full((30, 2), 0.5)
    )
    assert not knn.fallback_labels_.any()
    Xq = rng.normal(size=(20, 2))
    out = knn.predict_proba(Xq, np.full((20, 2), 0.5))
    for k in range(2):
        ref_model = KNeighborsClassifier(5, weights="distance").fit(X_clean, y_clean[:, k])
        ref = ref_model.predict_proba(Xq)[:, 1]
        np.testing.assert_allclose(out[:, k], ref, atol=1e-6)


# --- NPCCorrector ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_npc(noisy_problem):
    X, _, P, s = noisy_problem
    return NPCCorrector(random_state=0, **FAST_NPC).fit(X[s["train"]], P[s["train"]])


def test_npc_output_is_well_above_chance(fitted_npc, noisy_problem):
    X, Y, P, s = noisy_problem
    te = s["test"]
    out = fitted_npc.predict_proba(X[te], P[te])
    assert out.shape == Y[te].shape and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 1.0
    f1 = micro_f1(Y[te], out)
    assert f1 > _chance_f1(Y[te]) + 0.1
    assert f1 > micro_f1(Y[te], P[te]) - 0.05  # the paper: unsupervised NPC tracks the base model
    assert len(fitted_npc.loss_history_) == FAST_NPC["epochs"]
    assert fitted_npc.loss_history_[-1] < fitted_npc.loss_history_[0]


def test_npc_records_a_training_history_with_the_validation_curves_of_the_papers_figure_2(noisy_problem):
    X, Y, P, s = noisy_problem
    tr, va = s["train"], s["test"]
    plain = NPCCorrector(random_state=0, **FAST_NPC).fit(X[tr], P[tr])
    watched = NPCCorrector(random_state=0, **FAST_NPC).fit(X[tr], P[tr], X_val=X[va], y_val=Y[va], pred_probs_val=P[va])
    assert [e["epoch"] for e in watched.history_] == list(range(1, FAST_NPC["epochs"] + 1))
    assert {"loss", "val_loss", "val_clean_loss", "val_micro_f1", "val_macro_f1"} <= set(watched.history_[-1])
    assert all(0 <= e["val_micro_f1"] <= 1 and e["val_loss"] > 0 for e in watched.history_)
    # watching draws nothing: the fit is the one without a validation set
    np.testing.assert_array_equal(plain.predict_proba(X[va], P[va]), watched.predict_proba(X[va], P[va]))
    assert plain.loss_history_ == watched.loss_history_ and set(plain.history_[0]) == {"epoch", "loss"}
    with pytest.raises(ValueError, match="X_val, y_val and pred_probs_val go together"):
        NPCCorrector(**FAST_NPC).fit(X[tr], P[tr], X_val=X[va])


def test_npc_with_a_clean_set_improves_on_the_base_model(noisy_problem):
    X, Y, P, s = noisy_problem
    tr, cl, te = s["train"], s["clean"], s["test"]
    npc = NPCCorrector(beta=0.01, random_state=0, **{**FAST_NPC, "epochs": 10, "hidden_dim": 64})
    npc.fit(X[tr], P[tr], X_clean=X[cl], y_clean=Y[cl], pred_probs_clean=P[cl])
    assert micro_f1(Y[te], npc.predict_proba(X[te], P[te])) > micro_f1(Y[te], P[te]) + 0.08


def test_npc_same_seed_same_output_different_seed_different(fitted_npc, noisy_problem):
    X, _, P, s = noisy_problem
    tr, te = s["train"], s["test"]
    torch.manual_seed(99)
    before = torch.get_rng_state()
    threads = torch.get_num_threads()
    again = NPCCorrector(random_state=0, **FAST_NPC).fit(X[tr], P[tr])
    assert torch.equal(torch.get_rng_state(), before)  # the caller's torch RNG is untouched
    assert torch.get_num_threads() == threads  # n_threads is restored
    other = NPCCorrector(random_state=1, **FAST_NPC).fit(X[tr], P[tr])
    expected = fitted_npc.predict_proba(X[te], P[te])
    np.testing.assert_array_equal(again.predict_proba(X[te], P[te]), expected)
    assert not np.allclose(other.predict_proba(X[te], P[te]), expected)


def test_npc_without_copula_and_predict_thresholds(noisy_problem):
    X, _, P, s = noisy_problem
    npc = NPCCorrector(copula_rank=0, random_state=0, **{**FAST_NPC, "epochs": 2})
    npc.fit(X[:200], P[:200])
    proba = npc.predict_proba(X[:50], P[:50])
    np.testing.assert_array_equal(npc.predict(X[:50], P[:50], threshold=0.3), proba >= 0.3)


def test_npc_copula_correlates_label_samples():
    from lsnpc.baselines.npc import _NPCNetwork

    torch.manual_seed(0)
    net = _NPCNetwork(2, 3, 8, copula_rank=1)
    with torch.no_grad():
        net.copula_factor.copy_(torch.tensor([[3.0], [3.0], [-3.0]]))
        net.copula_log_diag.fill_(-5.0)
        u = net.correlated_uniforms(4000)
    assert u.min() > 0 and u.max() < 1
    assert abs(float(u.mean()) - 0.5) < 0.02  # uniform marginals
    corr = np.corrcoef(u.numpy().T)
    assert corr[0, 1] > 0.9 and corr[0, 2] < -0.9


# --- the shared interface: bad inputs ----------------------------------------------------------


def _make(cls):
    if cls is KNNCorrector:
        return KNNCorrector(n_neighbors=3)
    return NPCCorrector(random_state=0, **{**FAST_NPC, "epochs": 1})


def _good(n=40, d=3, L=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    P = np.round(rng.random((n, L))).clip(0.05, 0.95)
    return X, P


def _with_nan(X):
    X = X.copy()
    X[0, 0] = np.nan
    return X


def _clean(X, P, **override):
    """Clean-set keyword arguments (5 rows) with some replaced; None drops that argument."""
    kwargs = {"X_clean": X[:5], "y_clean": np.round(P[:5]), "pred_probs_clean": P[:5], **override}
    return {k: v for k, v in kwargs.items() if v is not None}


@pytest.mark.parametrize("cls", [KNNCorrector, NPCCorrector])
@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda X, P: (X[:-1], P, {}), "same number of samples"),
        (lambda X, P: (_with_nan(X), P, {}), "X contains NaN"),
        (lambda X, P: (X, P * 2, {}), "pred_probs must hold probabilities"),
        (lambda X, P: (X, np.where(P > 0.5, np.inf, P), {}), "pred_probs contains NaN or infinite"),
        (lambda X, P: (X, P[:, 0], {}), "pred_probs must be a 2-d"),
        (lambda X, P: (X, P, _clean(X, P, pred_probs_clean=None)), "pred_probs_clean"),
        (lambda X, P: (X, P, _clean(X, P, y_clean=None)), "y_clean"),
        (lambda X, P: (X, P, _clean(X, P, X_clean=None)), "X_clean"),
        (lambda X, P: (X, P, _clean(X, P, y_clean=P[:5])), "y_clean must hold only 0/1"),
        (lambda X, P: (X, P, _clean(X, P, X_clean=X[:5, :2])), "X_clean has 2 features"),
        (lambda X, P: (X, P, _clean(X, P, y_clean=np.ones((5, 3)))), "y_clean has 3 labels"),
        (lambda X, P: (X, P, _clean(X, P, y_clean=np.round(P[:4]))), "same number of samples"),
    ],
)
def test_fit_rejects_bad_inputs(cls, mutate, match):
    X, P = _good()
    X, P, kwargs = mutate(X, P)
    with pytest.raises(ValueError, match=match):
        _make(cls).fit(X, P, **kwargs)


@pytest.mark.parametrize("cls", [KNNCorrector, NPCCorrector])
def test_predict_checks_fit_state_and_shapes(cls):
    X, P = _good()
    with pytest.raises(NotFittedError):
        _make(cls).predict_proba(X, P)
    with pytest.raises(NotFittedError):
        _make(cls).predict(X, P)
    model = _make(cls).fit(X, P)
    with pytest.raises(ValueError, match="X has 4 features"):
        model.predict_proba(np.zeros((5, 4)), P[:5])
    with pytest.raises(ValueError, match="pred_probs has 3 labels"):
        model.predict_proba(X[:5], np.full((5, 3), 0.5))
    with pytest.raises(ValueError, match="same number of samples"):
        model.predict_proba(X[:5], P[:4])
    with pytest.raises(ValueError, match="pred_probs must hold probabilities"):
        model.predict_proba(X[:5], P[:5] - 1)
    with pytest.raises(ValueError, match="threshold"):
        model.predict(X[:5], P[:5], threshold=2.0)
    out = model.predict(X[:5], P[:5])
    assert out.dtype == np.int64 and set(np.unique(out)) <= {0, 1}


@pytest.mark.parametrize(
    "model, match",
    [
        (KNNCorrector(n_neighbors=0), "n_neighbors"),
        (KNNCorrector(low=0.9, high=0.1), "low must be <= high"),
        (KNNCorrector(weights="gaussian"), "weights"),
        (KNNCorrector(random_state="seed"), "random_state"),
        (NPCCorrector(beta=-1.0), "beta"),
        (NPCCorrector(epochs=0), "epochs"),
        (NPCCorrector(copula_rank=-1), "copula_rank"),
        (NPCCorrector(lr=0.0), "lr"),
        (NPCCorrector(device="tpu"), "device"),
        (NPCCorrector(n_threads=0), "n_threads"),
        (NPCCorrector(random_state=-3), "random_state"),
    ],
)
def test_bad_hyper_parameters_are_reported_at_fit(model, match):
    X, P = _good()
    with pytest.raises(ValueError, match=match):
        model.fit(X, P)


def test_count_threshold_meets_the_count_on_unlabelled_rows_where_given():
    # a forest scores its own training rows otherwise than new ones: where rows it never saw are given without
    # labels, the count (still the noisy labels') is met on them, as LSNPC meets it
    from sklearn.ensemble import RandomForestClassifier

    from lsnpc import simulate_noise
    from lsnpc.baselines import CountThreshold
    from lsnpc.corrector.threshold import count_threshold

    X, Y = make_toy_multilabel(500, 8, 4, seed=5)
    noisy = simulate_noise(Y[:300], "symmetric", 0.3, random_state=0)[0]
    forest = RandomForestClassifier(n_estimators=100, random_state=0).fit(X[:300], noisy)
    P = np.stack([p[:, 1] for p in forest.predict_proba(X)], axis=1).astype(np.float32)
    plain = CountThreshold().fit(X[:300], P[:300], labels=noisy)
    counted = CountThreshold().fit(X[:300], P[:300], labels=noisy, X_unlabelled=X[300:],
                                   pred_probs_unlabelled=P[300:])
    evidence, expected = counted.threshold_evidence_, float(noisy.sum(1).mean())
    assert (evidence["counted_on"], evidence["n_counted"]) == ("unlabelled rows", 200)
    assert (plain.threshold_evidence_["counted_on"], plain.threshold_evidence_["n_counted"]) == ("training rows", 300)
    assert evidence["expected_count"] == plain.threshold_evidence_["expected_count"] == expected
    assert counted.threshold_ == count_threshold(P[300:], expected, "auto", floor=0.05)[0] != plain.threshold_
    assert plain.threshold_ == count_threshold(P[:300], expected, "auto", floor=0.05)[0]
    assert float((P[300:] >= counted.threshold_).sum(1).mean()) == evidence["predicted_count"] <= expected
    with pytest.raises(ValueError, match="missing pred_probs_unlabelled"):
        CountThreshold().fit(X[:300], P[:300], X_unlabelled=X[300:400])
    with pytest.raises(ValueError, match="pred_probs_unlabelled has 2 labels, but pred_probs has 4"):
        CountThreshold().fit(X[:300], P[:300], X_unlabelled=X[300:400], pred_probs_unlabelled=P[300:400, :2])


def test_top_level_exports():
    import lsnpc

    assert lsnpc.KNNCorrector is KNNCorrector and lsnpc.NPCCorrector is NPCCorrector


def test_docstring_examples_run():
    import lsnpc.baselines.knn

    assert doctest.testmod(lsnpc.baselines.knn).failed == 0
