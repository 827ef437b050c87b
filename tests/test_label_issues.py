"""Label issues and corrected labels (lsnpc.label_issues, lsnpc.corrector.label_posterior) and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit, logit
from sklearn.metrics import average_precision_score, roc_auc_score

from lsnpc import LSNPC, MLPClassifier, correct_labels, cross_val_pred_probs, find_label_issues, label_quality_scores
from lsnpc._validation import check_multilabel
from lsnpc.corrector.label_posterior import (
    choose_neighbour_weight,
    choose_prior_weights,
    cooccurrence_lift,
    label_correction,
    label_prior,
    label_quality,
    neighbour_label_rates,
    review,
    swap_posterior,
    swap_relabel,
    swap_transition,
)
from lsnpc.data import load_dataset
from lsnpc.label_issues import fit_corrector
from lsnpc.noise import simulate_noise, transition_matrix
from tests.conftest import make_toy_multilabel

REPO = Path(__file__).resolve().parents[1]
FAST = {"epochs": 3, "warm_start": False, "n_threads": 1}


# ----------------------------------------------------------------------------- label formats


def test_index_lists_and_multi_hot_give_the_same_matrix() -> None:
    Y = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(check_multilabel([[0, 2], [], [1]], "labels", n_labels=3), Y)
    np.testing.assert_array_equal(check_multilabel(Y.tolist(), "labels", n_labels=3), Y)
    np.testing.assert_array_equal(check_multilabel(Y.astype(bool), "labels", n_labels=3), Y)


@pytest.mark.parametrize(
    ("labels", "n_labels", "message"),
    [
        ([[0, 3]], 3, "labels[0] holds class index 3, outside 0..2"),
        ([[1], [-1]], 3, "labels[1] holds class index -1"),
        ([[0.5]], 3, "integer class indices"),
        ([[0, 2], [1]], None, "needs the number of labels"),
        (np.array([[0, 2]]), 2, "only 0/1 labels"),
        (np.ones((2, 4)), 3, "4 label columns, but pred_probs has 3"),
    ],
)
def test_bad_labels_are_named(labels, n_labels, message) -> None:
    with pytest.raises(ValueError, match="labels") as info:
        check_multilabel(labels, "labels", n_labels=n_labels)
    assert message in str(info.value)


# ----------------------------------------------------------------------------- the swap channel


def test_identity_channel_trusts_every_given_label() -> None:
    given = np.array([[1, 0, 0], [0, 1, 1]])
    prior = np.full(given.shape, 0.5)
    np.testing.assert_allclose(swap_posterior(given, prior, np.eye(3)), given)


def test_swap_posterior_by_hand() -> None:
    # one row, given positive 0; true source 0 or 1 (T[1, 0] = 0.4), label 2 cannot produce 0
    T = np.array([[0.6, 0.4, 0.0], [0.4, 0.6, 0.0], [0.0, 0.0, 1.0]])
    prior = np.array([[0.5, 0.8, 0.3]])  # odds 1, 4, 3/7
    post = swap_posterior(np.array([[1, 0, 0]]), prior, T)
    stay = 0.6 * 1 / (0.6 * 1 + 0.4 * 4)
    np.testing.assert_allclose(post, [[stay, 1 - stay, 0.0]], atol=1e-9)
    # the most likely source of the given positive is label 1: the correction moves it there
    np.testing.assert_array_equal(swap_relabel(np.array([[1, 0, 0]]), prior, T), [[0, 1, 0]])


def test_balanced_relabelling_keeps_a_rare_labels_expected_count() -> None:
    """100 rows given the rare label 0, each a little more likely (about 0.55 against 0.45) to have come
    from the frequent label 1: the argmax moves all 100 away; the balanced relabelling moves only as
    many as label 1 has room for (its expected count, rounded up), so label 0 keeps about the 45 the
    posterior expects, and every row keeps one positive."""
    n = 100
    given = np.zeros((n, 3), dtype=np.int64)
    given[:, 0] = 1
    T = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    rng = np.random.default_rng(0)
    odds_1 = 0.55 / 0.45 * rng.uniform(0.9, 1.1, n)  # P(source = 1) near 0.55, a little different per row
    prior = np.column_stack([np.full(n, 0.5), odds_1 / (1 + odds_1), np.full(n, 1e-3)])
    source_1 = swap_posterior(given, prior, T)[:, 1]
    argmax = swap_relabel(given, prior, T, balance=False)
    assert argmax[:, 0].sum() == 0 and argmax[:, 1].sum() == n
    balanced = swap_relabel(given, prior, T)
    expected_0 = (1 - source_1).sum()
    assert abs(balanced[:, 0].sum() - expected_0) <= 1 and (balanced.sum(1) == 1).all()
    # the positives moved are the ones most likely to have come from label 1
    moved = balanced[:, 1] == 1
    assert source_1[moved].min() >= source_1[~moved].max()
    assert np.array_equal(swap_relabel(given, prior, T), balanced)  # deterministic


def test_balancing_leaves_counts_within_one_alone() -> None:
    """One given positive, its sources 0.27 / 0.73: each label has room for one (its expected count
    rounded up), so the balanced relabelling is the argmax."""
    T = np.array([[0.6, 0.4, 0.0], [0.4, 0.6, 0.0], [0.0, 0.0, 1.0]])
    prior = np.array([[0.5, 0.8, 0.3]])
    given = np.array([[1, 0, 0]])
    np.testing.assert_array_equal(swap_relabel(given, prior, T), swap_relabel(given, prior, T, balance=False))


@pytest.mark.parametrize("chunk_entries", [10**9, 7 * 6])  # one chunk; chunks of 7 positives (rows straddle)
def test_swap_posterior_equals_the_entry_by_entry_definition(monkeypatch, chunk_entries) -> None:
    """Each given positive's sources computed one at a time, a negative's chance of having been a source
    accumulated positive by positive (np.add.at): the chunked computation gives the same numbers, bit
    for bit, whether or not a row's positives fall into two chunks."""
    from lsnpc.corrector import label_posterior

    rng = np.random.default_rng(5)
    given = (rng.random((40, 6)) < 0.45).astype(np.int64)
    prior = rng.uniform(0.02, 0.98, given.shape)
    T = rng.dirichlet(np.ones(6), size=6) * 0.5 + np.eye(6) * 0.5
    odds = prior / (1 - prior)
    log_not_source, expected = np.zeros(given.shape), np.zeros(given.shape)
    for i, j in zip(*np.nonzero(given), strict=True):
        weight = T[:, j] * odds[i] * (1 - given[i])
        weight[j] = T[j, j] * odds[i, j]
        source = weight / weight.sum()
        expected[i, j] = source[j]
        np.add.at(log_not_source, i, np.log1p(-np.minimum(source, 1 - 1e-12)))
    expected = np.where(given == 1, expected, -np.expm1(log_not_source))
    monkeypatch.setattr(label_posterior, "_CHUNK_ENTRIES", chunk_entries)
    assert swap_posterior(given, prior, T).tobytes() == expected.tobytes()


