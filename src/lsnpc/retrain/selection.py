"""How :class:`~lsnpc.retrain.CorrectedLabelsClassifier` chooses among its candidates, and its report.

Every candidate is scored on the clean validation rows the same honest way: the rows are cut into
``folds`` multilabel-stratified parts; each part is predicted at the threshold that
:func:`lsnpc.tune_threshold` chooses on the *other* parts; the pooled predictions give the candidate's
micro- and macro-F1. No row is scored at a threshold chosen with its own label, so a candidate whose
probabilities merely fit the validation rows' thresholds better gains nothing from it, and all the
candidates are judged on the same folds.

The first candidate (the mean of the others) is kept unless one of the ``eligible`` others (the mean's
own parts) beats it by ``min_gain_se`` bootstrap standard errors of the paired difference in micro-F1 *and*
in macro-F1; of those that do, the best score is kept. The kept candidate's decision threshold is then
chosen on all the validation rows. The other candidates are scored too, for the report.

Then the last step (:class:`GivenLabelTest`): the model trained on the given labels, at the threshold
:func:`lsnpc.tune_threshold` chooses for it, comes back when it beats that choice by more than
``fallback_se`` bootstrap standard errors in micro-F1 *or* in macro-F1, on the same folds. Where the given
labels were right (no noise), retraining on "corrected" ones can only lose, and this is where the rows say so.

The models were trained without the validation rows. The post-hoc LSNPC candidates were given them as
their validation triple (it chooses their epoch, their blend with the model and whether the correction
is used at all), so their scores lean in their favour; the mean of them leans the same way, and it is the
default. Where there are fewer validation rows than LSNPC's ``min_val_rows``, LSNPC trains on them, their
scores are in-sample, and no single candidate is eligible: the mean is kept.

Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..corrector.threshold import cross_fitted_predictions, tune_threshold
from ..metrics import macro_f1, micro_f1
from ..model_selection import multilabel_folds

__all__ = ["CANDIDATES", "CandidateScore", "GivenLabelTest", "RetrainReport", "cross_fitted_scores", "choose",
           "model_of"]

#: The candidates: the mean of some of the others' probabilities (kept unless one of its parts is clearly
#: better), the model trained on the given labels, the model retrained on the corrected labels, each
#: followed by LSNPC fitted on its out-of-fold probabilities with its training labels ("+lsnpc"), and the
#: given-label model followed by LSNPC fitted on its own probabilities on its training rows, as ``LSNPC()``
#: post-hoc is ("+lsnpc-insample"). The part of a name before "+" is the model it starts from.
CANDIDATES = ("mean", "noisy", "retrained", "noisy+lsnpc", "noisy+lsnpc-insample", "retrained+lsnpc")
#: Bootstrap resamples of the validation rows behind the standard errors.
N_BOOTSTRAP = 500
_WORDS = {"mean": "the mean of the models' probabilities",
          "noisy": "the model trained on the given labels",
          "retrained": "the model retrained on the corrected labels",
          "noisy+lsnpc": "the model trained on the given labels, corrected by LSNPC",
          "noisy+lsnpc-insample": "the model trained on the given labels, corrected by LSNPC fitted on its own "
                                  "probabilities on the training rows (LSNPC post-hoc)",
          "retrained+lsnpc": "the model retrained on the corrected labels, corrected by LSNPC"}


def model_of(candidate: str) -> str:
    """The model a candidate starts from ("noisy" or "retrained"); "mean" for the mean."""
    return candidate.partition("+")[0]


@dataclass(frozen=True)
class CandidateScore:
    """One candidate's numbers on the validation rows.

    Attributes
    ----------
    name : str
        One of :data:`CANDIDATES`.
    micro_f1, macro_f1 : float
        Cross-fitted F1 in [0, 1]: each fold of the rows predicted at the threshold chosen on the others.
    score : float
        The scoring's value of those predictions (what the choice maximises; micro + macro by default).
    threshold : float
        The threshold :func:`lsnpc.tune_threshold` chooses on all the rows: the one ``predict`` uses if kept.
    micro_se, macro_se : float
        Bootstrap standard errors of this candidate's F1 minus the mean's, over the rows (0 for the mean).
    """

    name: str
    micro_f1: float
    macro_f1: float
    score: float
    threshold: float
    micro_se: float
    macro_se: float


@dataclass(frozen=True)
class GivenLabelTest:
    """The last step of the choice: what the retraining path kept, against the model trained on the given
    labels at its own tuned threshold (the "noisy" candidate), on the same cross-fitted validation folds.

    The given-label model comes back when it beats the path's choice by more than ``margin_se`` bootstrap
    standard errors of the difference in micro-F1 *or* in macro-F1: a user never pays for retraining in either
    F1 where the clean rows say so. The path's corrections were given the validation rows as their triple, so
    the gaps lean in the path's favour: the test errs towards keeping it.

    Attributes
    ----------
    path_kept : str
        The candidate the retraining path chose (the mean or one of its parts, before this test).
    micro_gap, macro_gap : float
        Its cross-fitted validation F1 minus the given-label model's, in [-1, 1].
    micro_se, macro_se : float
        Bootstrap standard errors of those gaps over the validation rows (0 when the predictions are equal).
    margin_se : float
        How many standard errors of loss the path may show in either F1 before the given-label model comes back.
    fell_back : bool
        Whether it came back (``RetrainReport.kept`` is then "noisy").
    """

    path_kept: str
    micro_gap: float
    macro_gap: float
    micro_se: float
    macro_se: float
    margin_se: float
    fell_back: bool

    @staticmethod
    def fails(micro_gap: float, macro_gap: float, micro_se: float, macro_se: float, margin_se: float) -> bool:
        """True where the path loses by more than ``margin_se`` standard errors in either F1."""
        return bool(micro_gap < -margin_se * micro_se or macro_gap < -margin_se * macro_se)


@dataclass(frozen=True)
class RetrainReport:
    """What :meth:`CorrectedLabelsClassifier.fit <lsnpc.CorrectedLabelsClassifier.fit>` decided, and the
    numbers that decided it.

    Attributes
    ----------
    kept : str
        The candidate whose predictions the estimator gives (one of :data:`CANDIDATES`).
    components : tuple of str
        The candidates whose probabilities the output averages: those the mean was made of, or the kept one.
    threshold : float
        The decision threshold of ``predict``: the kept candidate's, or 0.5 without validation rows.
    candidates : tuple of CandidateScore
        Every candidate compared, in :data:`CANDIDATES` order; empty without validation rows.
    eligible : tuple of str
        The candidates that could have been kept instead of the mean (its parts); empty without validation
        rows or with fewer than ``min_val_rows`` of them.
    min_val_rows : int
        The fewest validation rows with which a single candidate may be kept (LSNPC's ``min_val_rows``: with
        fewer, the post-hoc LSNPC trains on the rows, and scores on them would be in-sample).
    val_rows : int
        The clean validation rows that scored them (0: none given; the mean is kept, at 0.5).
    folds : int
        The parts those rows were cut into (0 without them).
    scoring : str
        What the choice maximised.
    labels_changed : int
        Entries of the training labels the correction changed.
    n_entries : int
        All entries of the training labels (rows × labels).
    rows_trained : int
        The rows the retrained model was trained on (``changed_rows="drop"``: those the correction left
        unchanged).
    n_rows : int
        All training rows.
    given_test : GivenLabelTest or None
        The retraining path's choice tested against the given-label model; None without validation rows (and
        in an estimator saved before the test existed).
    """

    kept: str
    components: tuple[str, ...]
    threshold: float
    candidates: tuple[CandidateScore, ...]
    eligible: tuple[str, ...]
    min_val_rows: int
    val_rows: int
    folds: int
    scoring: str
    labels_changed: int
    n_entries: int
    rows_trained: int
    n_rows: int
    given_test: GivenLabelTest | None = None

    def candidate(self, name: str) -> CandidateScore:
        """The scores of candidate ``name``; KeyError when it was not compared."""
        for entry in self.candidates:
            if entry.name == name:
                return entry
        raise KeyError(f"candidate {name!r} was not compared; compared: {[c.name for c in self.candidates]}")

    @property
    def gain_micro_f1(self) -> float | None:
        """Cross-fitted validation micro-F1 of the kept candidate minus the noisy-trained model's (None
        without validation rows)."""
        return None if not self.candidates else self.candidate(self.kept).micro_f1 - self.candidate("noisy").micro_f1

    @property
    def gain_macro_f1(self) -> float | None:
        """The same for macro-F1."""
        return None if not self.candidates else self.candidate(self.kept).macro_f1 - self.candidate("noisy").macro_f1

    def summary(self) -> str:
        """The decision in a user's words."""
        what = _WORDS[self.kept] + ("" if self.kept != "mean" else
                                    " (" + "; ".join(_WORDS[c] for c in self.components) + ")")
        changed = (f"the correction changed {self.labels_changed} of {self.n_entries} label entries "
                   f"({self.labels_changed / max(1, self.n_entries):.1%}); the retrained model learnt from "
                   f"{self.rows_trained} of {self.n_rows} rows")
        if not self.candidates:
            return f"kept {what} at threshold {self.threshold:g} (no validation rows to compare them on); {changed}"
        kept, noisy = self.candidate(self.kept), self.candidate("noisy")
        if not self.eligible and self.kept != "noisy":
            what += (f" (with fewer than {self.min_val_rows} validation rows no single candidate may replace "
                     f"the mean)")
        test = self.given_test
        if test is not None and test.fell_back:
            what += (f", because the retraining path's choice ({_WORDS[test.path_kept]}) lost to it on the validation "
                     f"rows by more than {test.margin_se:g} standard errors ({100 * test.micro_gap:+.1f} micro-F1, "
                     f"{100 * test.macro_gap:+.1f} macro-F1)")
        return (f"kept {what} at threshold {self.threshold:g}: on {self.val_rows} validation rows ({self.folds} "
                f"folds, each at a threshold chosen on the others) micro-F1 {100 * kept.micro_f1:.1f} and macro-F1 "
                f"{100 * kept.macro_f1:.1f}, against {100 * noisy.micro_f1:.1f} and {100 * noisy.macro_f1:.1f} for "
                f"the model trained on the given labels ({100 * self.gain_micro_f1:+.1f} / "
                f"{100 * self.gain_macro_f1:+.1f}); {changed}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        out = asdict(self)
        out["candidates"] = [asdict(c) for c in self.candidates]
        out["components"] = list(self.components)
        out["eligible"] = list(self.eligible)
        out["given_test"] = None if self.given_test is None else asdict(self.given_test)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RetrainReport:
        """The report :meth:`to_dict` wrote; ValueError, naming the field, when one is missing or of the
        wrong type."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"a report must be an object, got {type(raw).__name__}")
        entries = raw.get("candidates")
        if not isinstance(entries, list) or not all(isinstance(c, Mapping) for c in entries):
            raise ValueError("report field candidates must be a list of objects")
        candidates = tuple(_typed(CandidateScore, c) for c in entries)
        components = raw.get("components")
        if not isinstance(components, (list, tuple)) or not components or not all(
                c in CANDIDATES[1:] for c in components):
            raise ValueError(f"report field components must list some of {', '.join(CANDIDATES[1:])}, "
                             f"got {components!r:.80}")
        eligible = raw.get("eligible")
        if not isinstance(eligible, (list, tuple)) or not all(c in CANDIDATES[1:] for c in eligible):
            raise ValueError(f"report field eligible must list some of {', '.join(CANDIDATES[1:])}, "
                             f"got {eligible!r:.80}")
        given_test = raw.get("given_test")
        if given_test is not None:
            if not isinstance(given_test, Mapping):
                raise ValueError("report field given_test must be an object or null")
            given_test = _typed(GivenLabelTest, given_test)
            if given_test.path_kept not in CANDIDATES:
                raise ValueError(f"report field path_kept ({given_test.path_kept!r}) is not among "
                                 f"{', '.join(CANDIDATES)}")
        report = _typed(cls, {**raw, "candidates": candidates, "components": tuple(components),
                              "eligible": tuple(eligible), "given_test": given_test})
        names = [c.name for c in candidates]
        if report.kept not in CANDIDATES or any(n not in CANDIDATES for n in names) or (
                names and report.kept not in names):
            raise ValueError(f"report field kept ({report.kept!r}) or the candidates' names ({names}) are not "
                             f"among {', '.join(CANDIDATES)}")
        if report.components != (report.components if report.kept == "mean" else (report.kept,)):
            raise ValueError(f"report field components ({list(report.components)}) must be the kept candidate "
                             f"{report.kept!r} alone")
        fell_back = report.given_test is not None and report.given_test.fell_back
        if report.given_test is not None and report.kept != ("noisy" if fell_back else report.given_test.path_kept):
            raise ValueError(f"report field kept ({report.kept!r}) must be 'noisy' where fell_back is true and "
                             f"path_kept ({report.given_test.path_kept!r}) otherwise")
        if report.kept != "mean" and report.kept not in report.eligible and not fell_back:
            raise ValueError(f"report field eligible ({list(report.eligible)}) must hold the kept candidate "
                             f"{report.kept!r}")
        if not 0 < report.threshold <= 1:
            raise ValueError(f"report field threshold must be in (0, 1], got {report.threshold!r}")
        return report


_TYPES = {"name": str, "kept": str, "scoring": str, "micro_f1": float, "macro_f1": float, "score": float,
          "threshold": float, "micro_se": float, "macro_se": float, "components": None, "eligible": None, "min_val_rows": int, "val_rows": int, "folds": int, "labels_changed": int, "n_entries": int, "rows_trained": int,
          "n_rows": int, "given_test": None, "path_kept": str, "micro_gap": float, "macro_gap": float,
          "margin_se": float, "fell_back": bool}


def _typed(cls: type, raw: Mapping[str, Any]) -> Any:
    fields = list(cls.__dataclass_fields__)
    values = {}
    for field in fields:
        if field not in raw:
            raise ValueError(f"report field {field} is missing")
        value = raw[field]
        kind = _TYPES.get(field)
        ok = kind is None or (isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float
                              else isinstance(value, bool) if kind is bool
                              else isinstance(value, kind) and not isinstance(value, bool))
        if not ok:
            raise ValueError(f"report field {field} must be a {kind.__name__}, got {value!r:.60}")
        values[field] = float(value) if kind is float else value
    return cls(**values)


def cross_fitted_scores(
    y_val: np.ndarray, probs: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]], *,
    thresholds: Sequence[float], scoring: str | Callable[[np.ndarray, np.ndarray], float],
) -> tuple[float, float, float]:
    """(micro-F1, macro-F1, score) of ``probs`` (n, L) against ``y_val`` (n, L), each fold's test part
    predicted at the threshold tuned on its training part."""
    pred = cross_fitted_predictions(y_val, probs, folds, thresholds=thresholds, scoring=scoring)
    return (*_f1(y_val, pred), _score(y_val, pred, scoring))


def _f1(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    return micro_f1(y, pred), macro_f1(y, pred)


def _score(y: np.ndarray, pred: np.ndarray, scoring: str | Callable[[np.ndarray, np.ndarray], float]) -> float:
    """The scoring's value of 0/1 predictions: read as probabilities at the one threshold 0.5."""
    return float(tune_threshold(y, pred.astype(np.float32), thresholds=(0.5,), scoring=scoring).best_score)


def choose(
    y_val: np.ndarray, val_probs: Mapping[str, np.ndarray], *, n_folds: int, random_state: Any,
    thresholds: Sequence[float], scoring: str | Callable[[np.ndarray, np.ndarray], float], min_gain_se: float = 1.0,
    eligible: Sequence[str] | None = None, fallback: str | None = None, fallback_se: float = 1.0,
) -> tuple[str, tuple[CandidateScore, ...], str, GivenLabelTest | None]:
    """Score each candidate of ``val_probs`` (name -> (n, L) probabilities on the validation rows; the first
    is the default) on the same folds, then choose in two steps.

    1. The retraining path: keep the default unless ``eligible`` ones (default: every other but ``fallback``)
       beat it by ``min_gain_se`` bootstrap standard errors in both micro- and macro-F1, then the best score
       of those.
    2. With ``fallback`` (a name of ``val_probs``: the model trained on the given labels), the path's choice
       must not lose to it by more than ``fallback_se`` bootstrap standard errors of the difference in
       micro-F1 or in macro-F1 (:class:`GivenLabelTest`); where it does, ``fallback`` is kept.

    Returns (the kept name, every candidate's scores, the scoring's name, the test of step 2 or None).
    """
    from ..corrector.scores import f1_scores, resample_weights

    rng = np.random.default_rng(random_state)
    folds = multilabel_folds(y_val, n_folds, rng)
    weights = resample_weights(len(y_val), N_BOOTSTRAP, rng)
    preds = {name: cross_fitted_predictions(y_val, probs, folds, thresholds=thresholds, scoring=scoring)
             for name, probs in val_probs.items()}
    default = next(iter(val_probs))
    boot = {name: np.stack(f1_scores(y_val, pred, weights)) for name, pred in preds.items()}  # (2, resamples)
    scores = []
    for name, probs in val_probs.items():
        micro_se, macro_se = (boot[name] - boot[default]).std(axis=1)
        tuned = tune_threshold(y_val, probs, thresholds=thresholds, scoring=scoring)
        scores.append(CandidateScore(name, *_f1(y_val, preds[name]), _score(y_val, preds[name], scoring),
                                     tuned.threshold, float(micro_se), float(macro_se)))
    first = scores[0]
    allowed = set(val_probs) - {default, fallback} if eligible is None else set(eligible)
    clear = [s for s in scores[1:] if s.name in allowed and s.micro_f1 - first.micro_f1 > min_gain_se * s.micro_se
             and s.macro_f1 - first.macro_f1 > min_gain_se * s.macro_se]
    kept = max(clear, key=lambda s: s.score).name if clear else default  # max: the first of equal scores
    test = None
    if fallback is not None:
        if fallback not in val_probs:
            raise ValueError(f"fallback {fallback!r} is not among the candidates {list(val_probs)}")
        by_name = {s.name: s for s in scores}
        micro_gap = by_name[kept].micro_f1 - by_name[fallback].micro_f1
        macro_gap = by_name[kept].macro_f1 - by_name[fallback].macro_f1
        micro_se, macro_se = (float(v) for v in (boot[kept] - boot[fallback]).std(axis=1))
        fell_back = GivenLabelTest.fails(micro_gap, macro_gap, micro_se, macro_se, fallback_se)
        test = GivenLabelTest(kept, float(micro_gap), float(macro_gap), micro_se, macro_se, float(fallback_se),
                              fell_back)
        kept = fallback if fell_back else kept
    return kept, tuple(scores), tuned.scoring, test
