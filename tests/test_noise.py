"""Tests for lsnpc.noise: the transition matrices, the three noise kinds and their report."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lsnpc.noise import NoiseReport, simulate_noise, transition_matrix

VOC_CLASSES = (
    "aeroplane bicycle bird boat bottle bus car cat chair cow diningtable dog horse motorbike "
    "person pottedplant sheep sofa train tvmonitor"
).split()


def _load_voc_trainval(root: Path) -> np.ndarray:
    """The VOC2007 trainval label matrix (5011 x 20); flag 0 ("difficult") counts as positive."""
    main = root / "voc2007-labels" / "ImageSets" / "Main"
    if not main.is_dir():
        pytest.skip(f"VOC2007 labels not found under {main}")
    columns, ids = [], None
    for name in VOC_CLASSES:
        pairs = [line.split() for line in (main / f"{name}_trainval.txt").read_text().splitlines()]
        pairs = [p for p in pairs if p]
        file_ids = [p[0] for p in pairs]
        assert ids is None or file_ids == ids, "per-class files must list the same ids in order"
        ids = file_ids
        columns.append(np.array([int(p[1]) >= 0 for p in pairs]))
    return np.stack(columns, axis=1).astype(np.int64)


@pytest.fixture(scope="module")
def voc_labels(shared_data: Path) -> np.ndarray:
    Y = _load_voc_trainval(shared_data)
    assert Y.shape == (5011, 20)
    return Y


# Small random label matrices with at most half the labels positive per row, so a collision-free
# redraw is always likely.
label_matrices = st.integers(2, 8).flatmap(
    lambda L: arrays(
        np.int64, st.tuples(st.integers(1, 30), st.just(L)), elements=st.integers(0, 1)
    )
)


# --- transition_matrix -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symmetric", "pairflip"])
@pytest.mark.parametrize("rate", [0.0, 0.3, 0.5])
def test_transition_matrix_is_row_stochastic_with_the_right_diagonal(kind, rate):
    T = transition_matrix(kind, rate, 6)
    assert T.shape == (6, 6)
    np.testing.assert_allclose(T.sum(axis=1), 1.0)
    np.testing.assert_allclose(np.diag(T), 1.0 - rate)


def test_transition_matrix_shapes_of_off_diagonal_mass():
    sym = transition_matrix("symmetric", 0.3, 4)
    off = sym[~np.eye(4, dtype=bool)]
    np.testing.assert_allclose(off, 0.1)
    pair = transition_matrix("pairflip", 0.3, 4)
    expected = np.diag([0.7] * 4)
    expected[[0, 1, 2, 3], [1, 2, 3, 0]] = 0.3
    np.testing.assert_allclose(pair, expected)


@pytest.mark.parametrize(
    "args, match",
    [
        (("flip", 0.3, 4), "kind"),
        (("bogus", 0.3, 4), "kind"),
        (("symmetric", 1.0, 4), "rate"),
        (("symmetric", -0.1, 4), "rate"),
        (("symmetric", 0.3, 1), "n_labels"),
        (("pairflip", 0.3, 2.5), "n_labels"),
    ],
)
def test_transition_matrix_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        transition_matrix(*args)


# --- symmetric / pairflip properties -----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(Y=label_matrices, rate=st.floats(0.0, 0.95), seed=st.integers(0, 2**32 - 1))
def test_matrix_noise_keeps_positives_per_row_and_leaves_empty_rows(Y, rate, seed):
    for kind in ("symmetric", "pairflip"):
        Y_noisy, report = simulate_noise(Y, kind, rate, random_state=seed)
        assert Y_noisy.shape == Y.shape
        assert set(np.unique(Y_noisy)) <= {0, 1}
        np.testing.assert_array_equal(Y_noisy.sum(axis=1), Y.sum(axis=1))
        empty = Y.sum(axis=1) == 0
        np.testing.assert_array_equal(Y_noisy[empty], 0)
        assert report.n_rows_changed == int((Y_noisy != Y).any(axis=1).sum())


@settings(max_examples=60, deadline=None)
@given(Y=label_matrices, rate=st.floats(0.01, 0.95), seed=st.integers(0, 2**32 - 1))
def test_pairflip_moves_label_k_only_to_k_plus_one(Y, rate, seed):
    """Every new positive k must come from k itself or from k - 1 (mod L)."""
    Y_noisy, _ = simulate_noise(Y, "pairflip", rate, random_state=seed)
    may_hold = Y | np.roll(Y, 1, axis=1)  # column k gets Y[:, k] or Y[:, k - 1]
    assert not (Y_noisy & ~may_hold.astype(bool)).any()


def test_pairflip_moves_exactly_one_step_on_single_positive_rows():
    L = 5
    Y = np.tile(np.eye(L, dtype=np.int64), (200, 1))
    Y_noisy, report = simulate_noise(Y, "pairflip", 0.5, random_state=3)
    moved = (Y_noisy != Y).any(axis=1)
    np.testing.assert_array_equal(Y_noisy[moved], np.roll(Y[moved], 1, axis=1))
    assert 0.4 < moved.mean() < 0.6
    assert report.realised_rate == pytest.approx(moved.mean())


def test_same_seed_same_output_and_different_seed_different_output():
    rng = np.random.default_rng(0)
    Y = (rng.random((300, 10)) < 0.3).astype(np.int64)
    for kind in ("symmetric", "pairflip", "flip"):
        a, ra = simulate_noise(Y, kind, 0.3, random_state=7)
        b, rb = simulate_noise(Y, kind, 0.3, random_state=7)
        c, _ = simulate_noise(Y, kind, 0.3, random_state=8)
        np.testing.assert_array_equal(a, b)
        assert ra.to_dict() == rb.to_dict()
        assert (a != c).any()


def test_generator_is_used_and_global_rng_untouched():
    Y = (np.random.default_rng(1).random((100, 6)) < 0.3).astype(np.int64)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    gen = np.random.default_rng(5)
    a, _ = simulate_noise(Y, "symmetric", 0.4, random_state=gen)
    b, _ = simulate_noise(Y, "symmetric", 0.4, random_state=gen)  # generator advanced: differs
    assert (a != b).any()
    np.testing.assert_array_equal(np.random.get_state()[1], before)


def test_rate_zero_returns_an_unchanged_copy():
    Y = np.array([[1, 0, 1], [0, 1, 0]])
    for kind in ("symmetric", "pairflip", "flip"):
        Y_noisy, report = simulate_noise(Y, kind, 0.0, random_state=0)
        np.testing.assert_array_equal(Y_noisy, Y)
        assert Y_noisy is not Y
        assert report.n_rows_changed == 0 and report.realised_rate == 0.0


def test_input_is_not_modified_and_bool_input_works():
    Y = np.array([[True, False, False], [False, True, True]])
    copy = Y.copy()
    Y_noisy, _ = simulate_noise(Y, "symmetric", 0.9, random_state=0)
    np.testing.assert_array_equal(Y, copy)
    assert Y_noisy.dtype == np.int64


def test_full_rows_are_left_unchanged_and_reported_without_hanging():
    Y = np.ones((4, 6), dtype=np.int64)
    # pairflip on a run of 5: only a suffix of the run shifting avoids a collision.
    Y[3] = [1, 1, 1, 1, 1, 0]
    start = time.perf_counter()
    Y_noisy, report = simulate_noise(Y, "pairflip", 0.9, random_state=0)
    assert time.perf_counter() - start < 5
    np.testing.assert_array_equal(Y_noisy[:3], 1)
    assert report.n_rows_unresolved >= 3
    np.testing.assert_array_equal(Y_noisy.sum(axis=1), Y.sum(axis=1))


def test_hopeless_rows_terminate_unchanged():
    # symmetric at 0.95 on a 40-label row with 39 positives: acceptance is astronomically small.
    Y = np.ones((2, 40), dtype=np.int64)
    Y[:, 0] = 0
    Y_noisy, report = simulate_noise(Y, "symmetric", 0.95, random_state=0)
    np.testing.assert_array_equal(Y_noisy, Y)
    assert report.n_rows_unresolved == 2


def test_large_matrix_is_fast():
    Y = (np.random.default_rng(0).random((80_000, 80)) < 0.04).astype(np.int64)
    for kind in ("symmetric", "pairflip"):
        start = time.perf_counter()
        Y_noisy, report = simulate_noise(Y, kind, 0.4, random_state=0)
        assert time.perf_counter() - start < 2.0
        assert abs(report.realised_rate - 0.4) < 0.02
        np.testing.assert_array_equal(Y_noisy.sum(axis=1), Y.sum(axis=1))


# --- realised rates on the real VOC2007 label matrix -------------------------------------------


@pytest.mark.parametrize("kind", ["symmetric", "pairflip"])
@pytest.mark.parametrize("rate", [0.1, 0.3, 0.4, 0.5])
def test_realised_rate_close_to_nominal_on_voc2007(voc_labels, kind, rate):
    Y_noisy, report = simulate_noise(voc_labels, kind, rate, random_state=2024)
    assert abs(report.realised_rate - rate) < 0.02
    # Most labels have hundreds of positives: each label's rate is near the nominal one too.
    per_label = report.per_label_rate
    assert per_label.shape == (20,)
    assert np.nanmedian(np.abs(per_label - rate)) < 0.05
    # The observable loss can only be lower (landing on a vacated positive), and not by much.
    assert rate - 0.05 < report.positives_lost_rate <= report.realised_rate + 1e-12
    np.testing.assert_array_equal(Y_noisy.sum(axis=1), voc_labels.sum(axis=1))


def test_voc2007_pairflip_redistributes_counts_to_the_next_class(voc_labels):
    counts = voc_labels.sum(axis=0).astype(float)
    Y_noisy, _ = simulate_noise(voc_labels, "pairflip", 0.3, random_state=0)
    expected = 0.7 * counts + 0.3 * np.roll(counts, 1)
    np.testing.assert_allclose(Y_noisy.sum(axis=0), expected, rtol=0.25, atol=25)


# --- flip noise --------------------------------------------------------------------------------


def test_flip_realised_rates_close_to_fn_and_fp():
    Y = (np.random.default_rng(0).random((4000, 25)) < 0.2).astype(np.int64)
    Y_noisy, report = simulate_noise(Y, "flip", fn_rate=0.3, fp_rate=0.05, random_state=1)
    pos, neg = Y == 1, Y == 0
    fn = (Y_noisy[pos] == 0).mean()
    fp = (Y_noisy[neg] == 1).mean()
    assert abs(fn - 0.3) < 0.02 and abs(fp - 0.05) < 0.01
    assert report.realised_fn_rate == pytest.approx(fn)
    assert report.realised_fp_rate == pytest.approx(fp)
    assert report.realised_rate == pytest.approx((Y_noisy != Y).mean())
    assert report.fn_rate == 0.3 and report.fp_rate == 0.05
    assert np.isnan(report.rate)


def test_flip_rate_sets_both_unless_overridden():
    Y = (np.random.default_rng(0).random((3000, 20)) < 0.3).astype(np.int64)
    _, report = simulate_noise(Y, "flip", 0.2, random_state=11)
    assert report.fn_rate == report.fp_rate == 0.2
    assert abs(report.realised_fn_rate - 0.2) < 0.02 and abs(report.realised_fp_rate - 0.2) < 0.02
    _, report = simulate_noise(Y, "flip", 0.2, fp_rate=0.0, random_state=11)
    assert report.fn_rate == 0.2 and report.realised_fp_rate == 0.0


def test_flip_allows_a_single_label_column():
    Y = np.array([[1], [0], [1], [0]])
    Y_noisy, report = simulate_noise(Y, "flip", 0.5, random_state=0)
    assert Y_noisy.shape == (4, 1) and report.per_label_rate.shape == (1,)


# --- errors and the report ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "Y, kwargs, match",
    [
        (np.array([[1, 0], [0, 1]]), {"kind": "symmetric", "rate": 1.0}, "rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "pairflip", "rate": -0.2}, "rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "flip", "rate": 1.5}, "rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "flip", "rate": 0.1, "fn_rate": 1.0}, "fn_rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "flip", "fn_rate": 0.1}, "rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "symmetric"}, "rate"),
        (np.array([[1, 0], [0, 1]]), {"kind": "symmetric", "rate": 0.1, "fp_rate": 0.1}, "fp_rate"),
        (np.array([[1], [0]]), {"kind": "symmetric", "rate": 0.2}, "at least 2"),
        (np.array([[1], [0]]), {"kind": "pairflip", "rate": 0.2}, "at least 2"),
        (np.array([[1, 2], [0, 1]]), {"kind": "symmetric", "rate": 0.2}, "Y"),
        (np.array([1, 0, 1]), {"kind": "symmetric", "rate": 0.2}, "Y"),
        (np.array([[1.0, np.nan]]), {"kind": "flip", "rate": 0.2}, "Y"),
        (np.array([[1, 0], [0, 1]]), {"kind": "uniform", "rate": 0.2}, "kind"),
        (np.eye(2), {"kind": "flip", "rate": 0.2, "random_state": -1}, "random_state"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(Y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_noise(Y, **kwargs)


def test_report_is_frozen_and_serialises_to_json():
    Y = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0]])
    Y[:, 2] = 0  # label 2 has no positives: its per-label rate is NaN, written as None
    _, report = simulate_noise(Y, "symmetric", 0.5, random_state=0)
    assert isinstance(report, NoiseReport)
    with pytest.raises(AttributeError):
        report.rate = 0.1  # type: ignore[misc]
    d = report.to_dict()
    assert d["kind"] == "symmetric" and d["rate"] == 0.5
    assert d["per_label_rate"][2] is None
    assert json.loads(json.dumps(d)) == d


def test_top_level_reexport_and_no_torch_import():
    import lsnpc

    assert lsnpc.simulate_noise is simulate_noise
    assert lsnpc.transition_matrix is transition_matrix
    code = "import sys, lsnpc.noise, lsnpc.metrics; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docstring_examples_run():
    import lsnpc.noise

    assert doctest.testmod(lsnpc.noise).failed == 0