def _noisy_views(true: np.ndarray, T: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Given labels drawn through the swap channel T, and probabilities a model trained on such labels
    would give: E[given | true] plus a little noise."""
    rng = np.random.default_rng(seed)
    given = np.zeros_like(true)
    for i, k in zip(*np.nonzero(true), strict=True):
        given[i, rng.choice(T.shape[1], p=T[k])] = 1
    expected = np.clip(true @ T, 0, 1)
    return given, np.clip(expected + rng.normal(0, 0.03, true.shape), 0.001, 0.999)


def test_swap_transition_finds_where_labels_go() -> None:
    # one label a row, pairflip at 30%: every row of T sends its moved mass to the next label
    true = np.eye(5, dtype=np.int64)[np.random.default_rng(0).integers(0, 5, 3000)]
    given, P = _noisy_views(true, transition_matrix("pairflip", 0.3, 5), seed=1)
    T = swap_transition(given, P, noise_rate=0.3)
    np.testing.assert_allclose(T.sum(1), 1.0)
    np.testing.assert_allclose(np.diag(T), 0.7)
    off = T - np.diag(np.diag(T))
    np.testing.assert_array_equal(off.argmax(1), (np.arange(5) + 1) % 5)
    assert (off.max(1) > 0.2).all()  # most of the 0.3 goes to the one destination
    # symmetric noise: no destination stands out
    given, P = _noisy_views(true, transition_matrix("symmetric", 0.3, 5), seed=2)
    off = swap_transition(given, P, noise_rate=0.3)
    off = off[~np.eye(5, dtype=bool)]
    assert off.max() < 2 * off.min()


def test_swap_transition_ignores_labels_a_row_was_given() -> None:
    # label 1 always comes with label 0 (and is given with it); 0's moved labels go to 2. A row's
    # probability on a label it was given is co-occurrence, not noise: 2, not 1, is 0's destination.
    rng = np.random.default_rng(3)
    true = np.eye(4, dtype=np.int64)[rng.integers(0, 4, 3000)]
    true[true[:, 0] == 1, 1] = 1
    T = np.eye(4)
    T[0] = [0.7, 0.0, 0.3, 0.0]
    given, P = _noisy_views(true, T, seed=4)
    estimate = swap_transition(given, P, noise_rate=0.3)
    assert estimate[0, 2] > 0.2 > estimate[0, 1]


def test_label_quality_blends_the_posterior_with_self_confidence() -> None:
    rng = np.random.default_rng(5)
    given = (rng.random((50, 4)) < 0.3).astype(np.int64)
    P, corrected = rng.uniform(0.05, 0.95, (2, 50, 4))
    pure = label_quality(given, P, corrected, self_confidence_weight=0.0)
    posterior = swap_posterior(given, expit(0.75 * logit(P) + 0.25 * logit(corrected)), swap_transition(given, P))
    np.testing.assert_allclose(pure, np.where(given == 1, posterior, 1 - posterior), atol=1e-5)
    # all weight on the model's confidence: cleanlab's self-confidence score
    np.testing.assert_allclose(label_quality(given, P, corrected, self_confidence_weight=1.0),
                               np.where(given == 1, P, 1 - P), atol=1e-5)
    blend = label_quality(given, P, corrected)
    assert ((blend >= np.minimum(pure, np.where(given == 1, P, 1 - P)) - 1e-9)
            & (blend <= np.maximum(pure, np.where(given == 1, P, 1 - P)) + 1e-9)).all()


def test_neighbour_rates_count_the_nearest_rows_without_the_row_itself() -> None:
    # two tight groups far apart (by angle, after standardising); each row's 2 neighbours are its group
    # mates, never itself
    X = np.array([[10.0, 10.1], [10.0, 10.0], [10.1, 10.0], [-10.0, -9.9], [-10.0, -10.0], [-9.9, -10.0]])
    given = np.array([[1, 0], [1, 0], [0, 0], [0, 1], [0, 1], [0, 1]])
    rates = neighbour_label_rates(X, given, n_neighbors=2)
    overall = given.mean(0)
    mates = np.array([[1, 0], [1, 0], [2, 0], [0, 2], [0, 2], [0, 2]])  # given among the two mates
    np.testing.assert_allclose(rates, (mates + 2 * overall) / 4)
    # fewer rows than neighbours asked for: all the others
    np.testing.assert_allclose(neighbour_label_rates(X[:3], given[:3]), (np.array([[1, 0], [1, 0], [2, 0]])
                                                                         + 2 * given[:3].mean(0)) / 4)
    with pytest.raises(ValueError, match="at least 2 rows"):
        neighbour_label_rates(X[:1], given[:1])


def test_the_torch_search_finds_the_neighbours_scikit_learn_finds() -> None:
    """The GPU's search (blocks of cosine similarities and topk), run here on the CPU with blocks of 7
    rows, picks each row's neighbours as scikit-learn's exact search does (random data: no ties)."""
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import normalize

    from lsnpc.corrector import label_posterior

    X = normalize(np.random.default_rng(4).normal(size=(60, 6)))
    expected = NearestNeighbors(n_neighbors=5).fit(X).kneighbors(return_distance=False)
    original = label_posterior._BLOCK_BYTES
    label_posterior._BLOCK_BYTES = 7 * 4 * 60  # 7 rows a block: 9 blocks, the last of 4
    try:
        found = label_posterior._torch_neighbours(X, 5, torch.device("cpu"))
    finally:
        label_posterior._BLOCK_BYTES = original
    assert found.shape == (60, 5) and not (found == np.arange(60)[:, None]).any()
    np.testing.assert_array_equal(np.sort(found, 1), np.sort(expected, 1))


def test_the_neighbours_share_goes_to_whichever_predicts_the_given_labels() -> None:
    rng = np.random.default_rng(7)
    given = (rng.random((400, 5)) < 0.3).astype(np.int64)
    informed = np.where(given == 1, 0.85, 0.1)  # knows the labels
    blind = rng.uniform(0.2, 0.4, given.shape)  # knows nothing
    blind_logits = logit(blind)
    assert choose_neighbour_weight(given, blind_logits, informed) == 1.0
    assert choose_neighbour_weight(given, logit(informed), blind) == 0.0
    # each knows the labels of a different half of the entries: a blend, and the prior uses it
    mask = rng.random(given.shape) < 0.5
    model, neighbours = np.where(mask, informed, blind), np.where(mask, blind, informed)
    b = choose_neighbour_weight(given, logit(model), neighbours)
    assert 0.3 <= b <= 0.7
    np.testing.assert_allclose(label_prior(model, model, neighbours, labels=given),
                               label_prior(model, model, neighbours, neighbour_weight=b))
    with pytest.raises(ValueError, match="needs the given labels"):
        label_prior(model, model, neighbours)
    with pytest.raises(ValueError, match="neighbour_weight must be a number in \\[0, 1\\] or 'auto'"):
        label_prior(model, model, neighbours, labels=given, neighbour_weight="best")
    with pytest.raises(ValueError, match="neighbour_weight must be a number"):
        label_prior(model, model, neighbours, neighbour_weight=1.5)


def test_the_prior_blends_the_neighbours_into_the_model_logits() -> None:
    rng = np.random.default_rng(6)
    P, corrected, rates = rng.uniform(0.05, 0.95, (3, 20, 4))
    model = 0.75 * logit(P) + 0.25 * logit(corrected)
    np.testing.assert_allclose(label_prior(P, corrected), expit(model))
    np.testing.assert_allclose(label_prior(P, corrected, rates, neighbour_weight=0.8),
                               expit(0.2 * model + 0.8 * logit(rates)))


def test_review_gives_the_scores_and_suggestions_of_the_two_functions_bit_for_bit(monkeypatch) -> None:
    """review() estimates the channel and the model's logit blend once for both answers; the numbers
    are those of label_quality (with the neighbours and the co-occurrence) and label_correction (without
    either), to the bit — also where the prior's weights are chosen on a sample of the rows (beyond 4 M
    entries; lowered here so a small problem crosses it)."""
    from lsnpc.corrector import label_posterior

    monkeypatch.setattr(label_posterior, "_WEIGHT_ENTRIES", 1_000)
    rng = np.random.default_rng(11)
    n = 600
    given = (rng.random((n, 4)) < 0.3).astype(np.int64)
    P, corrected, rates = rng.uniform(0.02, 0.98, (3, n, 4))
    scores, suggested = review(given, P, corrected, rates)
    np.testing.assert_array_equal(scores, label_quality(given, P, corrected, rates))
    np.testing.assert_array_equal(suggested, label_correction(given, P, corrected))
    assert not np.array_equal(scores, label_quality(given, P, corrected))  # the neighbours count
    b, c = choose_prior_weights(given, 0.75 * logit(P) + 0.25 * logit(corrected), logit(rates), cooccurrence_lift(given))
    np.testing.assert_array_equal(label_prior(P, corrected, rates, labels=given, cooccurrence_weight="auto"),
                                  label_prior(P, corrected, rates, neighbour_weight=b, cooccurrence_weight=c,
                                              labels=given))
    small = slice(0, 300)
    scores, suggested = review(given[small], P[small], corrected[small], cooccurrence=False)
    np.testing.assert_array_equal(scores, label_quality(given[small], P[small], corrected[small], cooccurrence=False))
    np.testing.assert_array_equal(suggested, label_correction(given[small], P[small], corrected[small]))


def test_cooccurrence_lift_follows_its_definition() -> None:
    """Entry by entry: the mean over the row's other given labels j of P(k | j), counted without the
    row, smoothed by 2 rows at k's overall rate, floored at that rate, as log-odds over it."""
    rng = np.random.default_rng(5)
    given = (rng.random((30, 5)) < 0.4).astype(np.int64)
    given[0] = 0  # a row with no label
    given[1] = [1, 0, 0, 0, 0]  # and one with a single label
    n, L = given.shape
    rate = (given.sum(0) + 0.5) / (n + 1)
    expected = np.zeros(given.shape)
    for i in range(n):
        rest = np.delete(given, i, axis=0)
        for k in range(L):
            others = [j for j in range(L) if given[i, j] and j != k]
            if not others:
                r = rate[k]
            else:
                r = np.mean([(rest[:, j] @ rest[:, k] + 2 * rate[k]) / (rest[:, j].sum() + 2) for j in others])
            expected[i, k] = logit(max(r, rate[k])) - logit(rate[k])
    lift = cooccurrence_lift(given)
    np.testing.assert_allclose(lift, expected, rtol=1e-10, atol=1e-12)
    # nothing to go on: a row without labels, and a single label's own entry
    assert (lift >= 0).all() and (lift[0] == 0).all() and lift[1, 0] == 0 and (lift[1] > 0).any()


