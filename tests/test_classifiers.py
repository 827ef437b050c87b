"""Tests of the base classifiers (lsnpc.classifiers): learning, trunk, checkpointing, determinism,
input validation, and quality on the real MULAN scene data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsnpc._validation import NotFittedError
from lsnpc.classifiers import ADDGCN, HLC, MLPClassifier
from lsnpc.classifiers.hlc import holistic_correction, holistic_scores
from lsnpc.metrics import macro_f1, micro_f1
from tests.conftest import make_toy_multilabel


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    # The test machine's two cores are shared: with two intra-op threads under load every parallel
    # region waits for a descheduled thread (measured 7x slower). Restored after this module.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def fast_mlp(**kw) -> MLPClassifier:
    params = dict(hidden_dims=(32,), epochs=15, batch_size=64, lr=3e-3, random_state=0)
    params.update(kw)
    return MLPClassifier(**params)


def fast_addgcn(**kw) -> ADDGCN:
    params = dict(hidden_dim=16, epochs=12, batch_size=64, lr=3e-3, random_state=0)
    params.update(kw)
    return ADDGCN(**params)


def fast_hlc(**kw) -> HLC:
    params = dict(hidden_dim=16, epochs=12, batch_size=64, lr=3e-3, start=8, random_state=0)
    params.update(kw)
    return HLC(**params)


FACTORIES = {"mlp": fast_mlp, "addgcn": fast_addgcn, "hlc": fast_hlc}


@pytest.fixture(scope="module")
def toy_split():
    X, Y = make_toy_multilabel(n=700, d=10, n_labels=4, seed=1)
    return X[:400], Y[:400], X[400:550], Y[400:550], X[550:], Y[550:]


@pytest.fixture(scope="module", params=sorted(FACTORIES))
def fitted(request, toy_split):
    Xtr, Ytr, Xva, Yva, _, _ = toy_split
    clf = FACTORIES[request.param]().fit(Xtr, Ytr, X_val=Xva, y_val=Yva)
    return request.param, clf


# ---------------------------------------------------------------------------- shared behaviour
def test_learns_separable_problem_well_above_chance(fitted, toy_split):
    _, clf = fitted
    *_, Xte, Yte = toy_split
    proba = clf.predict_proba(Xte)
    assert proba.shape == Yte.shape and proba.dtype == np.float32
    assert proba.min() >= 0.0 and proba.max() <= 1.0
    # predicting every label positive gives micro-F1 ~ 0.46 here (30% positives)
    assert micro_f1(Yte, clf.predict(Xte)) > 0.75


def test_predict_is_thresholded_proba(fitted, toy_split):
    _, clf = fitted
    X = toy_split[4]
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.predict(X, threshold=0.3), (proba >= 0.3).astype(np.int64))
    assert clf.predict(X).dtype == np.int64


def test_trunk_maps_X_to_embedding(fitted, toy_split):
    _, clf = fitted
    X = toy_split[4]
    with torch.no_grad():
        emb = clf.trunk_(torch.as_tensor(X))
    assert emb.shape == (len(X), clf.embedding_dim_)
    assert torch.isfinite(emb).all()
    assert clf.n_features_in_ == X.shape[1] and clf.n_labels_ == 4


def test_validation_checkpoint_is_recorded_best_epoch(fitted, toy_split):
    _, clf = fitted
    _, _, Xva, Yva, _, _ = toy_split
    f1s = clf.history_["val_micro_f1"]
    assert len(f1s) == len(clf.history_["train_loss"]) == clf.epochs
    assert clf.best_epoch_ == int(np.argmax(f1s))
    # the kept weights are those of the best epoch: they reproduce its recorded score
    assert micro_f1(Yva, clf.predict(Xva)) == pytest.approx(f1s[clf.best_epoch_], abs=1e-9)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_without_validation_keeps_last_epoch(name, toy_split):
    Xtr, Ytr = toy_split[:2]
    clf = FACTORIES[name](epochs=3).fit(Xtr[:120], Ytr[:120])
    assert clf.best_epoch_ == 2
    assert "val_micro_f1" not in clf.history_
    assert len(clf.history_["train_loss"]) == 3


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_same_random_state_gives_identical_predictions(name, toy_split):
    Xtr, Ytr = toy_split[0][:150], toy_split[1][:150]
    Xte = toy_split[4]
    a = FACTORIES[name](epochs=3, random_state=7).fit(Xtr, Ytr).predict_proba(Xte)
    torch.manual_seed(123)  # the global RNG state must not matter
    b = FACTORIES[name](epochs=3, random_state=7).fit(Xtr, Ytr).predict_proba(Xte)
    c = FACTORIES[name](epochs=3, random_state=8).fit(Xtr, Ytr).predict_proba(Xte)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_refit_on_other_shapes_replaces_the_model(name):
    X, Y = make_toy_multilabel(n=40, d=6, n_labels=3, seed=0)
    X2, Y2 = make_toy_multilabel(n=30, d=4, n_labels=2, seed=1)
    clf = FACTORIES[name](epochs=1).fit(X, Y)
    with pytest.raises(ValueError, match="X_val"):  # a failed refit keeps the fitted model
        clf.fit(X2, Y2, X_val=X, y_val=Y2[:1])
    assert clf.predict_proba(X).shape == (40, 3)
    clf.fit(X2, Y2)
    assert clf.predict_proba(X2).shape == (30, 2) and clf.n_features_in_ == 4


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_fit_leaves_global_rng_alone(name, toy_split):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    FACTORIES[name](epochs=1).fit(toy_split[0][:50], toy_split[1][:50])
    np.testing.assert_array_equal(torch.rand(3).numpy(), expected.numpy())


def bad_fit_inputs(X, Y):
    Xn = X.copy()
    Xn[0, 0] = np.nan
    Xi = X.copy()
    Xi[1, 1] = np.inf
    Y2 = Y.copy()
    Y2[0, 0] = 2
    return {
        "n_mismatch": (dict(X=X, y=Y[:-1]), "same number of samples"),
        "nan_X": (dict(X=Xn, y=Y), "NaN or infinite"),
        "inf_X": (dict(X=Xi, y=Y), "NaN or infinite"),
        "labels_not_binary": (dict(X=X, y=Y2), "0/1"),
        "one_sample": (dict(X=X[:1], y=Y[:1]), "at least 2"),
        "X_1d": (dict(X=X[:, 0], y=Y), "X must (be a 2-d|have shape)"),
        # a 1-d y is one binary label, as in scikit-learn; a 1-d y of several classes is not multilabel data
        "y_1d_multiclass": (dict(X=X, y=np.arange(len(Y)) % 3), "y is 1-d with 3 classes"),
        "X_3d": (dict(X=X[:, :, None], y=Y), "X must (be a 2-d|have shape)"),
        "X_val_without_y_val": (dict(X=X, y=Y, X_val=X), "together"),
        "X_val_wrong_d": (dict(X=X, y=Y, X_val=X[:, :-1], y_val=Y), "X_val"),
        "y_val_wrong_L": (dict(X=X, y=Y, X_val=X, y_val=Y[:, :-1]), "y_val"),
        "val_n_mismatch": (dict(X=X, y=Y, X_val=X[:-1], y_val=Y), "same number of samples"),
        "y_val_not_binary": (dict(X=X, y=Y, X_val=X, y_val=Y2), "y_val"),
    }


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize(
    "case", sorted(bad_fit_inputs(np.zeros((4, 3), np.float32), np.zeros((4, 2), int)))
)
def test_bad_fit_input_raises_naming_it(name, case):
    X, Y = make_toy_multilabel(n=20, d=6, n_labels=3, seed=0)
    kwargs, match = bad_fit_inputs(X, Y)[case]
    with pytest.raises(ValueError, match=match):
        FACTORIES[name](epochs=1).fit(kwargs.pop("X"), kwargs.pop("y"), **kwargs)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_predict_before_fit_and_with_wrong_d(name, toy_split):
    clf = FACTORIES[name](epochs=1)
    X = toy_split[0][:30]
    with pytest.raises(NotFittedError):
        clf.predict_proba(X)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    clf.fit(X, toy_split[1][:30])
    with pytest.raises(ValueError, match="fitted with"):
        clf.predict_proba(X[:, :-1])
    with pytest.raises(ValueError, match="NaN"):
        clf.predict_proba(np.full_like(X, np.nan))
    with pytest.raises(ValueError, match="threshold"):
        clf.predict(X, threshold=1.5)


@pytest.mark.parametrize(
    "param, value",
    [
        ("epochs", 0),
        ("batch_size", 0),
        ("lr", 0.0),
        ("weight_decay", -1.0),
        ("standardize", "yes"),
        ("device", "tpu"),
        ("random_state", -1),
        ("verbose", "loud"),
        ("n_threads", 0),
    ],
)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_bad_hyperparameter_raises_naming_it(name, param, value):
    X, Y = make_toy_multilabel(n=20, d=6, n_labels=3, seed=0)
    with pytest.raises(ValueError, match=param):
        FACTORIES[name](**{param: value}).fit(X, Y)


class ThreadRecordingMLP(MLPClassifier):
    """Records torch's thread count inside the training loop (the epoch-labels hook)."""

    def _labels_for_epoch(self, epoch, network, X, labels):
        self.seen_threads = torch.get_num_threads()
        return labels


