"""The guard: hand back corrected predictions only where clean validation evidence supports them.

Candidates are blends α · corrected + (1 − α) · base, α ∈ {0, ¼, ½, ¾, 1}. First a gate: the pure
correction (α = 1) must lose neither micro- nor macro-F1 against the base model (α = 0) on the
validation labels — blending is a hedge for a correction that validation favours, not a way to rescue
one it rejects. Past the gate, a blend is admissible when it too loses neither metric on validation
and keeps both at least as good as the base model's in a ``confidence`` share of bootstrap resamples
of the validation set (at 0.5: not-worse is at least as likely as worse). The admissible blend with the
best mean of micro- and macro-F1 wins (ties to the smaller α); α = 0, the base model, always qualifies.

Measured on MULAN data (README): without the gate, tmc2007-500 at 0% noise took α = ¼ of a correction
that validation said was 4 macro-F1 points worse, and lost 2.6 points on test.

F1 is computed from per-label TP / FP / FN counts exactly as scikit-learn's ``f1_score`` does
(``zero_division=0``), vectorised over bootstrap resamples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

BLENDS = (0.0, 0.25, 0.5, 0.75, 1.0)

_SCORES = ("val_base_micro_f1", "val_base_macro_f1", "val_corrected_micro_f1", "val_corrected_macro_f1",
           "val_chosen_micro_f1", "val_chosen_macro_f1")


@dataclass(frozen=True)
class GuardDecision:
    """What the guard decided and on what evidence (``LSNPC.guard_``).

    Attributes
    ----------
    applied : bool
        Whether the guard ran (it needs ``guard=True`` and a clean validation triple).
    blend : float in [0, 1]
        α of α · corrected + (1 − α) · base that ``predict_proba`` returns; 1.0 when not applied.
    reason : str or None
        Why the guard did not run; None when it ran.
    confidence : float or None
        The ``guard_confidence`` it ran with.
    gate_passed : bool or None
        Whether the pure correction lost neither micro- nor macro-F1 on validation.
    bootstrap_support : dict of float to float, or None
        For each blend α > 0, the share of bootstrap resamples in which it lost neither F1.
    val_base_micro_f1 ... val_chosen_macro_f1 : float or None
        Validation micro-/macro-F1 of the base model, the pure correction and the chosen blend.
    """

    applied: bool
    blend: float
    reason: str | None = None
    confidence: float | None = None
    gate_passed: bool | None = None
    bootstrap_support: Mapping[float, float] | None = field(default=None, hash=False)
    val_base_micro_f1: float | None = None
    val_base_macro_f1: float | None = None
    val_corrected_micro_f1: float | None = None
    val_corrected_macro_f1: float | None = None
    val_chosen_micro_f1: float | None = None
    val_chosen_macro_f1: float | None = None

    @classmethod
    def skipped(cls, reason: str) -> GuardDecision:
        """The guard did not run (``reason``): the pure correction is returned."""
        return cls(applied=False, blend=1.0, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (``bootstrap_support`` keyed by ``str(α)``); :meth:`from_dict` reverses it."""
        out = asdict(self)
        if self.bootstrap_support is not None:
            out["bootstrap_support"] = {str(a): s for a, s in self.bootstrap_support.items()}
        return out

    @classmethod
    def from_dict(cls, data: Any) -> GuardDecision:
        """Check and rebuild a decision written by :meth:`to_dict`; a ValueError names the bad field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"guard_ must be a mapping of the guard's fields, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"guard_ has unknown field(s) {', '.join(map(repr, unknown))}")
        missing = [name for name in ("applied", "blend") if name not in data]
        if missing:
            raise ValueError(f"guard_ is missing the field(s) {', '.join(map(repr, missing))}")
        values = dict(data)
        for name in ("applied", "gate_passed"):
            if name in values and not isinstance(values[name], bool) and values[name] is not None:
                raise ValueError(f"guard_.{name} must be true or false, got {values[name]!r}")
        if values["applied"] is None:
            raise ValueError("guard_.applied must be true or false, got None")
        if not isinstance(values.get("reason"), (str, type(None))):
            raise ValueError(f"guard_.reason must be a string or null, got {values['reason']!r}")
        for name in ("blend", "confidence", *_SCORES):
            if name == "blend" or values.get(name) is not None:
                values[name] = _fraction(values[name], f"guard_.{name}")
        support = values.get("bootstrap_support")
        if support is not None:
            if not isinstance(support, Mapping):
                raise ValueError(f"guard_.bootstrap_support must map a blend to a share, got {support!r}")
            values["bootstrap_support"] = {
                _fraction(_blend_key(alpha), "a guard_.bootstrap_support key"):
                    _fraction(share, f"guard_.bootstrap_support[{alpha!r}]")
                for alpha, share in support.items()
            }
        return cls(**values)


def _blend_key(key: Any) -> Any:
    """A JSON key ("0.25") as the blend it names; a key that names no number is left for the range check."""
    try:
        return float(key)
    except (TypeError, ValueError):
        return key


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _counts(y_true: np.ndarray, pred: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Weighted per-label TP, FP, FN: weights (B, n) resample counts → three (B, L) arrays."""
    y = y_true.astype(np.float64)
    p = pred.astype(np.float64)
    return weights @ (y * p), weights @ ((1 - y) * p), weights @ (y * (1 - p))