def test_the_prior_weights_are_the_best_pair_on_the_grid() -> None:
    """choose_prior_weights bisects over the lift's weight (the loss is convex in it); the pair it returns
    is the one an exhaustive search of the grid finds, on problems whose best weight sits inside the grid,
    at its edge and at zero."""
    from lsnpc.corrector.label_posterior import COOCCURRENCE_WEIGHTS, NEIGHBOUR_WEIGHTS

    rng = np.random.default_rng(9)
    chosen = []
    for scale, also_wrong in ((0.0, 0.0), (1.0, 0.25), (0.4, 0.0)):  # best c: 0, inside (0.5), the edge (3)
        true = (rng.random((400, 6)) < 0.3).astype(np.int64)
        given, _ = simulate_noise(true, "symmetric", 0.3, random_state=1)
        model = logit(np.clip(0.3 * true + 0.35 + 0.1 * rng.standard_normal(true.shape), 0.02, 0.98))
        neighbours = logit(np.clip(0.2 * given + 0.4 + 0.1 * rng.standard_normal(true.shape), 0.02, 0.98))
        # a lift on the given positives, and (misleading) on a share of the given negatives
        lift = scale * np.abs(rng.standard_normal(true.shape)) * ((given == 1) | (rng.random(true.shape) < also_wrong))
        losses = {(b, c): np.logaddexp(0.0, np.where(given == 1, -1, 1) * ((1 - b) * model + b * neighbours
                                                                          + c * lift)).mean()
                  for b in NEIGHBOUR_WEIGHTS for c in COOCCURRENCE_WEIGHTS}
        chosen.append(choose_prior_weights(given, model, neighbours, lift))
        assert chosen[-1] == min(losses, key=losses.get)
    assert [c for _, c in chosen] == [0.0, 0.5, COOCCURRENCE_WEIGHTS[-1]]


