"""A fit's decisions as data: each step, what it chose, how, and the numbers that chose it.

``LSNPC.report_`` is a :class:`FitReport`: the plan, then one :class:`Decision` per step (``"epoch"``,
``"student"``, ``"blend"``, ``"threshold"``). Code reads the fields (``report_["blend"].choice``,
``report_["threshold"].evidence["scores"]``); people read :meth:`FitReport.summary`. Saved with the model as
JSON and checked when loaded. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .plan import FitPlan

__all__ = ["Decision", "FitReport", "STEPS"]

STEPS = ("epoch", "student", "blend", "threshold")


def _plain(value: Any) -> Any:
    """JSON types: mappings with string keys, lists, finite floats (None for NaN), ints, strings, bools."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Decision:
    """One step of a fit.

    Attributes
    ----------
    step : {"epoch", "student", "blend", "threshold"}
    choice : number or None
        What was chosen: the epoch kept; the student's share of the output (None: no student); the base model's
        weight w in the output; the decision threshold.
    method : str
        How: the epoch criterion ("val_f1", "noisy_f1", "noisy_elbo", "last"); "mean" or "off" for the student;
        "validation test", "noisy-label test", "prior", "off" for the blend; "tuned on validation",
        "label count on unlabelled rows", "tuned on held-out noisy labels", "label count", "given" for the
        threshold.
    evidence : dict
        The numbers behind the choice, in plain JSON types (mapping keys are strings: ``loss_support`` is keyed
        by the base weight as text, "0.5"); each step's keys are in ``docs/design.md``.
    """

    step: str
    choice: float | int | None
    method: str
    evidence: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # held as JSON would give it back, so a saved and loaded report equals the fitted one
        object.__setattr__(self, "choice", _plain(self.choice))
        object.__setattr__(self, "evidence", _plain(dict(self.evidence)))

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "choice": _plain(self.choice), "method": self.method,
                "evidence": _plain(self.evidence)}


@dataclass(frozen=True)
class FitReport:
    """The plan of a fit and its decisions, one per step of :data:`STEPS`."""

    plan: FitPlan
    decisions: tuple[Decision, ...]

    def __getitem__(self, step: str) -> Decision:
        for decision in self.decisions:
            if decision.step == step:
                return decision
        raise KeyError(f"no decision for step {step!r}; the steps are {', '.join(d.step for d in self.decisions)}")

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "decisions": [d.to_dict() for d in self.decisions]}

    @classmethod
    def from_dict(cls, data: Any) -> FitReport:
        """Check and rebuild a report written by :meth:`to_dict`; a ValueError names what is wrong."""
        if not isinstance(data, Mapping) or set(data) != {"plan", "decisions"}:
            raise ValueError("report_ must be an object with exactly 'plan' and 'decisions'")
        plan = data["plan"]
        names = set(FitPlan.__dataclass_fields__)
        if not isinstance(plan, Mapping) or set(plan) != names:
            raise ValueError(f"report_.plan must hold exactly the fields {', '.join(sorted(names))}")
        for key in ("evidence", "selection", "blend", "threshold"):
            if not isinstance(plan[key], str):
                raise ValueError(f"report_.plan.{key} must be a string, got {plan[key]!r:.60}")
        if isinstance(plan["n_holdout"], bool) or not isinstance(plan["n_holdout"], int) or plan["n_holdout"] < 0:
            raise ValueError(f"report_.plan.n_holdout must be an integer >= 0, got {plan['n_holdout']!r:.60}")
        if not isinstance(plan["val_trained_on"], bool):
            raise ValueError("report_.plan.val_trained_on must be true or false")
        if not isinstance(plan["val_set_aside"], (str, type(None))):
            raise ValueError("report_.plan.val_set_aside must be a string or null")
        raw = data["decisions"]
        if not isinstance(raw, list) or [d.get("step") if isinstance(d, Mapping) else None for d in raw] != list(STEPS):
            raise ValueError(f"report_.decisions must be one object per step, in order: {', '.join(STEPS)}")
        decisions = []
        for d in raw:
            if set(d) != {"step", "choice", "method", "evidence"}:
                raise ValueError(f"report_ decision {d.get('step')!r} must hold step, choice, method and evidence")
            choice = d["choice"]
            if choice is not None and (isinstance(choice, bool) or not isinstance(choice, (int, float))):
                raise ValueError(f"report_ decision {d['step']!r}: choice must be a number or null, got {choice!r:.60}")
            if not isinstance(d["method"], str) or not isinstance(d["evidence"], Mapping):
                raise ValueError(f"report_ decision {d['step']!r}: method must be a string and evidence an object")
            decisions.append(Decision(d["step"], choice, d["method"], dict(d["evidence"])))
        return cls(FitPlan(**plan), tuple(decisions))

    def summary(self) -> str:
        """What ``predict_proba`` and ``predict`` return, and why, in a few plain sentences."""
        plan, epoch = self.plan, self["epoch"]
        student, blend, threshold = self["student"], self["blend"], self["threshold"]
        lines = [_evidence_sentence(plan)]
        epochs = epoch.evidence.get("best_epochs") or [epoch.choice]
        if len(epochs) > 1:
            lines.append(f"{len(epochs)} networks were trained; the epochs kept are {', '.join(map(str, epochs))} of "
                         f"{epoch.evidence.get('epochs', '?')}, chosen by {_CRITERIA.get(epoch.method, epoch.method)}.")
        else:
            lines.append(f"The epoch kept is {epoch.choice} of {epoch.evidence.get('epochs', '?')}, chosen by "
                         f"{_CRITERIA.get(epoch.method, epoch.method)}.")
        what = "the correction averaged with the student's probabilities" if student.choice else "the correction"
        if len(epochs) > 1:
            what = f"the mean over the {len(epochs)} networks of {what}"
        w = float(blend.choice or 0.0)
        if w == 1.0:
            lines.append(f"predict_proba returns the base model's probabilities unchanged: {_blend_why(blend)}.")
        elif w == 0.0:
            lines.append(f"predict_proba returns {what}, without the base model: {_blend_why(blend)}.")
        else:
            lines.append(f"predict_proba returns {1 - w:.3g} x ({what}) + {w:.3g} x the base model's probabilities: "
                         f"{_blend_why(blend)}.")
        lines.append(f"predict calls a label at probability >= {threshold.choice:.4g}: {_threshold_why(threshold)}.")
        return " ".join(lines)


