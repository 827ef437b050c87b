"""A user's mistake reported as the user's: every refusal names the argument and says what was expected, and no
accepted input gives NaN or inf in an output.

Tests per mistake first, then a property-based sweep (hypothesis) over the public functions' inputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lsnpc import (
    LSNPC,
    CorrectedLabelsClassifier,
    KNNCorrector,
    MLPClassifier,
    NPCCorrector,
    correct_labels,
    cross_val_pred_probs,
    evaluate,
    simulate_noise,
    tune_threshold,
)
from lsnpc._validation import check_array, check_multilabel
from tests.conftest import make_toy_multilabel


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, Y = make_toy_multilabel(n=60, d=4, n_labels=3, seed=1)
    P = np.clip(0.7 * Y + 0.15 + np.random.default_rng(1).normal(0, 0.1, Y.shape), 0, 1).astype(np.float32)
    return X, Y, P


# -- one label column ------------------------------------------------------------------------------------------------
def test_one_label_column_goes_through_the_multilabel_folds(data: tuple[np.ndarray, ...]) -> None:
    X, Y, _ = data
    P = cross_val_pred_probs(MLPClassifier(hidden_dims=(4,), epochs=2, random_state=0), X, Y[:, :1], cv=3,
                             random_state=0)
    assert P.shape == (len(X), 1) and np.isfinite(P).all()
    clf = CorrectedLabelsClassifier(MLPClassifier(hidden_dims=(4,), epochs=2), cv=3, random_state=0,
                                    corrector_params={"epochs": 2, "warm_start": False, "student": False})
    assert clf.fit(X, Y[:, :1]).predict_proba(X).shape == (len(X), 1)


# -- silent wrong answers --------------------------------------------------------------------------------------------
def test_huge_finite_input_is_refused_not_answered_with_nan(data: tuple[np.ndarray, ...]) -> None:
    X, Y, _ = data
    clf = MLPClassifier(epochs=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=r"^X gave non-finite probabilities.*rescale X"):
        clf.predict_proba(np.full((1, X.shape[1]), 3e38))


def test_knn_on_huge_features_refuses_rather_than_vote_nan() -> None:
    X, Y = make_toy_multilabel(n=64, d=5, n_labels=3, seed=4)
    P = np.clip(0.7 * Y + 0.15 + np.random.default_rng(0).normal(0, 0.2, Y.shape), 0, 1).astype(np.float32)
    knn = KNNCorrector().fit(X * 1e19, P)  # distances overflow float32: weights 1/inf = 0, a vote of 0/0
    with pytest.raises(ValueError, match=r"^X gave non-finite probabilities for \d+ of 64 rows"):
        knn.predict_proba(X * 1e19, P)


@pytest.mark.parametrize("make", [lambda: KNNCorrector(n_neighbors=3), lambda: NPCCorrector(hidden_dim=4, epochs=1),
                                  lambda: LSNPC(epochs=1, student=False, warm_start=False)])
def test_complex_input_is_refused_by_name(make, data: tuple[np.ndarray, ...]) -> None:
    X, _, P = data
    with pytest.raises(ValueError, match=r"^X: Complex data not supported"):
        make().fit(X + 1j, P)
    with pytest.raises(ValueError, match=r"^pred_probs: Complex data not supported"):
        make().fit(X, P + 0j)


def test_a_finite_value_too_large_for_float32_is_not_called_nan(data: tuple[np.ndarray, ...]) -> None:
    X, Y, _ = data
    big = X.astype(np.float64)
    big[0, 0] = 1e39
    with pytest.raises(ValueError, match=r"X holds values too large for float32 \(largest magnitude 1e\+39"):
        MLPClassifier(epochs=1).fit(big, Y)


# -- column names ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["MLPClassifier", "KNNCorrector", "NPCCorrector"])
def test_every_estimator_records_column_names_and_refuses_reordered_ones(kind: str, data: tuple[np.ndarray, ...]
                                                                         ) -> None:
    X, Y, P = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    reordered = frame[frame.columns[::-1]]
    if kind == "MLPClassifier":
        est = MLPClassifier(hidden_dims=(4,), epochs=1).fit(frame, Y)
        predict = est.predict_proba
    else:
        est = (KNNCorrector(n_neighbors=3) if kind == "KNNCorrector" else NPCCorrector(hidden_dim=4, epochs=1))
        est.fit(frame, P)
        predict = lambda features: est.predict_proba(features, P)
    np.testing.assert_array_equal(est.feature_names_in_, frame.columns)
    predict(frame)
    with pytest.raises(ValueError, match="X has the columns .* in another order"):
        predict(reordered)


def test_retraining_meta_estimator_records_column_names(data: tuple[np.ndarray, ...]) -> None:
    X, Y, _ = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    clf = CorrectedLabelsClassifier(MLPClassifier(hidden_dims=(4,), epochs=1), cv=2, post_hoc=False).fit(frame, Y)
    np.testing.assert_array_equal(clf.feature_names_in_, frame.columns)
    with pytest.raises(ValueError, match="in another order"):
        clf.predict_proba(frame[frame.columns[::-1]])


# -- sparse input ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["MLPClassifier", "KNNCorrector", "LSNPC"])
def test_sparse_input_is_refused_with_a_clear_error(kind: str, data: tuple[np.ndarray, ...]) -> None:
    X, Y, P = data
    sparse_X = scipy.sparse.csr_matrix(X)
    with pytest.raises(TypeError, match=r"^X is a sparse matrix; sparse input is not supported"):
        if kind == "MLPClassifier":
            MLPClassifier(epochs=1).fit(sparse_X, Y)
        elif kind == "KNNCorrector":
            KNNCorrector().fit(sparse_X, P)
        else:
            LSNPC(epochs=1).fit(sparse_X, P)


# -- messages that mislead -------------------------------------------------------------------------------------------
def test_numbers_held_as_objects_are_read_as_numbers() -> None:
    out = check_array(np.array([[1, 2.5], [3, 4]], dtype=object), "X")
    np.testing.assert_array_equal(out, [[1, 2.5], [3, 4]])
    with pytest.raises(TypeError, match=r"^X must be a numeric array; an entry is not a number"):
        check_array(np.array([[1, {"a": 1}]], dtype=object), "X")


def test_pandas_missing_values_and_categories_are_named() -> None:
    nullable = pd.DataFrame({"a": pd.array([1.0, None], dtype="Float64"), "b": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"^X has missing values \(pd.NA or NaN\) in column 'a', row 1"):
        check_array(nullable, "X")
    np.testing.assert_array_equal(check_array(nullable.fillna(0.0), "X"), [[1, 1], [0, 2]])
    with pytest.raises(ValueError, match=r"^X column 'c' is categorical"):
        check_array(pd.DataFrame({"c": pd.Categorical(["x", "y"])}), "X")


@pytest.mark.parametrize("features", [scipy.sparse.csr_matrix(np.ones((4, 2))), 3.0])
def test_correct_labels_names_features_of_the_wrong_kind(features) -> None:
    Y = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])
    with pytest.raises((ValueError, TypeError), match=r"^features"):
        correct_labels(Y, np.full((4, 2), 0.5), features=features)


def test_tune_threshold_reads_a_float_zero_one_matrix_as_labels() -> None:
    curve = tune_threshold([[1.0, 0.0], [0.0, 1.0]], [[0.9, 0.2], [0.1, 0.8]])
    assert curve.best_score == pytest.approx(2.0)  # micro + macro F1, both perfect: read as the labels they are


@pytest.mark.parametrize("returns", [float("nan"), None])
def test_tune_threshold_names_a_scorer_that_returns_no_number(returns) -> None:
    with pytest.raises(ValueError, match=r"^scoring .* must return a finite number"):
        tune_threshold([[1, 0], [0, 1]], [[0.9, 0.2], [0.1, 0.8]], scoring=lambda y, p: returns)


def test_index_lists_that_repeat_an_index_are_refused() -> None:
    # 0/1 rows of unequal length read as index lists: [0, 1, 0] would silently mean labels 0 and 1
    with pytest.raises(ValueError, match=r"labels\[0\] repeats a class index"):
        check_multilabel([[0, 1, 0], [1, 0]], "labels", n_labels=3)


def test_validation_labels_may_be_index_lists_as_labels_may(data: tuple[np.ndarray, ...]) -> None:
    X, Y, P = data
    y_val = [list(np.flatnonzero(row)) for row in Y[:12]]
    est = LSNPC(epochs=1, student=False, warm_start=False, random_state=0)
    est.fit(X, P, X_val=X[:12], y_val=y_val, pred_probs_val=P[:12])
    assert np.isfinite(est.predict_proba(X, P)).all()


def test_all_zero_pred_probs_warn_of_a_flat_model(data: tuple[np.ndarray, ...]) -> None:
    X, _, P = data
    with pytest.warns(UserWarning, match="every entry is 0"):
        LSNPC(epochs=1, student=False, warm_start=False).fit(X, np.zeros_like(P))


def test_fit_leaves_each_part_of_a_callers_encoder_in_its_mode(data: tuple[np.ndarray, ...]) -> None:
    X, _, P = data
    encoder = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    encoder[1].eval()  # a frozen batch norm inside a module in train mode
    before = [module.training for module in encoder.modules()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        LSNPC(encoder=encoder, epochs=1, student=False, warm_start=False).fit(X, P)
    assert [module.training for module in encoder.modules()] == before


# -- the property: refusals name the argument, accepted inputs give finite outputs ----------------------------------
_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
_ODD_ARRAYS = st.one_of(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=_FLOATS),
    hnp.arrays(np.float64, st.tuples(st.integers(0, 8), st.integers(0, 4)),
               elements=st.floats(-1e40, 1e40, allow_nan=False)),
    hnp.arrays(np.int64, st.tuples(st.integers(0, 8), st.integers(0, 4)), elements=st.integers(-3, 3)),
    hnp.arrays(np.complex128, st.tuples(st.integers(1, 6), st.integers(1, 3))),
    st.lists(st.lists(st.integers(-2, 4), max_size=4), max_size=6),
    st.just(None), st.floats(), st.text(max_size=3),
    # inputs of the right shapes (6 rows; 2 labels, 3 features), so that some are accepted and their outputs checked
    hnp.arrays(np.int64, (6, 2), elements=st.integers(0, 1)),
    hnp.arrays(np.float64, (6, 2), elements=st.floats(0, 1)),
    hnp.arrays(np.float64, (6, 3), elements=st.floats(-3e38, 3e38)),
    hnp.arrays(np.float32, (6, 3), elements=st.floats(-1e6, 1e6, width=32)),
)


def _call(function: str, value, X: np.ndarray, Y: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, str]:
    """Call a public function with ``value`` in place of one argument; returns (an output, that argument)."""
    if function == "tune_threshold/probs":
        return np.asarray(tune_threshold(Y, value).scores), "probs"
    if function == "tune_threshold/y_true":
        return np.asarray(tune_threshold(value, P).scores), "y_true"
    if function == "evaluate/probs":
        return np.asarray(list(evaluate(Y, value).values()), dtype=float), "probs"
    if function == "knn/X":
        return KNNCorrector(n_neighbors=2).fit(value, P).predict_proba(value, P), "X"
    if function == "knn/pred_probs":
        return KNNCorrector(n_neighbors=2).fit(X, value).predict_proba(X, value), "pred_probs"
    if function == "mlp/X":
        return MLPClassifier(hidden_dims=(2,), epochs=1, random_state=0).fit(value, Y).predict_proba(value), "X"
    if function == "mlp/y":
        return MLPClassifier(hidden_dims=(2,), epochs=1, random_state=0).fit(X, value).predict_proba(X), "y"
    if function == "lsnpc/pred_probs":
        quick = LSNPC(epochs=1, student=False, warm_start=False, hidden_dim=4, latent_dim=2, label_embedding_dim=4)
        return quick.fit(X, value).predict_proba(X, value), "pred_probs"
    if function == "simulate_noise/Y":
        return simulate_noise(value, "symmetric", 0.3, random_state=0)[0], "Y"
    if function == "cross_val_pred_probs/labels":
        return cross_val_pred_probs(MLPClassifier(hidden_dims=(2,), epochs=1), X, value, cv=2, random_state=0), "labels"
    raise AssertionError(function)


_FUNCTIONS = ["tune_threshold/probs", "tune_threshold/y_true", "evaluate/probs", "knn/X", "knn/pred_probs",
              "mlp/X", "mlp/y", "lsnpc/pred_probs", "simulate_noise/Y", "cross_val_pred_probs/labels"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(function=st.sampled_from(_FUNCTIONS), value=_ODD_ARRAYS, seed=st.integers(0, 3))
def test_refusals_name_the_argument_and_accepted_inputs_give_finite_outputs(function, value, seed) -> None:
    rows = 6
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 3))
    Y = (rng.random((rows, 2)) < 0.5).astype(int)
    Y[0] = 1
    P = rng.random((rows, 2))
    argument = function.split("/")[1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, _ = _call(function, value, X, Y, P)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        named = argument in message or (argument == "pred_probs" and "y to be passed" in message)
        assert named or "same number of samples" in message, f"{function}: {type(exc).__name__}: {message}"
        return
    assert np.isfinite(np.asarray(out, dtype=np.float64)).all(), f"{function} accepted {value!r} and gave {out!r}"