def test_the_cooccurrence_lift_finds_missing_tags() -> None:
    """Tag-like labels (groups that go together) with a third of the positives swapped away: the lift
    raises the swapped-away member of a row's group and nothing outside the group, and the scores with it
    rank the wrong entries better than without it (AUROC), on a model that knows little."""
    rng = np.random.default_rng(3)
    n, groups, size = 900, 4, 3
    true = np.zeros((n, groups * size), dtype=np.int64)
    for i in range(n):
        for g in rng.choice(groups, rng.integers(1, 3), replace=False):
            true[i, g * size:(g + 1) * size] = 1
    given, _ = simulate_noise(true, "symmetric", 0.3, random_state=0)
    lift = cooccurrence_lift(given)
    missing = (true == 1) & (given == 0)
    unrelated = (true == 0) & (given == 0)
    assert lift[missing].mean() > 5 * lift[unrelated].mean() and np.median(lift[missing]) > 0
    P = np.clip(0.2 * true + 0.3 + 0.15 * rng.standard_normal(true.shape), 0.02, 0.98)
    wrong = (given != true).ravel()
    with_lift = roc_auc_score(wrong, -label_quality(given, P, P).ravel())
    without = roc_auc_score(wrong, -label_quality(given, P, P, cooccurrence=False).ravel())
    assert with_lift > without + 0.02, (with_lift, without)
    with pytest.raises(ValueError, match="needs the given labels for the co-occurrence"):
        label_prior(P, P, cooccurrence_weight="auto")
    with pytest.raises(ValueError, match="cooccurrence_weight must be a number in \\[0, 1\\] or 'auto'"):
        label_prior(P, P, labels=given, cooccurrence_weight=2.0)


