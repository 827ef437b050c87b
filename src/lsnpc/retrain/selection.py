"""How :class:`~lsnpc.retrain.CorrectedLabelsClassifier` chooses among its candidates, and its report.

Every candidate is scored on the clean validation rows the same honest way: the rows are cut into
``folds`` multilabel-stratified parts; each part is predicted at the threshold that
:func:`lsnpc.tune_threshold` chooses on the *other* parts; the pooled predictions give the candidate's
micro- and macro-F1. No row is scored at a threshold chosen with its own label, so a candidate whose
probabilities merely fit the validation rows' thresholds better gains nothing from it, and all the
candidates are judged on the same folds. The best score is kept (ties: the candidate listed first, the
simpler one); its decision threshold is then chosen on all the validation rows.

The candidates were trained without the validation rows (the post-hoc LSNPC too: the noisy training
labels choose its epoch), so the scores are out-of-sample for every one of them.

Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..corrector.threshold import tune_threshold
from ..metrics import macro_f1, micro_f1
from ..model_selection import multilabel_folds

__all__ = ["CANDIDATES", "CandidateScore", "RetrainReport", "cross_fitted_scores", "choose"]

#: The candidates, simplest first (the order that breaks ties): the model trained on the given labels,
#: the model retrained on the corrected labels, and each followed by LSNPC post-hoc.
CANDIDATES = ("noisy", "retrained", "noisy+lsnpc", "retrained+lsnpc")
_WORDS = {"noisy": "the model trained on the given labels",
          "retrained": "the model retrained on the corrected labels",
          "noisy+lsnpc": "the model trained on the given labels, corrected by LSNPC",
          "retrained+lsnpc": "the model retrained on the corrected labels, corrected by LSNPC"}


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
    """

    name: str
    micro_f1: float
    macro_f1: float
    score: float
    threshold: float


@dataclass(frozen=True)
class RetrainReport:
    """What :meth:`CorrectedLabelsClassifier.fit <lsnpc.CorrectedLabelsClassifier.fit>` decided, and the
    numbers that decided it.

    Attributes
    ----------
    kept : str
        The candidate whose predictions the estimator gives (one of :data:`CANDIDATES`).
    threshold : float
        The decision threshold of ``predict``: the kept candidate's, or 0.5 without validation rows.
    candidates : tuple of CandidateScore
        Every candidate compared, in :data:`CANDIDATES` order; empty without validation rows.
    val_rows : int
        The clean validation rows that scored them (0: none given; the retrained model is kept).
    folds : int
        The parts those rows were cut into (0 without them).
    scoring : str
        What the choice maximised.
    labels_changed : int
        Entries of the training labels the correction changed.
    n_entries : int
        All entries of the training labels (rows × labels).
    """

    kept: str
    threshold: float
    candidates: tuple[CandidateScore, ...]
    val_rows: int
    folds: int
    scoring: str
    labels_changed: int
    n_entries: int

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
        changed = (f"the correction changed {self.labels_changed} of {self.n_entries} label entries "
                   f"({self.labels_changed / max(1, self.n_entries):.1%})")
        if not self.candidates:
            return (f"kept {_WORDS[self.kept]} at threshold {self.threshold:g} (no validation rows to compare "
                    f"with the model trained on the given labels); {changed}")
        kept, noisy = self.candidate(self.kept), self.candidate("noisy")
        return (f"kept {_WORDS[self.kept]} at threshold {self.threshold:g}: on {self.val_rows} validation rows "
                f"({self.folds} folds, each at a threshold chosen on the others) micro-F1 {100 * kept.micro_f1:.1f} "
                f"and macro-F1 {100 * kept.macro_f1:.1f}, against {100 * noisy.micro_f1:.1f} and "
                f"{100 * noisy.macro_f1:.1f} for the model trained on the given labels "
                f"({100 * self.gain_micro_f1:+.1f} / {100 * self.gain_macro_f1:+.1f}); {changed}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        out = asdict(self)
        out["candidates"] = [asdict(c) for c in self.candidates]
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
        report = _typed(cls, {**raw, "candidates": candidates})
        names = [c.name for c in candidates]
        if report.kept not in CANDIDATES or any(n not in CANDIDATES for n in names) or (
                names and report.kept not in names):
            raise ValueError(f"report field kept ({report.kept!r}) or the candidates' names ({names}) are not "
                             f"among {', '.join(CANDIDATES)}")
        if not 0 < report.threshold <= 1:
            raise ValueError(f"report field threshold must be in (0, 1], got {report.threshold!r}")
        return report


_TYPES = {"name": str, "kept": str, "scoring": str, "micro_f1": float, "macro_f1": float, "score": float,
          "threshold": float, "val_rows": int, "folds": int, "labels_changed": int, "n_entries": int}


def _typed(cls: type, raw: Mapping[str, Any]) -> Any:
    fields = list(cls.__dataclass_fields__)
    values = {}
    for field in fields:
        if field not in raw:
            raise ValueError(f"report field {field} is missing")
        value = raw[field]
        kind = _TYPES.get(field)
        ok = kind is None or (isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float
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
    pred = np.zeros(y_val.shape, dtype=np.int64)
    for train, test in folds:
        tuned = tune_threshold(y_val[train], probs[train], thresholds=thresholds, scoring=scoring)
        pred[test] = tuned.predict(probs[test])
    # the scoring of the pooled 0/1 predictions, read as probabilities at the one threshold 0.5
    score = tune_threshold(y_val, pred.astype(np.float32), thresholds=(0.5,), scoring=scoring).best_score
    return micro_f1(y_val, pred), macro_f1(y_val, pred), float(score)


def choose(
    y_val: np.ndarray, val_probs: Mapping[str, np.ndarray], *, n_folds: int, random_state: Any,
    thresholds: Sequence[float], scoring: str | Callable[[np.ndarray, np.ndarray], float],
) -> tuple[str, tuple[CandidateScore, ...], str]:
    """Score each candidate of ``val_probs`` (name -> (n, L) probabilities on the validation rows, in
    :data:`CANDIDATES` order) on the same folds; return (the best's name, every score, the scoring's name)."""
    folds = multilabel_folds(y_val, n_folds, random_state)
    scores = []
    for name, probs in val_probs.items():
        micro, macro, score = cross_fitted_scores(y_val, probs, folds, thresholds=thresholds, scoring=scoring)
        tuned = tune_threshold(y_val, probs, thresholds=thresholds, scoring=scoring)
        scores.append(CandidateScore(name, micro, macro, score, tuned.threshold))
    best = max(s.score for s in scores)
    kept = next(s.name for s in scores if s.score >= best - 1e-12)  # ties: the simplest
    return kept, tuple(scores), tuned.scoring
