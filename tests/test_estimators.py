"""One contract for every estimator (LSNPC, the base classifiers, the baseline post-processors):
scikit-learn's BaseEstimator conventions, checked on each by the same tests."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, clone

from lsnpc import (
    ADDGCN, HLC, LSNPC, CorrectedLabelsClassifier, KNNCorrector, MLPClassifier, NotFittedError, NPCCorrector,
)
from lsnpc.baselines import CountThreshold
from tests.conftest import make_toy_multilabel


@dataclass(frozen=True)
class Case:
    """How to build a quick estimator and how to feed it: a classifier learns from labels, a corrector
    from a base model's probabilities."""

    make: Callable[..., Any]
    corrector: bool

    def fit(self, est: Any, data: dict[str, np.ndarray]) -> Any:
        if self.corrector:
            return est.fit(data["X"], data["P"])
        return est.fit(data["X"], data["y"])

    def predict_proba(self, est: Any, data: dict[str, np.ndarray]) -> np.ndarray:
        return est.predict_proba(data["X"], data["P"]) if self.corrector else est.predict_proba(data["X"])


CASES = {
    "LSNPC": Case(lambda **kw: LSNPC(**{"epochs": 2, **kw}), corrector=True),
    "MLPClassifier": Case(lambda **kw: MLPClassifier(**{"hidden_dims": (8,), "epochs": 2, **kw}), corrector=False),
    "ADDGCN": Case(lambda **kw: ADDGCN(**{"hidden_dim": 8, "epochs": 2, **kw}), corrector=False),
    "HLC": Case(lambda **kw: HLC(**{"hidden_dim": 8, "epochs": 3, "start": 1, **kw}), corrector=False),
    "KNNCorrector": Case(lambda **kw: KNNCorrector(**{"n_neighbors": 3, **kw}), corrector=True),
    "CountThreshold": Case(lambda **kw: CountThreshold(**kw), corrector=True),
    "NPCCorrector": Case(lambda **kw: NPCCorrector(**{"hidden_dim": 8, "epochs": 2, **kw}), corrector=True),
    # estimator=None: lsnpc's MLP, so that deep and shallow parameters agree as for the others
    "CorrectedLabelsClassifier": Case(lambda **kw: CorrectedLabelsClassifier(
        **{"corrector_params": {"epochs": 2, "warm_start": False}, **kw}), corrector=False),
}
NAMES = sorted(CASES)


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    X, y = make_toy_multilabel(n=64, d=5, n_labels=3, seed=4)
    P = np.clip(0.7 * y + 0.15 + np.random.default_rng(0).normal(0, 0.2, y.shape), 0, 1).astype(np.float32)
    return {"X": X, "y": y, "P": P}


def _constructor_params(est: Any) -> list[str]:
    return [p for p in inspect.signature(type(est).__init__).parameters if p != "self"]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.nn.Module):
        return type(a) is type(b) and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                                           b.state_dict().values(), strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", NAMES)
def test_is_a_scikit_learn_estimator_whose_params_are_the_constructors(name: str) -> None:
    est = CASES[name].make(random_state=3)
    assert isinstance(est, BaseEstimator)
    shallow, deep = est.get_params(deep=False), est.get_params(deep=True)
    assert list(shallow) == sorted(_constructor_params(est)) and deep == shallow
    assert all(getattr(est, key) is value for key, value in shallow.items())


@pytest.mark.parametrize("name", NAMES)
def test_constructor_only_stores_and_fit_names_a_bad_parameter(name: str, data: dict[str, np.ndarray]) -> None:
    case = CASES[name]
    for param in _constructor_params(case.make()):
        nonsense = object()
        est = case.make(**{param: nonsense})  # storing is all a constructor does: nothing to reject yet
        assert getattr(est, param) is nonsense
        with pytest.raises(ValueError, match=param):
            case.fit(est, data)


@pytest.mark.parametrize("name", NAMES)
def test_set_params_sets_and_rejects_unknown_names(name: str) -> None:
    est = CASES[name].make()
    param = "random_state"
    assert est.set_params(**{param: 11}) is est and est.get_params()[param] == 11
    with pytest.raises(ValueError, match="no_such_parameter"):
        est.set_params(no_such_parameter=1)


@pytest.mark.parametrize("name", NAMES)
def test_fit_returns_self_learns_only_underscored_attributes_and_keeps_params(
    name: str, data: dict[str, np.ndarray]
) -> None:
    case = CASES[name]
    est = case.make(random_state=0)
    before = dict(vars(est))
    params = est.get_params()
    assert case.fit(est, data) is est
    learned = {key for key in vars(est) if key not in before and not key.startswith("_")}
    assert learned and all(key.endswith("_") for key in learned), sorted(learned)
    assert all(_same(value, params[key]) for key, value in est.get_params().items())
    assert est.n_features_in_ == data["X"].shape[1] and est.n_labels_ == data["y"].shape[1]


@pytest.mark.parametrize("name", NAMES)
def test_predicting_before_fit_raises_not_fitted(name: str, data: dict[str, np.ndarray]) -> None:
    case = CASES[name]
    with pytest.raises(NotFittedError, match="fit"):
        case.predict_proba(case.make(), data)