def test_the_label_methods_choose_the_prior_weights_on_the_correctors_threads(monkeypatch) -> None:
    """The prior's weights are chosen with torch: inside LSNPC's label methods on ``n_threads`` threads
    (as its fit and prediction), and the caller's setting is back afterwards."""
    from lsnpc.corrector import label_posterior

    seen: list[int] = []
    choose = label_posterior._choose_weights

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return choose(*args, **kwargs)

    monkeypatch.setattr(label_posterior, "_choose_weights", recording)
    X, Y = make_toy_multilabel(n=120, seed=4)
    P = np.clip(0.6 * Y + 0.2 + np.random.default_rng(4).normal(0, 0.1, Y.shape), 0.01, 0.99).astype(np.float32)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        corrector = LSNPC(random_state=0, **FAST).fit(X, P)
        corrector.review_labels(X, Y, P)
        corrector.label_quality_scores(X, Y, P)
        corrector.label_posterior(X, Y, P)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    assert seen and set(seen) == {1}


# ----------------------------------------------------------------------------- end to end on real data


@pytest.fixture(scope="module")
def scene_noisy(shared_data: Path) -> dict[str, np.ndarray]:
    train = load_dataset("scene", "train", data_home=shared_data)
    X, Y = np.asarray(train.X, np.float32), np.asarray(train.Y)
    Yn, _ = simulate_noise(Y, "symmetric", 0.3, random_state=0)
    P = cross_val_pred_probs(MLPClassifier(epochs=15, n_threads=1, random_state=0), X, Yn, random_state=0)
    return {"X": X, "Y": Y, "Yn": Yn, "P": P}