def f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(micro-F1, macro-F1) along the last axis (labels) of count arrays (..., L).

    The numbers of :func:`lsnpc.metrics.micro_f1` and :func:`lsnpc.metrics.macro_f1` (tested equal),
    computed here from counts so that hundreds of bootstrap resamples cost one matrix product.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        micro_den = 2 * tp.sum(-1) + fp.sum(-1) + fn.sum(-1)
        micro = np.where(micro_den > 0, 2 * tp.sum(-1) / micro_den, 0.0)
        per_label_den = 2 * tp + fp + fn
        per_label = np.where(per_label_den > 0, 2 * tp / per_label_den, 0.0)
    return micro, per_label.mean(-1)


def decide_blend(
    y_val: np.ndarray,
    corrected: np.ndarray,
    base: np.ndarray,
    *,
    confidence: float,
    n_boot: int = 500,
    rng: np.random.Generator,
    threshold: float = 0.5,
) -> GuardDecision:
    """Choose the blend weight α (see the module docstring); return the evidence and the decision.

    y_val (n, L) 0/1; corrected, base (n, L) probabilities on the validation samples.
    """
    n = len(y_val)
    weights = np.vstack([np.ones((1, n)), rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)])
    scores: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    for alpha in BLENDS:
        pred = (alpha * corrected + (1 - alpha) * base) >= threshold
        scores[alpha] = f1_from_counts(*_counts(y_val, pred, weights))  # row 0 = the full val set
    base_micro, base_macro = scores[0.0]
    admissible = [0.0]
    support: dict[float, float] = {0.0: 1.0}
    not_worse = {}
    for alpha in BLENDS[1:]:
        micro, macro = scores[alpha]
        not_worse[alpha] = (micro >= base_micro - 1e-12) & (macro >= base_macro - 1e-12)
        support[alpha] = float(not_worse[alpha][1:].mean())
    gate = bool(not_worse[1.0][0])
    if gate:
        admissible += [a for a in BLENDS[1:] if not_worse[a][0] and support[a] >= confidence]
    best = max(admissible, key=lambda a: (round(float(scores[a][0][0] + scores[a][1][0]) / 2, 12), -a))
    return GuardDecision(
        applied=True,
        blend=best,
        confidence=confidence,
        gate_passed=gate,
        bootstrap_support=support,
        val_base_micro_f1=float(base_micro[0]),
        val_base_macro_f1=float(base_macro[0]),
        val_corrected_micro_f1=float(scores[1.0][0][0]),
        val_corrected_macro_f1=float(scores[1.0][1][0]),
        val_chosen_micro_f1=float(scores[best][0][0]),
        val_chosen_macro_f1=float(scores[best][1][0]),
    )
