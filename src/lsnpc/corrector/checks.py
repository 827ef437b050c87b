"""LSNPC's checks of its parameters and inputs, and the warnings fit and predict give about their data.

Every error names the argument and what was expected.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from torch import nn

from .._torch import resolve_device
from .._validation import (
    check_bool,
    check_in_choices,
    check_multilabel,
    check_random_state,
    check_same_n_samples,
    check_scalar,
)
from . import blend as blending
from .model import LATENT_FAMILIES, StandardizedMLPEncoder
from .scores import f1_from_counts
from .threshold import check_thresholds

__all__ = [
    "FEEDS",
    "SCHEDULES",
    "SELECTIONS",
    "check_labels",
    "check_params",
    "check_threshold",
    "warn_if_far_from_training",
    "warn_if_flat",
    "warn_if_memorised",
]

SELECTIONS = ("auto", "val_f1", "noisy_f1", "noisy_elbo", "last")
FEEDS = ("sample", "probs")
SCHEDULES = ("cosine", "paper", "constant")
DECODER_BIASES = ("default", "label_means")
# predict warns past this many training standard deviations (no training value can lie that far from the
# training mean unless the training set has about a million rows: the bound is sqrt(n - 1))
FAR_FROM_TRAINING = 1e3
# fit warns, where the noisy labels alone set the threshold, when pred_probs at 0.5 reproduce those labels on the
# training rows with at least this micro-F1: a model that memorised its rows (a forest, an MLP trained to
# convergence) is surer of them than of new rows. Measured (docs/design.md): with labels= alone such models trail
# the tuned threshold by 2.3 to 8.8 macro-F1 on average (by base model), and rows they never saw give most of it back.
MEMORISED_F1 = 0.9
# the warning's opening words, for callers that fit LSNPC on out-of-fold probabilities (no rows memorised there)
MEMORISED_WARNING = "pred_probs reproduce the noisy labels on the training rows"


def check_params(est: Any) -> None:
    """Check every constructor parameter of an LSNPC ``est``; the error names the parameter."""
    check_in_choices(est.latent, "latent", LATENT_FAMILIES)
    for name in ("nu", "nu0", "lr"):
        check_scalar(getattr(est, name), name, low=0, low_inclusive=False)
    check_scalar(est.beta, "beta", low=0)
    check_scalar(est.weight_decay, "weight_decay", low=0)
    check_scalar(est.eta, "eta", low=0, high=1)
    for name in ("min_steps", "epochs"):
        check_auto_or_int(getattr(est, name), name)
    for name in ("latent_dim", "label_embedding_dim", "hidden_dim", "batch_size", "n_samples", "min_val_rows",
                 "n_fits"):
        check_scalar(getattr(est, name), name, kind=Integral, low=1)
    check_in_choices(est.selection, "selection", SELECTIONS)
    check_in_choices(est.train_feed, "train_feed", FEEDS)
    check_in_choices(est.predict_feed, "predict_feed", FEEDS)
    check_in_choices(est.schedule, "schedule", SCHEDULES)
    candidates = np.asarray(est.blend_candidates if not isinstance(est.blend_candidates, str) else [-1.0])
    if candidates.ndim != 1 or candidates.dtype.kind not in "fiu" or not ((candidates >= 0) & (candidates <= 1)).all():
        raise ValueError(f"blend_candidates must be a sequence of base-model weights in [0, 1], got "
                         f"{est.blend_candidates!r:.80}")
    check_scalar(est.blend_confidence, "blend_confidence", low=0, high=1, low_inclusive=False)
    check_scalar(est.prior_base_weight, "prior_base_weight", low=0, high=1)
    if not (isinstance(est.threshold, str) and est.threshold == "auto"):
        check_threshold(est.threshold, "threshold", auto=True)
    check_thresholds(est.threshold_grid, "threshold_grid", auto=True)
    check_scalar(est.val_folds, "val_folds", kind=Integral, low=2)
    check_in_choices(est.decoder_bias, "decoder_bias", DECODER_BIASES)
    check_scalar(est.count_floor, "count_floor", low=0, high=1, low_inclusive=False)
    check_scalar(est.count_growth, "count_growth", low=1)
    check_scalar(est.holdout_fraction, "holdout_fraction", low=0, high=0.5, low_inclusive=False)
    if est.n_threads is not None:
        check_scalar(est.n_threads, "n_threads", kind=Integral, low=1)
    for name in ("warm_start", "student", "guard", "verbose"):
        check_bool(getattr(est, name), name)
    check_random_state(est.random_state)
    resolve_device(est.device)
    if est.encoder is not None and not isinstance(est.encoder, nn.Module):
        raise ValueError(f"encoder must be a torch.nn.Module or None, got {type(est.encoder).__name__}")


def warn_if_far_from_training(encoder: Any, X: np.ndarray) -> None:
    """Warn when X lies far outside the training data (LSNPC's own encoder knows its mean and scale): there
    the networks saturate and the correction is an extrapolation, not a measurement."""
    if not isinstance(encoder, StandardizedMLPEncoder) or not X.size:
        return
    flat = X.reshape(len(X), -1)
    mean = encoder.mean.detach().cpu().numpy().astype(np.float64)
    scale = encoder.scale.detach().cpu().numpy().astype(np.float64)
    far = np.maximum(flat.max(0) - mean, mean - flat.min(0)) / scale  # per feature: no (n, d) temporary
    feature = int(np.argmax(far))
    if far[feature] > FAR_FROM_TRAINING:
        row = int(np.argmax(np.abs(flat[:, feature] - mean[feature])))
        warnings.warn(f"X lies far outside the training data: row {row}, feature {feature} is {far[feature]:.3g} "
                      f"training standard deviations from the training mean (more than {FAR_FROM_TRAINING:g}); "
                      "the corrected probabilities there are an extrapolation", UserWarning, stacklevel=4)


def check_threshold(value: Any, name: str, *, auto: bool = False) -> float:
    """``value`` as a float in (0, 1]; with ``auto`` the error says that "auto" is accepted too."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value <= 1:
        expected = "'auto' or a number" if auto else "a number"
        raise ValueError(f"{name} must be {expected} in (0, 1], got {value!r}")
    return float(value)


def check_labels(labels: Any, P: np.ndarray) -> np.ndarray:
    given = check_multilabel(labels, "labels", n_labels=P.shape[1], min_samples=2)
    check_same_n_samples(pred_probs=P, labels=given)
    if not given.any():
        raise ValueError(f"labels holds no positive entry in its {len(given)} rows: F1 against it is 0 for every "
                         "epoch and every output, so it can test nothing; pass the labels the base model was trained "
                         "on, or leave labels out")
    return given


def warn_if_flat(P: np.ndarray) -> None:
    """Warn of base probabilities that barely vary from row to row around a mean that is not small: an untrained
    model's or an early checkpoint's, which leave LSNPC little to correct. (A flat model around a small mean is
    what a weak but trained model on very sparse labels looks like; LSNPC gains there, so it gets no warning.)"""
    if P.size and float(P.max()) == float(P.min()):  # one value everywhere (all zeros, say): nothing to correct from
        warnings.warn(
            f"pred_probs barely vary from row to row: every entry is {float(P.min()):g}. A base model like this "
            "(untrained, or not its probabilities at all) leaves LSNPC nothing to correct: check what was passed",
            UserWarning, stacklevel=3)
        return
    sharpness, density = blending.base_sharpness(P), blending.base_density(P)
    if sharpness < blending.FLAT_SHARPNESS and density >= blending.SPARSE_DENSITY:
        warnings.warn(
            f"pred_probs barely vary from row to row: they resolve {sharpness:.1%} of the labels' variance around a "
            f"mean probability of {density:.3g}. A base model like this (untrained, or an early checkpoint) leaves "
            "LSNPC little to correct (without a label it hands the base model back): check how it was trained and "
            "which epoch was kept", UserWarning, stacklevel=3)


def warn_if_memorised(P: np.ndarray, labels: np.ndarray) -> None:
    """Warn where the base probabilities P (n, L) at 0.5 reproduce the training rows' labels (n, L) with a micro-F1
    of at least ``MEMORISED_F1``: the label count met on those rows sets too high a threshold for new rows, and the
    rows the model never saw (``X_unlabelled``, ``pred_probs_unlabelled``) would set it instead."""
    called, given = P >= 0.5, labels.astype(bool)
    tp = np.count_nonzero(called & given, axis=0)
    f1 = float(f1_from_counts(tp, np.count_nonzero(called, axis=0) - tp, np.count_nonzero(given, axis=0) - tp)[0])
    if f1 >= MEMORISED_F1:
        warnings.warn(
            f"{MEMORISED_WARNING} (micro-F1 {f1:.3f} at 0.5): the base model memorised them, so the label count "
            "met on these rows sets too high a threshold for new rows. Pass rows it was not trained on as "
            "X_unlabelled and pred_probs_unlabelled (no labels needed), or a clean validation triple",
            UserWarning, stacklevel=3)


def check_auto_or_int(value: Any, name: str) -> None:
    if isinstance(value, str) and value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be 'auto' or an integer >= 1, got {value!r}")