def test_scores_find_flipped_entries_on_scene(scene_noisy) -> None:
    X, Y, Yn, P = (scene_noisy[k] for k in ("X", "Y", "Yn", "P"))
    corrector, given = fit_corrector(Yn, P, features=X, n_threads=1)
    scores = corrector.label_quality_scores(X, Yn, P)
    assert scores.shape == Yn.shape and scores.min() >= 0 and scores.max() <= 1
    flipped = Yn != Y
    # better than the model's own confidence in the given label (cleanlab's self-confidence score)
    self_confidence = np.where(Yn == 1, P, 1 - P)
    auroc, auroc_self = (roc_auc_score(flipped.ravel(), -s.ravel()) for s in (scores, self_confidence))
    ap, ap_self = (average_precision_score(flipped.ravel(), -s.ravel()) for s in (scores, self_confidence))
    assert auroc > 0.92 and auroc > auroc_self + 0.01 and ap > ap_self + 0.03
    # the neighbours' labels carry much of it: the same posterior without them ranks worse
    given_, P_, corrected, _ = corrector._label_inputs(X, Yn, P)
    alone = label_quality(given_, P_, corrected)
    assert roc_auc_score(flipped.ravel(), -scores.ravel()) > roc_auc_score(flipped.ravel(), -alone.ravel()) + 0.005

    suggested = corrector.correct_labels(X, Yn, P)
    issues = corrector.find_label_issues(X, Yn, P)
    np.testing.assert_array_equal(issues, suggested != Yn)
    # the relabelling's prior leaves the neighbours out (they decide worse than they rank)
    np.testing.assert_array_equal(suggested, label_correction(given_, P_, corrected))
    # a positive moves to its source: rows keep their count unless two positives share one source
    assert (suggested.sum(1) <= Yn.sum(1)).all() and (suggested.sum(1) == Yn.sum(1)).mean() > 0.98
    assert (issues & flipped).sum() > 0.6 * issues.sum()  # most flags are real flips
    # all three from one correction (what the CLI calls) equal the three methods
    review = corrector.review_labels(X, Yn, P)
    assert sorted(review) == ["issues", "scores", "suggested"]
    np.testing.assert_array_equal(review["scores"], scores)
    np.testing.assert_array_equal(review["suggested"], suggested)
    np.testing.assert_array_equal(review["issues"], issues)
    assert (suggested != Y).sum() < 0.85 * flipped.sum()  # fewer wrong entries than given

    lists = [list(np.flatnonzero(row)) for row in Yn]
    np.testing.assert_array_equal(corrector.label_quality_scores(X, lists, P), scores)


