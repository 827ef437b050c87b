"""CorrectedLabelsClassifier: retrain any multilabel classifier on LSNPC-corrected labels, keep what
validation prefers (beyond the paper)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from .._names import check_names, column_names, record_names
from .._sklearn import MultilabelClassifierMixin, binary_target
from .._validation import (
    _is_index_lists,
    check_array,
    check_bool,
    check_finite_output,
    check_in_choices,
    check_is_fitted,
    check_multilabel,
    check_n_features,
    check_random_state,
    check_same_n_samples,
    check_scalar,
)
from ..corrector.checks import MEMORISED_WARNING
from ..corrector.threshold import AUTO, SCORINGS, check_thresholds
from .selection import CANDIDATES, RetrainReport, choose, model_of

__all__ = ["CorrectedLabelsClassifier"]

CHANGED_ROWS = ("drop", "relabel")
# LSNPC parameters the estimator sets itself (from its own parameters), which corrector_params may not
_OWN = ("random_state", "device", "n_threads")


class CorrectedLabelsClassifier(MultilabelClassifierMixin, BaseEstimator):
    """Retrain a multilabel classifier on corrected labels, and keep what clean validation rows prefer.

    ``fit(X, y, X_val=..., y_val=...)`` takes noisy training labels ``y`` and does, in order:

    1. out-of-fold probabilities of ``clone(estimator)`` on the noisy labels
       (:func:`lsnpc.cross_val_pred_probs`, ``cv`` multilabel-stratified folds);
    2. corrected labels from them (:func:`lsnpc.correct_labels`: each given positive moved to the label it
       most likely came from under the estimated noise; a label the correction would leave with fewer than
       ``min_positive_fraction`` of its given positives keeps them all), kept as ``labels_``;
    3. a fresh clone fitted on the corrected labels: by default on the rows the correction left unchanged
       (``changed_rows="drop"``), or on every row with its corrected labels (``"relabel"``); and a clone
       fitted on the given labels;
    4. with ``post_hoc``, LSNPC on each of the two models, fitted on that model's out-of-fold probabilities
       with the labels it was trained on, and the validation rows as its validation triple when they are
       given (they choose its epoch, test its correction against the model and choose its threshold, as
       ``LSNPC()`` does post-hoc); with validation rows, also ``LSNPC()`` post-hoc itself on the model trained
       on the given labels: fitted on that model's probabilities on its own training rows, with the triple;
    5. the mean of the candidates' probabilities: of the three LSNPC corrections when validation rows tested
       them, of the two models and their two corrections otherwise (of the two models without ``post_hoc``).
       With clean validation rows every candidate is scored there, each fold of the rows at the threshold
       :func:`lsnpc.tune_threshold` chooses on the other folds; the mean is kept unless one of its parts beats
       it by ``min_gain_se`` standard errors in both micro- and macro-F1 (:mod:`lsnpc.retrain.selection`), at
       the threshold chosen on all the rows. With fewer validation rows than LSNPC's ``min_val_rows`` (10),
       LSNPC trains on them and their scores are in-sample: the mean is kept. Without validation rows the mean
       is kept, at 0.5;
    6. with validation rows and ``fallback_se`` set, the test against the given labels: the model trained on them, at the threshold
       :func:`lsnpc.tune_threshold` chooses for it, is kept instead when it beats step 5's choice by more than
       ``fallback_se`` bootstrap standard errors in micro- *or* macro-F1 on the same cross-fitted folds
       (``report_.given_test``). Where the given labels were right, retraining on "corrected" ones can only lose.

    Why the mean: each candidate wins somewhere and loses somewhere else (dropping rows helps micro-F1 and
    can cost rare labels their positives; LSNPC helps macro-F1 and can cost micro-F1; ``LSNPC()`` post-hoc on
    the model's in-sample probabilities gains the most macro-F1 where labels are many and rare, and the
    least where retraining pays), and a few dozen validation rows cannot tell reliably which. Why the
    corrections alone once validation rows test them: each LSNPC then hands its own model back where its
    correction does not pay on those rows, so the models add nothing the mean needs; where no clean row tests
    the corrections the models steady the mean (docs/retrain.md has the numbers). ``report_`` says what was
    kept and the validation numbers that decided it.

    Parameters
    ----------
    estimator : object with ``fit(X, Y)`` and ``predict_proba(X)``, or None
        The classifier to train: any scikit-learn multilabel classifier (``sklearn.neural_network.
        MLPClassifier`` on a 0/1 indicator matrix, a ``MultiOutputClassifier``, ...) or one of lsnpc's.
        It is cloned, never fitted itself. None: ``lsnpc.MLPClassifier`` seeded from ``random_state``.
    cv : int, default 5
        Folds of the out-of-fold probabilities (step 1; and of the retrained model's for its LSNPC).
    changed_rows : {"drop", "relabel"}, default "drop"
        What retraining does with a row whose labels the correction changed: leave it out, or train on its
        corrected labels. "drop" because a model trained to convergence memorises every wrong label it is
        given, and a relabelled row keeps the wrong labels the correction missed or made; with scikit-learn's
        MLP on scene and yeast at 30–50% noise, retraining gained +5.1 / +2.6 micro / macro-F1 with "drop"
        against +1.0 / +0.2 with "relabel" (docs/retrain.md). Where fewer than ``cv`` rows would be left,
        every row is relabelled instead (``report_.rows_trained`` says how many rows were used).
    post_hoc : bool, default True
        Also use each model followed by LSNPC (two LSNPC fits, three with validation rows, and ``cv`` more
        fits of the estimator).
    val_folds : int, default 5
        The parts the validation rows are cut into to score the candidates (at least this many rows).
    min_gain_se : float >= 0, default 1.0
        How far a single candidate must beat the mean on the validation rows to be kept instead: by this many
        bootstrap standard errors of the difference, in micro- and in macro-F1. One standard error is the
        usual rule for preferring the safer of two models whose scores differ by noise (Breiman et al.'s
        one-standard-error rule); 0 keeps whichever scores higher in both.
    fallback_se : float >= 0 or None, default None
        None: no test (step 6 is skipped; on the confirming sets the test at 1 cost 0.36 micro-F1 at 30–50% noise
        against none and did not move the worst 0% setting, so by the rule written before that run it is off by
        default, docs/retrain.md). A number: how far the model trained on the given labels must beat the
        retraining path's choice on the validation rows, in micro- or in macro-F1, to be kept instead: this many
        bootstrap standard errors of the difference (step 6). At 1, on scene, yeast and a 45-label stand-in it
        cost 0.15 micro-F1 at 30–50% noise against no test. 0 keeps it wherever it scores higher in either F1.
    min_positive_fraction : float in [0, 1] or None, default 1.0
        The fewest positives the correction may leave a label, as a fraction of its given positives (step 2;
        :func:`lsnpc.label_issues.keep_label_positives`); None: no floor. The correction moves rare labels'
        positives to frequent ones, and a model retrained on every row (``changed_rows="relabel"``) then loses
        them: with the floor, retraining on every row gained +1.0 / +0.1 micro / macro-F1 at 30–50% noise,
        without it +1.5 / −1.25 (docs/retrain.md).
    thresholds : "auto" or sequence of float in (0, 1], default "auto"
        The candidate decision thresholds (:func:`lsnpc.tune_threshold`'s: "auto" draws them from the scores).
    scoring : {"micro+macro", "micro_f1", "macro_f1"} or callable, default "micro+macro"
        What the choice of candidate and threshold maximises (:func:`lsnpc.tune_threshold`'s).
    corrector_params : dict or None
        LSNPC parameters for the label correction and the post-hoc correctors (over their defaults:
        :data:`lsnpc.label_issues.LABEL_CORRECTOR_DEFAULTS` for the correction, ``LSNPC()``'s for post-hoc);
        not ``random_state``, ``device`` or ``n_threads``, which come from this estimator.
    random_state : int, numpy Generator or None
        Seeds the folds, LSNPC and the default estimator (a given estimator keeps its own seed). The same
        int gives the same model when the estimator's own seed is fixed.
    device : str, default "cpu"
        Torch device of LSNPC and of the default estimator.
    n_threads : int or None, default 1
        Torch CPU threads of LSNPC and of the default estimator.

    Attributes
    ----------
    models_ : dict of str to fitted estimator
        The fitted clones the kept candidate uses: "noisy" (trained on the given labels) and/or "retrained".
    correctors_ : dict of str to LSNPC
        The post-hoc LSNPCs the kept candidate uses, by candidate name ("noisy+lsnpc",
        "noisy+lsnpc-insample", "retrained+lsnpc"; each corrects the model its name starts with).
    labels_ : ndarray (n, L) int64
        The corrected training labels.
    train_rows_ : ndarray (n,) bool
        The rows the retrained model was trained on (with ``labels_``' labels).
    oof_probs_ : ndarray (n, L) float32
        The out-of-fold probabilities of the model on the given labels (step 1).
    threshold_ : float
        The decision threshold of :meth:`predict`.
    report_ : RetrainReport
        The kept candidate, every candidate's validation numbers, the test against the given-label model
        (``given_test``), how many labels the correction changed.
    n_features_in_, n_labels_ : int

    Examples
    --------
    >>> from sklearn.neural_network import MLPClassifier                      # doctest: +SKIP
    >>> model = CorrectedLabelsClassifier(MLPClassifier(max_iter=500), random_state=0)  # doctest: +SKIP
    >>> model.fit(X, Y_noisy, X_val=X_val, y_val=Y_val).predict(X_test)     # doctest: +SKIP
    >>> model.report_.kept, model.report_.gain_micro_f1                      # doctest: +SKIP
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        cv: int = 5,
        changed_rows: str = "drop",
        post_hoc: bool = True,
        val_folds: int = 5,
        min_gain_se: float = 1.0,
        fallback_se: float | None = None,
        min_positive_fraction: float | None = 1.0,
        thresholds: Sequence[float] | str = AUTO,
        scoring: str | Callable[[np.ndarray, np.ndarray], float] = "micro+macro",
        corrector_params: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        device: str = "cpu",
        n_threads: int | None = 1,
    ) -> None:
        self.estimator = estimator
        self.cv = cv
        self.changed_rows = changed_rows
        self.post_hoc = post_hoc
        self.val_folds = val_folds
        self.min_gain_se = min_gain_se
        self.fallback_se = fallback_se
        self.min_positive_fraction = min_positive_fraction
        self.thresholds = thresholds
        self.scoring = scoring
        self.corrector_params = corrector_params
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if self.estimator is not None:
            for method in ("fit", "predict_proba"):
                if not callable(getattr(self.estimator, method, None)):
                    raise ValueError(f"estimator must have fit and predict_proba methods; "
                                     f"{type(self.estimator).__name__} has no {method}")
            if not callable(getattr(self.estimator, "get_params", None)):
                raise ValueError(f"estimator must be a scikit-learn style estimator (get_params, for clone); "
                                 f"{type(self.estimator).__name__} has none")
        check_scalar(self.cv, "cv", kind=Integral, low=2)
        check_in_choices(self.changed_rows, "changed_rows", CHANGED_ROWS)
        check_bool(self.post_hoc, "post_hoc")
        check_scalar(self.val_folds, "val_folds", kind=Integral, low=2)
        check_scalar(self.min_gain_se, "min_gain_se", low=0.0)
        if self.fallback_se is not None:
            check_scalar(self.fallback_se, "fallback_se", low=0.0)
        if self.min_positive_fraction is not None:
            check_scalar(self.min_positive_fraction, "min_positive_fraction", low=0.0, high=1.0)
        check_thresholds(self.thresholds, auto=True)
        if not callable(self.scoring) and self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))} or a callable "
                             f"scoring(y_true, y_pred) -> float, got {self.scoring!r}")
        self._corrector_params()
        check_random_state(self.random_state)
        from .._torch import resolve_device

        resolve_device(self.device)
        if self.n_threads is not None:
            check_scalar(self.n_threads, "n_threads", kind=Integral, low=1)

    def _corrector_params(self) -> dict[str, Any]:
        from ..corrector import LSNPC

        params = {} if self.corrector_params is None else self.corrector_params
        if not isinstance(params, Mapping):
            raise ValueError(f"corrector_params must be a dict of LSNPC parameters or None, got {params!r:.60}")
        known = set(LSNPC._get_param_names())
        for key in params:
            if key in _OWN:
                raise ValueError(f"corrector_params may not set {key!r}: it is this estimator's own parameter")
            if key not in known:
                raise ValueError(f"corrector_params: LSNPC has no parameter {key!r}")
        return dict(params)

    def _check_data(self, X: Any, y: Any, X_val: Any, y_val: Any, n_labels: int | None) -> tuple[Any, ...]:
        Xa = check_array(X, "X", ndim=2, min_samples=2)
        y, binary_classes = binary_target(y)
        if binary_classes is not None and y_val is not None and np.ndim(y_val) == 1:
            y_val = (np.asarray(y_val) == binary_classes[1]).astype(np.int64).reshape(-1, 1)
        if n_labels is None and _is_index_lists(y, None):
            n_labels = _widest_index(y, y_val if _is_index_lists(y_val, None) else None)
        elif n_labels is not None and not _is_index_lists(y, n_labels) and np.ndim(y) == 2 and np.shape(y)[1] != n_labels:
            raise ValueError(f"y has {np.shape(y)[1]} label columns, but n_labels is {n_labels}")
        Y = check_multilabel(y, "y", n_labels=n_labels, min_samples=2)
        check_same_n_samples(X=Xa, y=Y)
        if Xa.shape[0] < self.cv:
            raise ValueError(f"cv={self.cv} folds need at least {self.cv} rows of X, got {Xa.shape[0]}")
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together (or neither)")
        if X_val is None:
            return Xa, Y, None, None, binary_classes
        Xv = check_array(X_val, "X_val", ndim=2)
        check_n_features(Xv, "X_val", Xa.shape[1], "features", "X")
        if not isinstance(y_val, (list, tuple)) and np.ndim(y_val) == 2 and np.shape(y_val)[1] != Y.shape[1]:
            raise ValueError(f"y_val has {np.shape(y_val)[1]} label columns, but y has {Y.shape[1]}")
        Yv = check_multilabel(y_val, "y_val", n_labels=Y.shape[1])
        check_same_n_samples(X_val=Xv, y_val=Yv)
        if not Yv.any():
            raise ValueError("y_val holds no positive label: F1 is 0 for every candidate there, so it cannot "
                             "choose; give validation rows with positive labels, or none")
        if len(Yv) < self.val_folds:
            raise ValueError(f"X_val has {len(Yv)} rows; scoring the candidates in val_folds={self.val_folds} "
                             f"parts needs at least {self.val_folds}")
        return Xa, Y, Xv, Yv, binary_classes

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        X: Any,
        y: Any,
        *,
        X_val: Any = None,
        y_val: Any = None,
        n_labels: int | None = None,
        on_step: Callable[[str, int, int], None] | None = None,
    ) -> CorrectedLabelsClassifier:
        """Correct the labels ``y`` and retrain; with ``X_val``/``y_val``, keep the best candidate.

        Parameters
        ----------
        X : array (n, d)
            Training features.
        y : array (n, L) of 0/1, or a list of n lists of label indices, or a 1-d array (n,)
            The (noisy) training labels. A 1-d y is one binary label, as in scikit-learn: ``predict`` then returns
            its classes (n,) and ``predict_proba`` (n, 2).
        X_val, y_val : arrays (m, d) and (m, L) (or lists of label indices), optional
            Clean validation rows, never trained on: they choose the candidate and the threshold. At least
            ``val_folds`` rows, with at least one positive label.
        n_labels : int, optional
            L, for labels given as lists of indices (default: the largest index in ``y`` or ``y_val`` + 1).
        on_step : callable(description, done, total), optional
            Called as each step starts and once at the end (for progress displays).

        Returns
        -------
        self
        """
        from ..corrector import LSNPC
        from ..label_issues import correct_labels
        from ..model_selection import cross_val_pred_probs

        self._check_params()
        names = column_names(X)
        Xa, Y, Xv, Yv, binary_classes = self._check_data(X, y, X_val, y_val, n_labels)
        rng = check_random_state(self.random_state)
        fold_seed, correct_seed, lsnpc_seed, model_seed, val_seed = (int(s) for s in rng.integers(2**31 - 1, size=5))
        template = self._template(model_seed)
        params = self._corrector_params()
        steps = ["out-of-fold probabilities", "correcting the labels", "retraining on the corrected labels",
                 "training on the given labels"]
        if self.post_hoc:
            steps += ["out-of-fold probabilities of the retrained model", "LSNPC on the given-label model"]
            if Xv is not None:
                steps.append("LSNPC post-hoc on the given-label model's own probabilities")
            steps.append("LSNPC on the retrained model")
        if Xv is not None:
            steps.append("comparing on the validation rows")
        progress = _Steps(steps, on_step)

        progress.next()
        P = cross_val_pred_probs(template, Xa, Y, cv=self.cv, random_state=fold_seed)
        progress.next()
        corrected = correct_labels(Y, P, features=Xa, random_state=correct_seed, device=self.device,
                                   n_threads=self.n_threads, min_positive_fraction=self.min_positive_fraction,
                                   **params)
        progress.next()
        rows = (corrected == Y).all(axis=1) if self.changed_rows == "drop" else np.ones(len(Y), dtype=bool)
        if rows.sum() < self.cv:  # too few unchanged rows to retrain (and cross-fit) on
            rows = np.ones(len(Y), dtype=bool)
        X_re, Y_re = Xa[rows], corrected[rows]
        models = {"retrained": clone(template).fit(X_re, Y_re)}
        progress.next()
        models["noisy"] = clone(template).fit(Xa, Y)
        # the models' probabilities on the validation rows: the corrections' triple, then the candidates' scores
        val_base = {} if Xv is None else {name: _probs(model, Xv, Y.shape[1]) for name, model in models.items()}
        correctors: dict[str, Any] = {}
        if self.post_hoc:
            progress.next()
            P_retrained = cross_val_pred_probs(template, X_re, Y_re, cv=self.cv, random_state=fold_seed)
            # (candidate, features, probabilities LSNPC is fitted on, labels: None for LSNPC post-hoc's own)
            fits: list[tuple[str, np.ndarray, np.ndarray, np.ndarray | None]] = [("noisy+lsnpc", Xa, P, Y)]
            if Xv is not None:  # untested by clean rows, in-sample probabilities say little: only with them
                fits.append(("noisy+lsnpc-insample", Xa, _probs(models["noisy"], Xa, Y.shape[1]), None))
            fits.append(("retrained+lsnpc", X_re, P_retrained, Y_re))
            for name, Xf, probs, labels in fits:
                progress.next()
                lsnpc = LSNPC(**{**params, "random_state": lsnpc_seed, "device": self.device, "n_threads": self.n_threads})
                triple = {} if Xv is None else {"X_val": Xv, "y_val": Yv, "pred_probs_val": val_base[model_of(name)]}
                with warnings.catch_warnings():  # labels come only with out-of-fold probabilities: none memorised
                    warnings.filterwarnings("ignore", message=MEMORISED_WARNING)
                    correctors[name] = lsnpc.fit(Xf, probs, labels=labels, **triple)
        compared = tuple(name for name in CANDIDATES[1:] if name in models or name in correctors)
        # given the triple, each LSNPC keeps or drops its own correction on it: the models alone add nothing
        # to the mean; without it, they steady the mean of corrections that no clean row tested
        parts = tuple(n for n in compared if n in correctors) if correctors and Xv is not None else compared
        min_val_rows = int(params.get("min_val_rows", LSNPC().min_val_rows))
        eligible = parts if Xv is not None and len(Yv) >= min_val_rows else ()
        kept, scores, scoring, threshold, given_test = "mean", (), _scoring_name(self.scoring), 0.5, None
        if Xv is not None:
            progress.next()
            val_probs = _part_probs(val_base, correctors, compared, Xv)
            val_probs = {"mean": np.mean([val_probs[name] for name in parts], axis=0), **val_probs}
            kept, scores, scoring, given_test = choose(
                Yv, val_probs, n_folds=self.val_folds, random_state=val_seed, thresholds=self.thresholds,
                scoring=self.scoring, min_gain_se=self.min_gain_se, eligible=eligible,
                fallback=None if self.fallback_se is None else "noisy",
                fallback_se=1.0 if self.fallback_se is None else self.fallback_se)
            threshold = next(s.threshold for s in scores if s.name == kept)
        progress.done()

        components = parts if kept == "mean" else (kept,)
        self.models_ = {name: models[name] for name in ("noisy", "retrained")
                        if any(model_of(c) == name for c in components)}
        self.correctors_ = {name: correctors[name] for name in components if name in correctors}
        self.labels_ = np.asarray(corrected, dtype=np.int64)
        self.train_rows_ = rows
        self.oof_probs_ = np.asarray(P, dtype=np.float32)
        self.threshold_ = float(threshold)
        self.report_ = RetrainReport(kept=kept, components=components, threshold=float(threshold), candidates=scores,
                                     eligible=eligible, min_val_rows=min_val_rows,
                                     val_rows=0 if Yv is None else len(Yv), folds=0 if Yv is None else self.val_folds,
                                     scoring=scoring, labels_changed=int((corrected != Y).sum()), n_entries=int(Y.size),
                                     rows_trained=int(rows.sum()), n_rows=len(Y), given_test=given_test)
        record_names(self, names)
        self._binary_classes = binary_classes
        self.n_features_in_ = int(Xa.shape[1])
        self.n_labels_ = int(Y.shape[1])
        return self

    def _template(self, seed: int) -> Any:
        """The unfitted estimator every step clones: the given one, or lsnpc's MLP seeded from ``seed``."""
        if self.estimator is not None:
            return self.estimator
        from ..classifiers import MLPClassifier

        return MLPClassifier(random_state=seed, device=self.device, n_threads=self.n_threads)

    # ------------------------------------------------------------------ predict
    def predict_proba(self, X: Any) -> np.ndarray:
        """Per-label probabilities (n, L) float32 of the kept candidate (the mean of its components'); after a 1-d
        y, (n, 2): the probabilities of ``classes_[0]`` and ``classes_[1]``."""
        return self._proba_out(self._probabilities(X))

    def _probabilities(self, X: Any) -> np.ndarray:
        """(n, L) probabilities of the kept candidate, whatever y fit saw."""
        check_is_fitted(self, "models_")
        check_names(self, column_names(X), "X", "feature_names_in_")
        Xa = check_array(X, "X", ndim=2)
        check_n_features(Xa, "X", self.n_features_in_, "features", type(self).__name__)
        base = {name: _probs(model, Xa, self.n_labels_) for name, model in self.models_.items()}
        parts = _part_probs(base, self.correctors_, self.report_.components, Xa)
        out = np.mean([parts[name] for name in self.report_.components], axis=0).astype(np.float32)
        return check_finite_output(out, "X", Xa)

    def predict(self, X: Any, threshold: float | None = None) -> np.ndarray:
        """0/1 labels (n, L) int64: probability >= ``threshold`` (default ``threshold_``); after a 1-d y, the class
        of each row (n,)."""
        check_is_fitted(self, "models_")
        if threshold is not None:
            check_scalar(threshold, "threshold", low=0.0, high=1.0)
        chosen = self.threshold_ if threshold is None else threshold
        return self._labels_out((self._probabilities(X) >= chosen).astype(np.int64))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, *, overwrite: bool = False) -> None:
        """Write the fitted estimator to the folder ``path`` (safetensors + JSON, checksummed; never a pickle).

        Only where the kept model is one of lsnpc's classifiers (``MLPClassifier``, ``ADDGCN``, ``HLC``): a
        scikit-learn model has no such format (ValueError; save it with its own tools). The write is atomic;
        an existing saved estimator at ``path`` is replaced only with ``overwrite=True``, anything else never.
        """
        from .persistence import save_retrained

        check_is_fitted(self, "models_")
        save_retrained(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> CorrectedLabelsClassifier:
        """Load an estimator written by :meth:`save` onto ``device``; every file is checked first (one
        ValueError saying what is damaged)."""
        from .persistence import load_retrained

        return load_retrained(cls, path, device=device)


class _Steps:
    """Calls ``on_step(description, done, total)`` as each named step starts, and once at the end."""

    def __init__(self, steps: list[str], on_step: Callable[[str, int, int], None] | None) -> None:
        self.steps, self.on_step, self.done_count = steps, on_step, 0

    def next(self) -> None:
        if self.on_step is not None:
            self.on_step(self.steps[self.done_count], self.done_count, len(self.steps))
        self.done_count += 1

    def done(self) -> None:
        if self.on_step is not None:
            self.on_step("done", len(self.steps), len(self.steps))


def _part_probs(base: Mapping[str, np.ndarray], correctors: Mapping[str, Any], names: Sequence[str],
                X: np.ndarray) -> dict[str, np.ndarray]:
    """The probabilities (n, L) of each candidate of ``names`` on X: a model's (``base``: model name -> its
    probabilities on X), or an LSNPC's correction of them (``correctors``: candidate name -> LSNPC)."""
    return {name: base[name] if name in base else correctors[name].predict_proba(X, base[model_of(name)])
            for name in names}


def _probs(model: Any, X: np.ndarray, n_labels: int) -> np.ndarray:
    """``model.predict_proba(X)`` as an (n, L) float32 array (scikit-learn's list of (n, 2) arrays too)."""
    from ..model_selection import _as_label_matrix

    return _as_label_matrix(model.predict_proba(X), len(X), n_labels, getattr(model, "classes_", None))


def _scoring_name(scoring: Any) -> str:
    return getattr(scoring, "__name__", "custom") if callable(scoring) else str(scoring)


def _widest_index(*labels: Any) -> int | None:
    """L for labels given as lists of label indices: the largest index in any of them + 1."""
    largest = -1
    for value in labels:
        for row in value or ():
            try:
                largest = max([largest, *(int(k) for k in row)])
            except (TypeError, ValueError):
                return None
    return largest + 1 if largest >= 0 else None
