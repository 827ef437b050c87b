"""LSNPC's prediction: a row's answer depends only on that row and the fitted model, and fit's
validation scoring, the guard and predict_proba compute it with one function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lsnpc import LSNPC
from lsnpc.data import load_dataset
from lsnpc.corrector.threshold import cross_fitted_predictions
from lsnpc.metrics import macro_f1, micro_f1
from lsnpc.model_selection import multilabel_folds

SMALL = dict(epochs=2, n_threads=1, latent_dim=8, label_embedding_dim=16, hidden_dim=32)


def _noisy_probs(Y: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(0.6 * Y + 0.2 + rng.normal(0, 0.2, Y.shape), 0, 1).astype(np.float32)


@pytest.fixture(scope="module")
def scene(shared_data: Path) -> dict[str, np.ndarray]:
    train = load_dataset("scene", "train", data_home=shared_data)
    test = load_dataset("scene", "test", data_home=shared_data)
    return {"X": np.asarray(train.X, np.float32), "P": _noisy_probs(train.Y, 0),
            "Xt": np.asarray(test.X, np.float32), "Pt": _noisy_probs(test.Y, 1)}


@pytest.mark.parametrize("feed", ["probs", "sample"])
def test_a_rows_prediction_is_the_same_alone_in_a_batch_shuffled_or_repeated(scene, feed) -> None:
    """On scene's 1,196 test rows (more than one prediction chunk): within 1e-5 everywhere."""
    model = LSNPC(random_state=0, predict_feed=feed, **SMALL).fit(scene["X"], scene["P"])
    X, P = scene["Xt"], scene["Pt"]
    batch = model.predict_proba(X, P)
    rows = np.arange(0, len(X), 7)
    alone = np.concatenate([model.predict_proba(X[i : i + 1], P[i : i + 1]) for i in rows])
    order = np.random.default_rng(0).permutation(len(X))
    shuffled = np.empty_like(batch)
    shuffled[order] = model.predict_proba(X[order], P[order])
    repeated = model.predict_proba(np.repeat(X[:1], 64, 0), np.repeat(P[:1], 64, 0))
    assert np.abs(alone - batch[rows]).max() <= 1e-5
    assert np.abs(shuffled - batch).max() <= 1e-5
    assert np.abs(repeated - batch[:1]).max() <= 1e-5
    assert np.abs(batch - P).max() > 0.05  # a real correction, not the input handed back


def test_prediction_reads_no_random_generator() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    P = rng.uniform(size=(120, 3)).astype(np.float32)
    model = LSNPC(random_state=0, **SMALL).fit(X, P)
    torch.manual_seed(1)
    state = torch.get_rng_state()
    first = model.predict_proba(X, P)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(2)
    np.testing.assert_array_equal(model.predict_proba(X, P), first)


def test_validation_scoring_guard_and_predict_agree(scene) -> None:
    """The selected epoch's validation F1 is the correction's at prediction; the blend test's is the output's
    (correction and student) that predict_proba gives before blending."""
    X, P = scene["X"], scene["P"]
    X_val, P_val = scene["Xt"][:300], scene["Pt"][:300]
    y_val = (P_val > 0.5).astype(np.int64)  # any labels will do: the numbers must agree
    model = LSNPC(random_state=0, **SMALL).fit(X, P, X_val=X_val, y_val=y_val, pred_probs_val=P_val)
    best = next(h for h in model.history_ if h["epoch"] == model.best_epoch_)
    corrected = model._raw_correct(X_val, P_val)
    assert best["val_micro_f1"] == micro_f1(y_val, corrected)
    assert best["val_macro_f1"] == macro_f1(y_val, corrected)
    assert best["val_tuned_micro_f1"] == micro_f1(y_val, corrected, best["val_threshold"])
    assert best["val_tuned_macro_f1"] == macro_f1(y_val, corrected, best["val_threshold"])
    output = model._output(X_val, P_val)
    evidence = model.report_["blend"].evidence
    # each blend judged at its own threshold tuned on the other folds, on the folds the fit drew
    folds = multilabel_folds(y_val, model.val_folds, np.random.default_rng(model.predict_seed_))
    for w, (micro, macro) in evidence["scores"].items():
        pred = cross_fitted_predictions(y_val, (1 - float(w)) * output + float(w) * P_val, folds)
        assert (micro, macro) == pytest.approx((micro_f1(y_val, pred), macro_f1(y_val, pred)), abs=1e-12)
    w = model.base_weight_
    np.testing.assert_allclose(model.predict_proba(X_val, P_val), (1 - w) * output + w * P_val, atol=1e-6)
