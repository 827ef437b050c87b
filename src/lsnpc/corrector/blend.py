"""How much of the base model the output keeps: ``(1 − w) · output + w · base``.

Three ways to choose the base weight w, one per kind of evidence (:mod:`lsnpc.corrector.plan` says which runs):

- :func:`test_on_validation`: clean labels. Each candidate (by default the output whole and the ½ blend) and
  the base model itself are judged at their own tuned thresholds, cross-fitted on the validation rows: the best
  of the candidates that do not lose micro- or macro-F1 to the base model in ``confidence`` of the bootstrap
  resamples is kept, else the base model.
- :func:`test_on_noisy_labels`: the noisy labels of training rows held out of training. The output is kept
  whole (w = 0) unless it loses to the prior blend in ``confidence`` of the resamples; then the prior. The base
  model was trained on those labels, so they can never justify more of it than the prior.
- :func:`prior_weight`: nothing tests the output, so w is a prior; 0 where the base model is sparse and vague
  (blending it in only raises the threshold and takes back the rare positives the correction found), 1 where it
  is flat (nothing in its probabilities to correct, nothing to test a correction with).

Every function returns ``(w, evidence)``: the weight and a dict of the numbers that chose it. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .scores import f1_scores, loses, resample_weights
from .threshold import cross_fitted_predictions

__all__ = ["test_on_validation", "test_on_noisy_labels", "prior_weight", "base_density", "base_sharpness",
           "collapse_statistics", "is_collapse", "N_BOOT"]

#: bootstrap resamples of every test
N_BOOT = 500
# an epoch chosen on noisy labels (training.py) must keep this share of the base model's positive decisions, and
# predict within this factor of its expected labels a row
MIN_KEPT_POSITIVES = 0.4
MAX_COUNT_RATIO = 2.5
# a base model is sparse and vague below both: mean probability, and share of the labels' variance resolved
SPARSE_DENSITY = 0.1
VAGUE_SHARPNESS = 0.4
# a base model is flat below this sharpness around a mean of at least SPARSE_DENSITY (fit warns of it)
FLAT_SHARPNESS = 0.05


def _blend(output: np.ndarray, base: np.ndarray, w: float) -> np.ndarray:
    return (1 - w) * output + w * base


def test_on_validation(
    y_val: np.ndarray, output: np.ndarray, base: np.ndarray, *, candidates: Sequence[float], confidence: float,
    folds: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator, n_boot: int = N_BOOT, **tune: Any,
) -> tuple[float, dict[str, Any]]:
    """The base weight w whose blend ``(1 − w) · output + w · base`` scores best on the validation rows, each
    candidate (and the base model itself, w = 1) judged at its own tuned threshold on rows that did not choose it.

    y_val (n, L) 0/1; output, base (n, L): LSNPC's output and the base model's probabilities on those rows.
    Each candidate's probabilities are decided fold by fold of ``folds`` at the threshold
    :func:`~lsnpc.corrector.threshold.tune_threshold` (``**tune``: its keyword arguments) chooses on the other
    folds (:func:`~lsnpc.corrector.threshold.cross_fitted_predictions`). A candidate passes when its micro- or
    macro-F1 falls below the base model's in fewer than ``confidence`` of ``n_boot`` bootstrap resamples of
    those predictions; of those that pass, the best micro- plus macro-F1 is kept (ties: the larger w); if none
    passes, the base model (w = 1).

    Evidence: ``loss_support`` {w: share of resamples in which that blend lost}, ``scores`` {w: [micro, macro]}
    cross-fitted (the base model's under "1.0"), ``difference_se`` {w: [micro, macro]}: the bootstrap standard
    error of that blend's F1 minus the base model's (how finely these rows can tell the two apart: a few dozen
    rows give several points), ``n_rows``, ``folds``, ``confidence``.
    """
    weights = resample_weights(len(y_val), n_boot, rng)
    tried = sorted({float(w) for w in candidates if w < 1.0})
    preds = {w: cross_fitted_predictions(y_val, _blend(output, base, w), folds, **tune) for w in tried}
    preds[1.0] = cross_fitted_predictions(y_val, base, folds, **tune)
    reference = f1_scores(y_val, preds[1.0], weights)
    resampled = {w: f1_scores(y_val, preds[w], weights) for w in tried}
    support = {w: float(loses(resampled[w], reference).mean()) for w in tried}
    spread = {w: [float(np.std(mine - ref)) for mine, ref in zip(resampled[w], reference)] for w in tried}
    pooled = {w: tuple(float(s[0]) for s in f1_scores(y_val, pred)) for w, pred in preds.items()}
    passing = [w for w in tried if support[w] < confidence]
    chosen = max(passing, key=lambda w: (sum(pooled[w]), w)) if passing else 1.0
    return chosen, {"loss_support": support, "scores": {w: list(v) for w, v in pooled.items()},
                    "difference_se": spread, "n_rows": len(y_val), "folds": len(folds), "confidence": confidence}


def test_on_noisy_labels(
    y_noisy: np.ndarray, output: np.ndarray, base: np.ndarray, *, prior: float, confidence: float,
    rng: np.random.Generator, threshold: float = 0.5, n_boot: int = N_BOOT,
) -> tuple[float, dict[str, Any]]:
    """0 unless the output loses micro- or macro-F1 to the ``prior`` blend, on the noisy labels ``y_noisy``
    (n, L) of held-out training rows, in ``confidence`` of ``n_boot`` resamples; else ``prior``.
    output, base (n, L) on those rows. Evidence: ``loss_support``, ``n_rows``, ``prior``."""
    weights = resample_weights(len(y_noisy), n_boot, rng)
    kept = f1_scores(y_noisy, output >= threshold, weights)
    blended = f1_scores(y_noisy, _blend(output, base, prior) >= threshold, weights)
    support = float(loses(kept, blended).mean())
    return (0.0 if support < confidence else float(prior)), {
        "loss_support": {0.0: support}, "n_rows": len(y_noisy), "prior": float(prior), "confidence": confidence}


def base_density(base: np.ndarray) -> float:
    """The base model's mean probability over the entries of ``base`` (n, L)."""
    return float(base.mean())


def base_sharpness(base: np.ndarray) -> float:
    """The share of the labels' Bernoulli variance the probabilities ``base`` (n, L) resolve:
    Σ_k var_i p_ik / Σ_k m_k (1 − m_k), m_k the mean of column k; 0 for a constant, 1 for 0/1 probabilities."""
    wide = base.astype(np.float64)
    mean = wide.mean(0)
    spread = float((mean * (1 - mean)).sum())
    return min(1.0, float(wide.var(0).sum() / spread)) if spread > 0 else 0.0


def prior_weight(base: np.ndarray, *, prior: float) -> tuple[float, dict[str, Any]]:
    """``prior``; 0 where the base model's probabilities ``base`` (n, L) on the training rows are sparse and
    vague (:func:`base_density` < 0.1 and :func:`base_sharpness` < 0.4); 1 where they are flat around a mean that
    is not small (:func:`base_sharpness` < 0.05, :func:`base_density` >= 0.1): such probabilities hold nothing
    about a row that a correction could learn from, and without a label nothing could test one, so the base model
    comes back (at the label count's threshold). Evidence: both numbers and which case held."""
    density, sharpness = base_density(base), base_sharpness(base)
    sparse_and_vague = density < SPARSE_DENSITY and sharpness < VAGUE_SHARPNESS
    flat = density >= SPARSE_DENSITY and sharpness < FLAT_SHARPNESS
    w = 1.0 if flat else 0.0 if sparse_and_vague else float(prior)
    return w, {"prior": float(prior), "base_density": density, "base_sharpness": sharpness,
               "sparse_and_vague": sparse_and_vague, "flat": flat}


def collapse_statistics(output: np.ndarray, base: np.ndarray, threshold: float = 0.5) -> tuple[float, float]:
    """(kept, ratio) of ``output`` against the base probabilities ``base`` (both (n, L)) on the same rows: the
    share of the base model's positive decisions the output keeps, and its positive labels a row over the base
    model's expected count (Σ_j p_ij averaged); 1.0 where the base model gives none."""
    out_pos, base_pos = output >= threshold, base >= threshold
    kept = float((out_pos & base_pos).sum() / base_pos.sum()) if base_pos.any() else 1.0
    expected = float(base.sum(1).mean())
    ratio = float(out_pos.sum(1).mean() / expected) if expected > 0 else 1.0
    return kept, ratio


def is_collapse(kept: float, ratio: float) -> bool:
    """Whether :func:`collapse_statistics`' numbers describe a collapse: fewer than 40% of the base model's
    positives kept at 0.5, or more than 2.5 times (or less than 1/2.5 of) its expected labels a row."""
    return kept < MIN_KEPT_POSITIVES or not 1 / MAX_COUNT_RATIO <= ratio <= MAX_COUNT_RATIO
