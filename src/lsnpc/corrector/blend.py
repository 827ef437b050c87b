"""How much of the base model the output keeps: ``(1 − w) · output + w · base``.

Three ways to choose the base weight w, one per kind of evidence (:mod:`lsnpc.corrector.plan` says which runs):

- :func:`test_on_validation`: clean labels. The candidates (by default ½, then 1: the base model itself) are
  tried in order; the first that does not lose micro- or macro-F1 to the base model in at least ``confidence``
  of the bootstrap resamples of the validation rows is kept.
- :func:`test_on_noisy_labels`: the noisy labels of training rows held out of training. The output is kept
  whole (w = 0) unless it loses to the prior blend in ``confidence`` of the resamples; then the prior. The base
  model was trained on those labels, so they can never justify more of it than the prior.
- :func:`prior_weight`: nothing tests the output, so w is a prior; 0 where the base model is sparse and vague
  (blending it in only raises the threshold and takes back the rare positives the correction found).

Any of them yields to :func:`collapse_check` where no clean label tests the output: an output that keeps few
of the base model's positives, or predicts far more or fewer labels a row than it expects, is a collapse, not a
correction, and the base model is handed back (w = 1).

Every function returns ``(w, evidence)``: the weight and a dict of the numbers that chose it. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .scores import f1_scores, loses, resample_weights

__all__ = ["test_on_validation", "test_on_noisy_labels", "prior_weight", "collapse_check", "base_density",
           "base_sharpness", "collapse_statistics", "N_BOOT"]

#: bootstrap resamples of every test
N_BOOT = 500
# the collapse check: the output must keep this share of the base model's positive decisions, and predict
# within this factor of its expected labels a row
MIN_KEPT_POSITIVES = 0.4
MAX_COUNT_RATIO = 2.5
# a base model is sparse and vague below both: mean probability, and share of the labels' variance resolved
SPARSE_DENSITY = 0.1
VAGUE_SHARPNESS = 0.4


def _blend(output: np.ndarray, base: np.ndarray, w: float) -> np.ndarray:
    return (1 - w) * output + w * base


def test_on_validation(
    y_val: np.ndarray, output: np.ndarray, base: np.ndarray, *, candidates: Sequence[float], confidence: float,
    rng: np.random.Generator, threshold: float = 0.5, n_boot: int = N_BOOT,
) -> tuple[float, dict[str, Any]]:
    """The first base weight of ``candidates`` whose blend loses to the base model in fewer than ``confidence``
    of ``n_boot`` bootstrap resamples of the validation rows (1, the base model, when none does).

    y_val (n, L) 0/1; output, base (n, L): LSNPC's output and the base model's probabilities on those rows, each
    decided at ``threshold``. Evidence: ``loss_support`` {w: share of resamples in which that blend lost},
    ``n_rows``, and the validation micro- and macro-F1 of the base model and of the output whole.
    """
    weights = resample_weights(len(y_val), n_boot, rng)
    reference = f1_scores(y_val, base >= threshold, weights)
    support: dict[float, float] = {}
    chosen = 1.0
    for w in candidates:
        if w >= 1.0:
            break
        support[float(w)] = float(loses(f1_scores(y_val, _blend(output, base, w) >= threshold, weights),
                                        reference).mean())
        if support[float(w)] < confidence:
            chosen = float(w)
            break
    (base_micro, base_macro), (out_micro, out_macro) = (
        (float(s[0]) for s in f1_scores(y_val, probs >= threshold)) for probs in (base, output))
    return chosen, {"loss_support": support, "n_rows": len(y_val), "confidence": confidence,
                    "base_micro_f1": base_micro, "base_macro_f1": base_macro,
                    "output_micro_f1": out_micro, "output_macro_f1": out_macro}


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
    """``prior``, or 0 where the base model's probabilities ``base`` (n, L) on the training rows are sparse and
    vague (:func:`base_density` < 0.1 and :func:`base_sharpness` < 0.4). Evidence: both numbers."""
    density, sharpness = base_density(base), base_sharpness(base)
    sparse_and_vague = density < SPARSE_DENSITY and sharpness < VAGUE_SHARPNESS
    return (0.0 if sparse_and_vague else float(prior)), {
        "prior": float(prior), "base_density": density, "base_sharpness": sharpness,
        "sparse_and_vague": sparse_and_vague}


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
    """Whether :func:`collapse_statistics`' numbers describe a collapse (see :func:`collapse_check`)."""
    return kept < MIN_KEPT_POSITIVES or not 1 / MAX_COUNT_RATIO <= ratio <= MAX_COUNT_RATIO


def collapse_check(output: np.ndarray, base: np.ndarray) -> tuple[bool, dict[str, Any]]:
    """Whether ``output`` (n, L) collapsed against ``base`` (n, L) on rows the correction did not train on: it
    keeps fewer than 40% of the base model's positives at 0.5, or predicts more than 2.5 times (or less than
    1/2.5 of) its expected labels a row. Evidence: ``kept_base_positives``, ``count_ratio``, ``n_rows``."""
    kept, ratio = collapse_statistics(output, base)
    return is_collapse(kept, ratio), {"kept_base_positives": kept, "count_ratio": ratio, "n_rows": len(output)}