@pytest.mark.parametrize("name", NAMES)
def test_clone_is_an_unfitted_copy_with_the_same_params(name: str, data: dict[str, np.ndarray]) -> None:
    case = CASES[name]
    fitted = case.fit(case.make(random_state=5), data)
    twin = clone(fitted)
    assert type(twin) is type(fitted) and twin is not fitted
    assert all(_same(value, fitted.get_params()[key]) for key, value in twin.get_params().items())
    assert not any(key.endswith("_") and not key.startswith("_") for key in vars(twin))
    with pytest.raises(NotFittedError):
        case.predict_proba(twin, data)
    # the clone, fitted on the same data, reproduces the original (same seed, same numbers)
    np.testing.assert_array_equal(case.predict_proba(case.fit(twin, data), data), case.predict_proba(fitted, data))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_output_and_the_output_is_probabilities(name: str, data: dict[str, np.ndarray]) -> None:
    case = CASES[name]
    first = case.predict_proba(case.fit(case.make(random_state=1), data), data)
    second = case.predict_proba(case.fit(case.make(random_state=1), data), data)
    np.testing.assert_array_equal(first, second)
    assert first.shape == data["y"].shape and first.dtype == np.float32
    assert first.min() >= 0 and first.max() <= 1


@pytest.mark.parametrize("name", NAMES)
def test_repr_shows_the_changed_parameters_and_rebuilds_the_estimator(name: str) -> None:
    est = CASES[name].make(random_state=7)
    cls = type(est)
    assert repr(cls()) == f"{cls.__name__}()"
    text = repr(est)
    assert text.startswith(f"{cls.__name__}(") and "random_state=7" in text
    rebuilt = eval(text, {cls.__name__: cls})  # noqa: S307 - our own repr of plain parameters
    assert rebuilt.get_params() == est.get_params()


def test_lsnpc_paper_preset_survives_repr_and_clone() -> None:
    paper = LSNPC.paper(random_state=0)
    assert " ".join(repr(paper).split()) == (
        "LSNPC(epochs=20, guard=False, min_val_rows=1, random_state=0, schedule='paper', student=False, "
        "threshold=0.5)")
    assert clone(paper).get_params() == paper.get_params()


def test_lsnpc_encoder_is_a_plain_parameter_that_clone_copies(data: dict[str, np.ndarray]) -> None:
    encoder = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU())
    est = LSNPC(encoder=encoder, epochs=1, random_state=0)
    # deep params do not descend into the module: its weights are not hyper-parameters
    assert est.get_params(deep=True) == est.get_params(deep=False)
    assert est.get_params()["encoder"] is encoder
    twin = clone(est)
    assert twin.encoder is not encoder and _same(twin.encoder, encoder)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    twin.fit(data["X"], data["P"])
    assert all(torch.equal(v, before[k]) for k, v in encoder.state_dict().items())  # the user's module is untouched
    assert "encoder=Sequential(" in repr(est)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("KNNCorrector", "CountThreshold")])  # no torch
def test_torch_estimators_default_to_one_thread_and_restore_the_callers(name: str, data: dict[str, np.ndarray]) -> None:
    """One thread by default: two threads were 3-5x slower on a busy 2-core machine and no faster on an idle one
    (docs/speed.md, "Threads"); the caller's torch setting is restored after fit and predict."""
    case = CASES[name]
    est = case.make(random_state=0)
    assert est.get_params()["n_threads"] == 1
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        case.fit(est, data)
        case.predict_proba(est, data)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


_READ_ONLY_SCRIPT = """
import sys, warnings
import numpy as np
warnings.filterwarnings("error", message="The given NumPy array is not writable")
from tests.test_estimators import CASES
from lsnpc.baselines import CountThreshold
from tests.conftest import make_toy_multilabel

X, y = make_toy_multilabel(n=64, d=5, n_labels=3, seed=4)
P = np.clip(0.7 * y + 0.15 + np.random.default_rng(0).normal(0, 0.2, y.shape), 0, 1).astype(np.float32)
data = {"X": X, "y": y, "P": P}
kept = {key: value.copy() for key, value in data.items()}
for value in data.values():
    value.setflags(write=False)
name, how = sys.argv[1], sys.argv[2]
case = CASES[name]
est = case.make(random_state=0)
if how == "plain":
    case.fit(est, data)
elif how == "validation":  # 16 rows: trained on as the clean set
    est.fit(X[:48], P[:48], X_val=X[48:], y_val=y[48:], pred_probs_val=P[48:])
else:  # the noisy labels choose the epoch and test the output
    est.fit(X, P, labels=y)
case.predict_proba(est, data)
assert all(np.array_equal(data[key], kept[key]) for key in data), "an input array changed"
print("quiet and untouched")
"""


@pytest.mark.parametrize("name, how", [*((name, "plain") for name in NAMES), ("LSNPC", "validation"),
                                       ("LSNPC", "labels")])
def test_read_only_inputs_are_read_quietly_and_left_as_they_were(name: str, how: str) -> None:
    """Features and probabilities from a read-only array (a memory-mapped file, say) fit and predict with
    no warning from torch about non-writable arrays, and come back unchanged. A fresh process each time:
    torch gives that warning once per process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _READ_ONLY_SCRIPT, name, how], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "quiet and untouched" in done.stdout