def test_n_threads_applies_during_fit_and_is_restored():
    X, Y = make_toy_multilabel(n=40, d=6, n_labels=3, seed=0)
    before = torch.get_num_threads()
    clf = ThreadRecordingMLP(epochs=1, n_threads=before + 1, random_state=0).fit(X, Y)
    assert clf.seen_threads == before + 1
    assert torch.get_num_threads() == before
    clf.predict_proba(X)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("name", ["mlp", "addgcn"])
def test_trunk_starts_an_lsnpc_data_encoder(name):
    # the point of trunk_: LSNPC deep-copies and fine-tunes it; the base model stays untouched
    from lsnpc import LSNPC

    X, Y = spatial_toy(120) if name == "addgcn" else make_toy_multilabel(n=120, d=6, n_labels=3)
    clf = FACTORIES[name](epochs=2).fit(X, Y)
    proba = clf.predict_proba(X)
    corrector = LSNPC(encoder=clf.trunk_, epochs=1, random_state=0).fit(X, proba)
    assert corrector.predict_proba(X, proba).shape == proba.shape
    np.testing.assert_array_equal(clf.predict_proba(X), proba)


# ---------------------------------------------------------------------------- MLPClassifier
def test_mlp_linear_trunk_is_standardisation():
    X, Y = make_toy_multilabel(n=80, d=6, n_labels=3, seed=2)
    X = X * 5 + 3
    clf = MLPClassifier(hidden_dims=(), epochs=2, random_state=0).fit(X, Y)
    assert clf.embedding_dim_ == 6
    with torch.no_grad():
        Z = clf.trunk_(torch.as_tensor(X)).numpy()
    np.testing.assert_allclose(Z.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(Z.std(0), 1.0, atol=1e-4)


def test_mlp_trunk_maps_raw_X_without_standardize():
    X, Y = make_toy_multilabel(n=40, d=6, n_labels=3, seed=2)
    clf = MLPClassifier(hidden_dims=(), standardize=False, epochs=1, random_state=0).fit(X, Y)
    with torch.no_grad():
        np.testing.assert_array_equal(clf.trunk_(torch.as_tensor(X)).numpy(), X)


@pytest.mark.parametrize(
    "param, value", [("hidden_dims", (8, 0)), ("hidden_dims", "64"), ("dropout", 1.0)]
)
def test_mlp_bad_architecture_raises(param, value):
    X, Y = make_toy_multilabel(n=20, d=6, n_labels=3, seed=0)
    with pytest.raises(ValueError, match=param.split("_")[0]):
        MLPClassifier(**{param: value}).fit(X, Y)


def test_mlp_verbose_prints_epochs(capsys):
    X, Y = make_toy_multilabel(n=40, d=6, n_labels=3, seed=0)
    MLPClassifier(epochs=2, verbose=True, random_state=0).fit(X, Y, X_val=X, y_val=Y)
    err = capsys.readouterr().err
    assert "epoch 2/2" in err and "val micro-F1" in err


# ---------------------------------------------------------------------------- ADDGCN
def spatial_toy(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(n, 6, 3, 3) maps whose labels depend on where and how strongly channels fire."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6, 3, 3)).astype(np.float32)
    Y = np.stack(
        [
            X[:, 0].mean(axis=(1, 2)) > 0,
            X[:, 1].max(axis=(1, 2)) > 1.5,
            X[:, 2, 0, 0] + X[:, 3, 2, 2] > 0.5,
        ],
        axis=1,
    ).astype(np.int64)
    return X, Y


@pytest.fixture(scope="module")
def spatial_fitted():
    X, Y = spatial_toy(500)
    return fast_addgcn(epochs=15).fit(X[:350], Y[:350]), X[350:], Y[350:]


def test_addgcn_learns_on_spatial_maps(spatial_fitted):
    clf, Xte, Yte = spatial_fitted
    assert clf.input_shape_ == (6, 3, 3) and clf.n_features_in_ == 6
    # all-positive prediction scores ~0.6 micro-F1 here
    assert micro_f1(Yte, clf.predict(Xte)) > 0.72


def test_addgcn_trunk_pools_spatial_maps(spatial_fitted):
    clf, Xte, _ = spatial_fitted
    with torch.no_grad():
        emb = clf.trunk_(torch.as_tensor(Xte))
    assert emb.shape == (len(Xte), clf.embedding_dim_) == (len(Xte), 16)


def test_addgcn_scores_and_adjacency(spatial_fitted):
    clf, Xte, _ = spatial_fitted
    proba, adjacency = clf.scores_and_adjacency(Xte)
    assert proba.shape == (len(Xte), 3) and adjacency.shape == (len(Xte), 3, 3)
    np.testing.assert_allclose(proba, clf.predict_proba(Xte), atol=1e-6)
    assert adjacency.min() > 0.0 and adjacency.max() < 1.0
    # the graph is sample-specific (dynamic), not one shared matrix
    assert np.abs(adjacency - adjacency.mean(axis=0)).max() > 1e-3
    # predicted score = sigmoid of the average of the SAM and GCN logits (the paper's combination)
    with torch.no_grad():
        sam, gcn, _ = clf.network_.forward_parts(torch.as_tensor(Xte))
    np.testing.assert_allclose(proba, torch.sigmoid((sam + gcn) / 2).numpy(), atol=1e-6)


def test_addgcn_rejects_other_map_shapes(spatial_fitted):
    clf, Xte, _ = spatial_fitted
    with pytest.raises(ValueError, match="per-sample shape"):
        clf.predict_proba(Xte[:, :, :2, :])
    with pytest.raises(ValueError, match="per-sample shape"):
        clf.predict_proba(Xte.reshape(len(Xte), -1))
    with pytest.raises(ValueError, match=r"\(n_samples, C, H, W\)"):
        fast_addgcn().fit(Xte[:, :, :, 0], np.ones((len(Xte), 2), int))


def test_addgcn_trains_when_last_batch_has_one_sample():
    # BatchNorm in the dynamic graph cannot train on one sample: the lone sample sits the epoch out
    X, Y = make_toy_multilabel(n=17, d=5, n_labels=3, seed=3)
    clf = fast_addgcn(batch_size=8, epochs=2).fit(X, Y)
    assert np.isfinite(clf.history_["train_loss"]).all()


@pytest.mark.parametrize("param, value", [("hidden_dim", 0), ("max_grad_norm", -1.0)])
def test_addgcn_bad_architecture_raises(param, value):
    X, Y = make_toy_multilabel(n=20, d=6, n_labels=3, seed=0)
    with pytest.raises(ValueError, match=param):
        ADDGCN(**{param: value}).fit(X, Y)


# ---------------------------------------------------------------------------- HLC
def move_positives(Y: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """Symmetric multilabel noise: each positive moves to a random free label with prob. ``rate``."""
    rng = np.random.default_rng(seed)
    noisy = Y.copy()
    for i in range(len(Y)):
        for j in np.flatnonzero(Y[i]):
            free = np.flatnonzero(noisy[i] == 0)
            if rng.random() < rate and len(free):
                noisy[i, j] = 0
                noisy[i, rng.choice(free)] = 1
    return noisy


@pytest.fixture(scope="module")
def noisy_toy():
    X, Y = make_toy_multilabel(n=600, d=6, n_labels=5, seed=4)
    return X, Y, move_positives(Y, 0.3, seed=0)


def test_hlc_corrections_move_labels_towards_truth(noisy_toy):
    X, Y, Y_noisy = noisy_toy
    clf = HLC(hidden_dim=32, epochs=10, start=6, lr=5e-3, random_state=0).fit(X, Y_noisy)
    assert clf.n_corrected_.shape == (10,)
    assert clf.n_corrected_[:6].sum() == 0 and clf.n_corrected_.sum() > 0
    assert clf.history_["n_corrected"] == clf.n_corrected_.tolist()
    # corrections keep the number of positives per sample
    np.testing.assert_array_equal(clf.corrected_labels_.sum(1), Y_noisy.sum(1))
    errors_before = int((Y_noisy != Y).sum())
    errors_after = int((clf.corrected_labels_ != Y).sum())
    assert errors_after < errors_before * 0.95


def test_hlc_with_zero_delta_is_addgcn(noisy_toy):
    X, _, Y_noisy = noisy_toy
    hlc = fast_hlc(epochs=3, start=0, delta=0.0).fit(X[:200], Y_noisy[:200])
    add = fast_addgcn(epochs=3).fit(X[:200], Y_noisy[:200])
    assert hlc.n_corrected_.tolist() == [0, 0, 0]
    np.testing.assert_array_equal(hlc.corrected_labels_, Y_noisy[:200])
    np.testing.assert_array_equal(hlc.predict_proba(X[200:]), add.predict_proba(X[200:]))


def test_hlc_delta_schedule_is_the_authors():
    clf = HLC(delta=0.4, start=5, delta_decay=0.2)
    expected = [0.0] * 5 + [0.4 * max(0.0, 0.2 * (10 - e)) for e in range(5, 14)]
    np.testing.assert_allclose([clf.delta_at(e) for e in range(14)], expected, atol=1e-12)
    assert HLC(delta=0.3, start=2, delta_decay=0.0).delta_at(40) == 0.3


def test_holistic_scores_by_hand():
    probs = torch.tensor([[0.9, 0.2, 0.6]])
    adjacency = torch.tensor([[[0.5, 0.1, 0.3], [0.7, 0.5, 0.2], [0.9, 0.4, 0.5]]])
    sets = torch.tensor([[1.0, 0.0, 1.0]])
    # sums, as the authors': beta * (0.9 + 0.6) + (1 - beta) * (A[0,2] + A[2,0])
    expected = 0.25 * (0.9 + 0.6) + 0.75 * (0.3 + 0.9)
    assert holistic_scores(probs, adjacency, sets, 0.25).item() == pytest.approx(expected)
    # a single label has no pair: only the instance term counts
    single = torch.tensor([[0.0, 1.0, 0.0]])
    assert holistic_scores(probs, adjacency, single, 0.25).item() == pytest.approx(0.25 * 0.2)
    # three labels: every ordered pair off the diagonal, six of them
    everything = torch.ones(1, 3)
    pairs = adjacency.sum() - adjacency[0].diagonal().sum()
    assert holistic_scores(probs, adjacency, everything, 0.25).item() == pytest.approx(0.25 * 1.7 + 0.75 * pairs.item())


def test_holistic_correction_rule():
    probs = torch.tensor([[0.9, 0.1, 0.2], [0.9, 0.1, 0.2], [0.5, 0.45, 0.2], [0.9, 0.1, 0.2]])
    adjacency = torch.full((4, 3, 3), 0.5)
    labels = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    new, corrected = holistic_correction(probs, adjacency, labels, delta=0.4, beta=0.5)
    # 0: ratio 0.1/0.9 <= 0.4 -> replaced by the top-1 label; 1: already the prediction;
    # 2: ratio 0.45/0.5 > 0.4 -> kept; 3: no positives -> kept
    assert corrected.tolist() == [True, False, False, False]
    np.testing.assert_array_equal(new.numpy(), [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    "param, value", [("start", -1), ("delta", 1.5), ("delta_decay", -0.1), ("beta", 2.0)]
)
def test_hlc_bad_hyperparameter_raises(param, value):
    X, Y = make_toy_multilabel(n=20, d=6, n_labels=3, seed=0)
    with pytest.raises(ValueError, match=param):
        HLC(**{param: value}).fit(X, Y)


# ---------------------------------------------------------------------------- real data
def load_scene(shared_data):
    arff = pytest.importorskip("arff")

    def load(path):
        with open(path) as handle:
            data = np.array(arff.load(handle)["data"], dtype=np.float32)
        return data[:, :294], data[:, 294:].astype(np.int64)

    folder = shared_data / "scene"
    return (*load(folder / "scene-train.arff"), *load(folder / "scene-test.arff"))


@pytest.mark.slow
def test_mlp_reaches_paper_level_micro_f1_on_scene(shared_data):
    Xtr, Ytr, Xte, Yte = load_scene(shared_data)
    clf = MLPClassifier(random_state=0).fit(Xtr, Ytr)
    P = clf.predict(Xte)
    assert micro_f1(Yte, P) >= 0.70
    assert macro_f1(Yte, P) >= 0.70


@pytest.mark.slow
def test_hlc_corrects_symmetric_noise_on_scene(shared_data):
    from lsnpc.noise import simulate_noise

    Xtr, Ytr, Xte, Yte = load_scene(shared_data)
    Y_noisy, _ = simulate_noise(Ytr, "symmetric", 0.3, random_state=0)
    params = dict(hidden_dim=64, epochs=10, random_state=0)
    addgcn = ADDGCN(**params).fit(Xtr, Y_noisy)
    hlc = HLC(start=5, **params).fit(Xtr, Y_noisy)
    assert int((hlc.corrected_labels_ != Ytr).sum()) < 0.8 * int((Y_noisy != Ytr).sum())
    # measured: ADDGCN 0.59, HLC 0.71 test micro-F1
    assert micro_f1(Yte, hlc.predict(Xte)) > micro_f1(Yte, addgcn.predict(Xte)) + 0.05