def test_functions_equal_the_methods_of_one_fit(scene_noisy) -> None:
    X, Yn, P = (scene_noisy[k][:400] for k in ("X", "Yn", "P"))
    corrector = LSNPC(random_state=3, student=False, guard=False, **FAST).fit(X, P)
    np.testing.assert_array_equal(label_quality_scores(Yn, P, features=X, random_state=3, **FAST),
                                  corrector.label_quality_scores(X, Yn, P))
    np.testing.assert_array_equal(correct_labels(Yn, P, features=X, random_state=3, **FAST),
                                  corrector.correct_labels(X, Yn, P))
    issues = find_label_issues(Yn, P, features=X, random_state=3, **FAST)
    assert issues.dtype == bool and issues.shape == Yn.shape


def test_a_user_encoders_embedding_is_where_neighbours_are_found() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3, 2, 2)).astype(np.float32)
    Y = (rng.random((80, 3)) < 0.4).astype(np.int64)
    P = np.clip(Y * 0.6 + 0.2, 0, 1).astype(np.float32)
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5))
    corrector = LSNPC(encoder=encoder, random_state=0, student=False, guard=False, **FAST).fit(X, P)
    space = corrector._neighbour_space(X)
    with torch.no_grad():
        expected = corrector.model_.data_encoder(torch.as_tensor(X)).numpy()
    np.testing.assert_allclose(space, expected, rtol=1e-5, atol=1e-6)
    scores = corrector.label_quality_scores(X, Y, P)
    assert scores.shape == (80, 3) and np.isfinite(scores).all()


def test_the_pinned_corrector_yields_to_the_callers_params() -> None:
    X, Y = make_toy_multilabel(80, 4, 3, seed=1)
    P = np.clip(Y * 0.7 + 0.15, 0, 1)
    plain, _ = fit_corrector(Y, P, features=X, **FAST)
    assert plain.student_ is None and plain.report_["blend"].method == "off" and plain.random_state == 0
    chosen, _ = fit_corrector(Y, P, features=X, student=True, guard=True, random_state=5, **FAST)
    assert chosen.student_ is not None and chosen.report_["blend"].method != "off" and chosen.random_state == 5


def test_bad_input_names_the_argument() -> None:
    X, Y = make_toy_multilabel(60, 4, 3, seed=0)
    P = np.clip(Y * 0.7 + 0.15, 0, 1)
    with pytest.raises(ValueError, match="labels has 2 label columns, but pred_probs has 3"):
        find_label_issues(Y[:, :2], P, features=X)
    with pytest.raises(ValueError, match=r"labels\[0\] holds class index 3"):
        find_label_issues([[3]] + [[0]] * 59, P, features=X)
    with pytest.raises(ValueError, match="same number of samples"):
        find_label_issues(Y[:50], P, features=X)
    with pytest.raises(ValueError, match="features has 59"):
        find_label_issues(Y, P, features=X[:59])
    with pytest.raises(ValueError, match="features is required"):
        find_label_issues(Y, P, features=None)
    with pytest.raises(ValueError, match="pred_probs must hold probabilities"):
        find_label_issues(Y, P + 1, features=X)
    with pytest.raises(ValueError, match="unknown LSNPC parameter"):
        find_label_issues(Y, P, features=X, not_a_parameter=1)
    corrector = LSNPC(random_state=0, **FAST).fit(X, P)
    with pytest.raises(ValueError, match="labels"):
        corrector.correct_labels(X, Y[:10], P)
    # scores look for neighbours among the rows passed: one row has none; relabelling needs none
    with pytest.raises(ValueError, match="labels must have at least 2 sample"):
        corrector.label_quality_scores(X[:1], Y[:1], P[:1])
    assert corrector.correct_labels(X[:1], Y[:1], P[:1]).shape == (1, 3)


