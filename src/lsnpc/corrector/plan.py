"""The fit plan: from the evidence a fit is given, how the epoch, the blend and the threshold are chosen.

One table (``docs/design.md`` explains each choice and the numbers behind it)::

    evidence                                  epoch (selection="auto")           blend with the base model      threshold (threshold="auto")
    a validation triple of >= min_val_rows    micro- + macro-F1 on the triple,   each candidate and the base    tuned on the triple
      rows with a positive label              at the threshold tuned on it       model at its own tuned
                                              (2,000 steps)                      threshold, cross-fitted;
                                                                                 bootstrap test
    the noisy training labels (labels=)       F1 against the labels of 10% of    the output whole unless it     tuned on those held-out rows,
                                              the rows held out (2,000 steps)    loses to the prior blend       within the noisy labels' count
                                                                                 there                          (the count alone below min_val_rows)
    nothing                                   held-out noisy ELBO (600 steps)    the prior (0 sparse and        label count
                                                                                 vague, 1 flat)
    (either, with unlabelled rows)                                                                              label count on those rows

- A validation triple of fewer than ``min_val_rows`` rows is too small to test anything: with
  ``selection="auto"`` it is trained on as a clean set instead (a pass over it after each epoch, Algorithm 1),
  and the plan is that of the other evidence. A triple without a positive label scores F1 = 0 everywhere: it
  is set aside.
- "label count": the lowest threshold from ``count_floor`` at which the output on the training rows predicts no
  more labels a row than the noisy labels hold, or without them than the base model expects (Σ_j p_ij, averaged
  over the training rows; for a flat base model at most ``count_growth`` times its own count at 0.5, since it
  expects more labels than the data hold). Held-out noisy labels tune the threshold only among those
  thresholds: F1 against noisy labels rewards predicting the labels the noise added.
- "label count on unlabelled rows": without a triple that tests, where rows the base model was not trained on
  are given (``X_unlabelled``, ``pred_probs_unlabelled``, no labels), the label count is measured on the output
  over those rows instead of the training rows: a model that memorised its training rows (a forest, a network
  trained to convergence) is more certain there than on any new row, so a count met there is met at too high a
  threshold on new rows.
- ``guard=False``: no blend; a given ``threshold``: used as it is.

Pure functions, no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["EVIDENCE", "FitPlan", "make_plan", "holdout_size"]

EVIDENCE = ("validation", "noisy labels", "none")
BLENDS = ("validation test", "noisy-label test", "prior", "off")
THRESHOLDS = ("tuned on validation", "label count on unlabelled rows", "tuned on held-out noisy labels", "label count",
              "given")


@dataclass(frozen=True)
class FitPlan:
    """What a fit does with its evidence.

    Attributes
    ----------
    evidence : {"validation", "noisy labels", "none"}
        The evidence that tests the output and chooses the threshold.
    selection : {"val_f1", "noisy_f1", "noisy_elbo", "last"}
        What chooses the epoch.
    blend : {"validation test", "noisy-label test", "prior", "off"}
        How the base model's weight in the output is chosen.
    threshold : {"tuned on validation", "label count on unlabelled rows", "tuned on held-out noisy labels",
                 "label count", "given"}
        How ``predict``'s threshold is chosen.
    n_holdout : int
        Training rows held out of training to choose the epoch (0 when none are).
    val_trained_on : bool
        A validation triple too small to test is trained on as a clean set.
    val_set_aside : str or None
        Why a validation triple given was not used (None when it was, or none was given).
    """

    evidence: str
    selection: str
    blend: str
    threshold: str
    n_holdout: int
    val_trained_on: bool = False
    val_set_aside: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def holdout_size(n_rows: int, fraction: float) -> int:
    """Training rows held out to choose the epoch without clean labels: ``fraction`` of them, rounded; 0 when
    that would leave fewer than two rows on either side."""
    n = max(1, int(round(fraction * n_rows)))
    return 0 if n < 2 or n_rows - n < 2 else n


def make_plan(
    *, n_rows: int, n_val: int, n_val_positives: int, labels: bool, selection: str, guard: bool,
    threshold_given: bool, min_val_rows: int, holdout_fraction: float, unlabelled: bool = False,
) -> FitPlan:
    """The plan of a fit (see the module's table).

    ``n_rows``: training rows; ``n_val``, ``n_val_positives``: rows and positive entries of the validation triple
    (0, 0 without one); ``labels``: the noisy training labels were given; ``selection``: the estimator's parameter
    ("auto" or a criterion); ``guard``: whether the base model may be blended in; ``threshold_given``: a number was
    given for the threshold; ``min_val_rows``: the fewest validation rows that can test the output;
    ``holdout_fraction``: the share of training rows held out where a noisy criterion chooses the epoch;
    ``unlabelled``: rows the base model was not trained on were given, without labels.
    """
    set_aside = None
    if n_val and not n_val_positives:
        set_aside = f"its {n_val} rows hold no positive label, so F1 is 0 for every epoch and every output"
        n_val = 0
    testing = n_val >= min_val_rows
    small = 0 < n_val < min_val_rows
    if selection == "auto":
        chosen = "val_f1" if testing else "noisy_f1" if labels else "noisy_elbo"
        trained_on = small
    else:
        chosen, trained_on = selection, False
    n_holdout = holdout_size(n_rows, holdout_fraction) if chosen in ("noisy_f1", "noisy_elbo") else 0
    if chosen in ("noisy_f1", "noisy_elbo") and not n_holdout:
        chosen = "last"
    evidence = "validation" if testing else "noisy labels" if labels and n_holdout else "none"
    blend = "off" if not guard else {"validation": "validation test", "noisy labels": "noisy-label test",
                                     "none": "prior"}[evidence]
    if threshold_given:
        how = "given"
    elif evidence == "validation":
        how = "tuned on validation"
    elif unlabelled:
        how = "label count on unlabelled rows"
    elif evidence == "noisy labels" and n_holdout >= min_val_rows:
        how = "tuned on held-out noisy labels"
    else:
        how = "label count"
    return FitPlan(evidence=evidence, selection=chosen, blend=blend, threshold=how, n_holdout=n_holdout,
                   val_trained_on=trained_on, val_set_aside=set_aside)
