"""A fast version of the README's quality table: LSNPC raises test F1 of an MLP trained on noisy labels,
with and without clean labels, and loses next to nothing without noise (scene, one seed: a regression
guard; the evidence over data sets, sizes and seeds is benchmarks/bench_quality.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lsnpc import LSNPC, MLPClassifier, simulate_noise
from lsnpc.data import load_dataset, paper_splits
from lsnpc.metrics import macro_f1, micro_f1

def _gains(data_home: Path, rate: float, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Test (Δ micro-F1, Δ macro-F1) against the base MLP of LSNPC() with the ≈5% clean validation
    triple ("val") and without any clean label ("noval"); scene, symmetric noise at ``rate``."""
    train = load_dataset("scene", "train", data_home=data_home)
    test = load_dataset("scene", "test", data_home=data_home)
    X, Y = train.X, train.Y
    split = paper_splits(len(X), random_state=seed)
    tr, v0 = split["train"], split["val0"]
    Y_noisy = simulate_noise(Y[tr], "symmetric", rate, random_state=seed)[0] if rate else Y[tr]
    base = MLPClassifier(random_state=seed, n_threads=1).fit(X[tr], Y_noisy, X_val=X[v0], y_val=Y[v0])
    P_train, P_val, P_test = (base.predict_proba(a) for a in (X[tr], X[v0], test.X))
    gains = {}
    for mode, kwargs in (("val", dict(X_val=X[v0], y_val=Y[v0], pred_probs_val=P_val)), ("noval", {})):
        corrector = LSNPC(random_state=seed, epochs=25, n_threads=1).fit(X[tr], P_train, **kwargs)
        assert np.isfinite(corrector.predict_proba(test.X, P_test)).all()
        labels = corrector.predict(test.X, P_test)  # as a user gets them: at the fit's own threshold
        gains[mode] = (micro_f1(test.Y, labels) - micro_f1(test.Y, P_test),
                       macro_f1(test.Y, labels) - macro_f1(test.Y, P_test))
    return gains


@pytest.mark.slow
def test_lsnpc_improves_an_mlp_trained_on_noisy_scene(shared_data: Path) -> None:
    gains = _gains(shared_data, 0.3)
    for mode, (micro, macro) in gains.items():
        assert micro > 0.03 and macro > 0.03, (mode, micro, macro)


@pytest.mark.slow
def test_lsnpc_loses_next_to_nothing_without_noise(shared_data: Path) -> None:
    gains = _gains(shared_data, 0.0)
    assert min(gains["val"]) >= -0.005, gains  # the bar: at most 0.5 points lost with clean labels
    assert min(gains["noval"]) >= -0.01, gains  # and at most 1 point without