# ----------------------------------------------------------------------------- the command line


def lsnpc_cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": "200", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "lsnpc.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def test_cli_writes_a_ranked_table_and_a_summary(tmp_path: Path) -> None:
    X, Y = make_toy_multilabel(300, 8, 4, seed=2)
    Yn, _ = simulate_noise(Y, "symmetric", 0.3, random_state=0)
    P = np.clip(0.6 * Y + 0.2 + np.random.default_rng(0).normal(0, 0.05, Y.shape), 0, 1)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "P.npy", P)
    pd.DataFrame(Yn, columns=["a", "b", "c", "d"]).to_csv(tmp_path / "Y.csv", index=False)
    args = ["label-issues", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P.npy", "--out", "issues.csv",
            "--set", "epochs=2", "--set", "warm_start=false"]
    result = lsnpc_cli(*args, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    table = pd.read_csv(tmp_path / "issues.csv")
    assert list(table.columns) == ["row", "label", "given", "suggested", "score"]
    assert summary["entries"] == len(table) > 0
    assert summary["rows"] == table.row.nunique() and summary["n_labels"] == 4
    assert set(table.label) <= {"a", "b", "c", "d"} and (table.given != table.suggested).all()
    assert table.score.is_monotonic_increasing
    assert "Traceback" not in result.stderr

    again = lsnpc_cli(*args, cwd=tmp_path)  # never overwrites a file without --force
    assert again.returncode == 1 and "--force" in again.stderr
    text = lsnpc_cli(*args, "--force", cwd=tmp_path)
    assert text.returncode == 0 and "label entries look wrong" in text.stdout
    np.save(tmp_path / "P3.npy", P[:, :3])
    bad = lsnpc_cli("label-issues", "--features", "X.npy", "--labels", "Y.csv", "--probs", "P3.npy", "--out",
                    "other.csv", cwd=tmp_path)
    assert bad.returncode == 1 and "--labels has 4 label columns, but --probs has 3" in " ".join(bad.stderr.split())
    assert not (tmp_path / "other.csv").exists()


def test_keep_label_positives_puts_back_a_drained_labels_given_positives() -> None:
    from lsnpc.label_issues import keep_label_positives

    given = np.array([[1, 0, 0], [1, 0, 1], [1, 1, 0], [0, 1, 0]])
    # label 0 loses two of its three positives to label 2; label 1 keeps both
    corrected = np.array([[0, 0, 1], [1, 0, 1], [0, 1, 1], [0, 1, 0]])
    out = keep_label_positives(given, corrected, min_fraction=0.5)
    # ceil(0.5 * 3) = 2 positives of label 0 are asked for, 1 is left: all three come back, label 2 keeps its gains
    np.testing.assert_array_equal(out, [[1, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 0]])
    np.testing.assert_array_equal(keep_label_positives(given, corrected, min_fraction=1 / 3), corrected)
    np.testing.assert_array_equal(keep_label_positives(given, corrected, min_fraction=0), corrected)
    assert out.dtype == np.int64
    # lists of label indices are read as the other functions read them
    np.testing.assert_array_equal(keep_label_positives([[0], [0, 2], [0, 1], [1]], corrected, min_fraction=0.5), out)
    with pytest.raises(ValueError, match="min_fraction must be <= 1"):
        keep_label_positives(given, corrected, min_fraction=1.5)
    with pytest.raises(ValueError, match="corrected"):
        keep_label_positives(given, corrected[:, :2] * 3, min_fraction=0.5)
    with pytest.raises(ValueError, match="labels"):
        keep_label_positives(given[:3], corrected, min_fraction=0.5)
    with pytest.raises(ValueError, match="min_positive_fraction must be >= 0"):
        correct_labels(given, np.full((4, 3), 0.5), features=np.eye(4), min_positive_fraction=-0.1)