_CRITERIA = {"val_f1": "F1 on the validation rows", "noisy_f1": "F1 against the noisy labels of held-out rows",
             "noisy_elbo": "the ELBO on held-out rows (no label)", "last": "none (the last epoch)"}


def _evidence_sentence(plan: FitPlan) -> str:
    said = {"validation": "A clean validation triple tested the output.",
            "noisy labels": "The noisy labels of held-out training rows tested the output (no clean label).",
            "none": "No label tested the output."}[plan.evidence]
    if plan.val_trained_on:
        said += " The validation triple was too small to test it and was trained on as a clean set."
    if plan.val_set_aside:
        said += f" The validation triple was set aside: {plan.val_set_aside}."
    return said


def _per_weight(pairs: Mapping[str, Any]) -> str:
    """{w: [micro, macro]} in F1 units as "w = 0.0: 61.2 / 40.3; ..." (points)."""
    return "; ".join(f"w = {k}: {100 * v[0]:.1f} / {100 * v[1]:.1f}" for k, v in pairs.items())


def _blend_why(blend: Decision) -> str:
    e = blend.evidence
    if blend.method == "off":
        return "the guard is off (guard=False)"
    if blend.method == "validation test":
        scores = e.get("scores", {})
        support = ", ".join(f"w = {k}: {v:.0%}" for k, v in e.get("loss_support", {}).items())
        shown, spread = _per_weight(scores), _per_weight(e.get("difference_se", {}))
        return (f"of the blends that did not lose micro- or macro-F1 to the base model in {e.get('confidence', 0):.0%} "
                f"of bootstrap resamples of {e.get('n_rows')} validation rows, the best, each decided at a threshold "
                f"tuned on other rows ({e.get('folds')} folds; micro / macro-F1 {shown or 'none'}; lost in: "
                f"{support or 'none tried'}; standard error of each blend's difference to the base model, "
                f"micro / macro: {spread or 'not recorded'})")
    if blend.method == "noisy-label test":
        support = e.get("loss_support", {}).get("0.0", 0.0)
        return (f"against the prior blend (w = {e.get('prior', 0):.3g}) on the noisy labels of {e.get('n_rows')} "
                f"held-out rows, the output lost in {support:.0%} of resamples")
    if e.get("flat"):
        return ("no label tests the output, and the base model's probabilities barely vary from row to row "
                f"(sharpness {e.get('base_sharpness', 0):.3f}), so they hold nothing a correction could learn")
    if e.get("sparse_and_vague"):
        return "no label tests the output, and the base model is sparse and vague, so it is not blended in"
    return "no label tests the output, so a fixed prior weight"


def _threshold_why(threshold: Decision) -> str:
    e = threshold.evidence
    if threshold.method == "given":
        return "the threshold given"
    if threshold.method == "tuned on validation":
        bagged = (f" (the median of the best of {e['bagged']} bootstrap resamples: the rows are few)"
                  if e.get("bagged") else "")
        return f"the best micro- plus macro-F1 on {e.get('n_rows')} validation rows{bagged}"
    if threshold.method == "tuned on held-out noisy labels":
        return (f"the best micro- plus macro-F1 on the noisy labels of {e.get('n_rows')} held-out rows, among the "
                f"thresholds from {e.get('floor', 0):g} at which the output predicts no more labels a row than "
                f"those labels hold ({e.get('expected_count', 0):.2f})")
    if e.get("count_of") == "noisy labels":
        whose = "the noisy labels hold"
    elif e.get("growth_limit") is None:
        whose = "the base model expects"
    else:
        whose = (f"the base model expects ({e.get('base_expected_count', 0):.2f}), capped for a flat base model at "
                 f"its own count at 0.5 times count_growth ({e['growth_limit']:.2f}):")
    where = (f" on {e['n_counted']} unlabelled rows the base model was not trained on"
             if threshold.method == "label count on unlabelled rows" else "")
    return (f"the lowest threshold from {e.get('floor', 0):g} at which the output{where} predicts no more labels a "
            f"row ({e.get('predicted_count', 0):.2f}) than {whose} {e.get('expected_count', 0):.2f}")
