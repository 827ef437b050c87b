"""The LSNPC estimator: fit as a few visible steps, predict_proba (the correction equation), save / load.

Typical use, with a model's predicted probabilities ``P`` (n, L) on features ``X`` (n, d)::

    from lsnpc import LSNPC
    corrector = LSNPC(random_state=0).fit(X_train, P_train, X_val=X_val, y_val=y_val, pred_probs_val=P_val)
    corrected = corrector.predict_proba(X_test, P_test)      # (n_test, L) probabilities
    print(corrector.report_.summary())                       # what it returns, and why
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from torch import nn

from .._names import check_names, column_names
from .._numerics import standardization
from .._sklearn import PostProcessorTagsMixin
from .._torch import as_tensor, num_threads, resolve_device, seeded, torch_seed_from
from .._validation import (
    check_array,
    check_is_fitted,
    check_labelled_triple,
    check_unlabelled_pair,
    check_n_features,
    check_probabilities,
    check_random_state,
    check_same_n_samples,
)
from ..model_selection import multilabel_folds
from . import blend as blending
from .checks import (
    check_labels,
    check_params,
    check_threshold,
    warn_if_far_from_training,
    warn_if_flat,
    warn_if_memorised,
)
from .config import ModelSpec, TrainingConfig, build_model
from .inference import predict_corrected
from .label_methods import LabelIssueMethods
from .model import infer_output_dim
from .persistence import restore_corrector, save_corrector
from .plan import FitPlan, make_plan
from .report import Decision, FitReport
from .student import LabelStudent, fit_student
from .threshold import (
    check_thresholds,
    count_threshold,
    tune_threshold,
    within_count,
)
from .training import TrainingData, TrainResult, start_at_label_means, train_latent_shift_model

__all__ = ["LSNPC"]

# the student's share of the output beside the post-hoc correction: their mean
STUDENT_SHARE = 0.5


def _tagged(on_epoch: Callable[[int, int, dict[str, Any]], None], network: int,
            networks: int) -> Callable[[int, int, dict[str, Any]], None]:
    """``on_epoch`` with each entry copied and told which of the fit's networks reports it (1-based)."""
    def hook(epoch: int, epochs: int, entry: dict[str, Any]) -> None:
        on_epoch(epoch, epochs, {**entry, "network": network, "networks": networks})
    return hook


class LSNPC(PostProcessorTagsMixin, LabelIssueMethods, BaseEstimator):
    """Latent-space-shift noisy prediction correction (LSNPC) for multilabel classifiers.

    A post-processor: it never retrains the base classifier. From features X and the base model's probabilities
    on them it learns the generative model of section 4 of the paper (a true-label latent z, its shifted
    neighbour ẑ that generated the base model's labels ŷ) and corrects a prediction as E[y | x, h] ≈ the mean over
    Monte-Carlo draws of g_φ(x, z), z ~ q(z | ẑ), ẑ ~ q(ẑ | x, ŷ).

    ``fit`` runs a few steps, each recorded in ``report_`` with the numbers that decided it (the plan table is in
    :mod:`lsnpc.corrector.plan` and ``docs/design.md``):

    1. **plan**: from the evidence given (a validation triple of ``min_val_rows`` rows or more, the noisy
       ``labels``, or nothing) what chooses the epoch, the blend and the threshold;
    2. **train** the model (Algorithm 1), keeping the epoch the plan's criterion prefers;
    3. **student**: the corrected posterior relabels the training rows and a student learns them from x; the
       output is the mean of the student and the correction (``student=True``);
    4. **blend**: the base model's weight w in ``(1 − w) · output + w · base`` (``guard=True``);
    5. **threshold**: the probability at which ``predict`` calls a label.

    ``LSNPC.paper()`` is the paper's recipe: no student, no blend, threshold 0.5.

    Parameters
    ----------
    latent : {"student", "gauss", "learned"}
        "student" (the paper): ẑ ~ Student-t(ν), p(ẑ | z) Student-t(ν0); "gauss": Normal for both (the GAUSS
        ablation); "learned": ν_θ(x, ŷ) = ReLU(Net(x, ŷ)) + 1, p(ẑ | z) keeps ν0.
    nu, nu0 : float, default 2.01
        Degrees of freedom of q(ẑ | x, ŷ) and of p(ẑ | z).
    beta : float, default 0.01
        Weight of the latent (KL) terms, the β-VAE of appendix D.
    eta : float in [0, 1], default 0.5
        Mixture weight of q(z | x, y) in the clean-data proposal (eq. 11).
    latent_dim, label_embedding_dim, hidden_dim : int, default 64, 128, 256
        m; the label embedding's width; the width of LSNPC's own data encoder (unused with ``encoder``).
    encoder : torch.nn.Module or None
        A data encoder mapping a batch of X to (batch, h), e.g. the base model's trunk (``MLPClassifier().fit(...)
        .trunk_``); a trainable copy is fine-tuned. None: LSNPC's own MLP over standardised X, warm-started on P.
    epochs : int or "auto"
        Passes over the noisy data; "auto": about ``min_steps`` optimiser steps, within 5–200 epochs.
    batch_size, lr, weight_decay : int, float, float, default 32, 2e-4, 1e-5
        AdamW settings.
    n_samples : int, default 5
        Monte-Carlo draws of the correction, drawn once at fit: a row's answer depends only on that row.
    selection : {"auto", "val_f1", "noisy_f1", "noisy_elbo", "last"}
        What chooses the epoch. "auto" follows the plan: validation micro-F1, else F1 against the noisy labels of
        held-out rows, else the ELBO of held-out rows.
    train_feed, predict_feed : {"sample", "probs"}, default "sample", "probs"
        What is fed as ŷ: a Bernoulli sample of the probabilities, or the probabilities themselves.
    warm_start : bool, default True
        Pre-train LSNPC's own data encoder to predict the base probabilities before the VAE training.
    student : bool, default True
        Fit the corrected-label student and average it with the correction (step 3).
    guard : bool, default True
        Blend the base model back in as the plan says (step 4); False: w = 0.
    min_val_rows : int, default 10
        The fewest validation rows that test the output and choose the epoch and threshold; a smaller triple is
        trained on as a clean set instead (with ``selection="auto"``). A threshold tuned on a dozen clean rows
        still beats training on them.
    blend_candidates : sequence of float in [0, 1], default (0.0, 0.5)
        The base-model weights tried on a validation triple: the output whole (0) and the ½ blend. Each, and the
        base model itself (w = 1), is judged at its own threshold tuned on other validation rows (cross-fitted over
        ``val_folds`` parts); the best of those that do not lose to the base model is kept, else the base model.
    blend_confidence : float in (0, 1], default 0.4
        A candidate loses when its micro- or macro-F1 falls below the reference's in at least this share of 500
        bootstrap resamples (the reference: the base model on a validation triple, the prior blend on the held-out
        noisy labels).
    val_folds : int >= 2, default 5
        The parts a validation triple is cut into (multilabel-stratified) to judge each blend at a threshold tuned
        on the other parts.
    prior_base_weight : float in [0, 1], default 1/3
        w where no clean label tests the output (0 for a sparse and vague base model without any label; the
        noisy labels may keep the output whole).
    threshold : float in (0, 1] or "auto", default "auto"
        ``predict``'s threshold; "auto": chosen as the plan says.
    threshold_grid : "auto" or sequence of float in (0, 1], default "auto"
        The thresholds the threshold step chooses among; "auto": drawn from the scores (:func:`lsnpc.tune_threshold`),
        so a label whose scores all sit far below 0.5 can still be called.
    count_floor : float in (0, 1], default 0.05
        The lowest threshold a label count may choose (where no labelled row scores the choice).
    count_growth : float >= 1, default 1.5
        Without any label and with a flat base model (the blend's prior returns it whole), the label count is its
        expected count, but no more than this many times the labels a row it predicts at 0.5: a flat base model
        expects more labels than the data hold. Otherwise the base model's expected count is kept as it is.
    decoder_bias : {"default", "label_means"}, default "default"
        How g_φ's output bias starts: torch's default initialisation (about 0: probability 0.5 for every label), or
        at the log-odds of each label's mean base probability, so a sparse label starts near its own frequency.
    schedule : {"cosine", "paper", "constant"}, default "cosine"
        Learning-rate schedule ("paper": cosine annealing with a 10-epoch period, stepped per epoch).
    holdout_fraction : float in (0, 0.5], default 0.1
        Share of the training rows held out of training for the noisy criteria and the checks without labels.
    min_steps : int or "auto"
        Steps for ``epochs="auto"``; "auto": 2,000 where F1 chooses the epoch, 600 where the ELBO does.
    n_threads : int or None, default 1
        torch CPU threads in fit and predict (None: torch's setting); one is never far from the best, and on a
        busy machine more threads wait on each other (``benchmarks/bench_threads.py``).
    n_fits : int >= 1, default 1
        Networks trained (steps 2 and 3), each from its own seed; the output is their mean, and the blend and the
        threshold are decided on that mean. One fit's seed moves a small set's scores by points; the mean of
        several moves less and scores higher there (``docs/design.md``), for n_fits times the fit's time.
    random_state : int, numpy Generator or None
        The same seed gives the same numbers on the same machine.
    device : str, default "cpu"
        "cpu", "cuda", "cuda:N" or "auto".
    verbose : bool, default False
        Print one line per epoch.

    Attributes
    ----------
    report_ : FitReport            the plan and each step's decision, with its evidence
    threshold_ : float             ``predict``'s threshold
    base_weight_ : float           w, the base model's share of ``predict_proba``
    selection_ : str               the epoch criterion ("val_f1", "noisy_f1", "noisy_elbo", "last")
    best_epoch_, epochs_ : int     the epoch kept (0: the warm start) and the epochs run, by the first network
                                   (``report_["epoch"].evidence["best_epochs"]``: every network's)
    history_ : list of dict        the first network's per-epoch losses and selection scores
    models_, students_ : list      the trained networks, ``n_fits`` of each (students_ entries None without a
                                   student); ``model_`` and ``student_`` are the first
    n_features_in_, n_labels_ : int
    feature_names_in_ : ndarray of str   X's column names, when X was a DataFrame with string column names
    label_names_in_ : ndarray of str     pred_probs' column names, likewise
    """

    def __init__(
        self, *, latent: str = "student", nu: float = 2.01, nu0: float = 2.01, beta: float = 0.01, eta: float = 0.5,
        latent_dim: int = 64, label_embedding_dim: int = 128, hidden_dim: int = 256, encoder: nn.Module | None = None,
        epochs: int | str = "auto", batch_size: int = 32, lr: float = 2e-4, weight_decay: float = 1e-5,
        n_samples: int = 5, selection: str = "auto", train_feed: str = "sample", predict_feed: str = "probs",
        warm_start: bool = True, student: bool = True, guard: bool = True, min_val_rows: int = 10,
        blend_candidates: Sequence[float] = (0.0, 0.5), blend_confidence: float = 0.4, val_folds: int = 5,
        prior_base_weight: float = 1 / 3, threshold: float | str = "auto", threshold_grid: Sequence[float] | str = "auto",
        count_floor: float = 0.05, count_growth: float = 1.5, decoder_bias: str = "default", schedule: str = "cosine",
        holdout_fraction: float = 0.1, min_steps: int | str = "auto", n_threads: int | None = 1, n_fits: int = 1,
        random_state: Any = None, device: str = "cpu", verbose: bool = False,
    ) -> None:
        self.latent, self.nu, self.nu0, self.beta, self.eta = latent, nu, nu0, beta, eta
        self.latent_dim, self.label_embedding_dim, self.hidden_dim = latent_dim, label_embedding_dim, hidden_dim
        self.encoder, self.epochs, self.batch_size, self.lr, self.weight_decay = encoder, epochs, batch_size, lr, weight_decay
        self.n_samples, self.selection, self.train_feed, self.predict_feed = n_samples, selection, train_feed, predict_feed
        self.warm_start, self.student, self.guard, self.min_val_rows = warm_start, student, guard, min_val_rows
        self.blend_candidates, self.blend_confidence, self.val_folds = blend_candidates, blend_confidence, val_folds
        self.prior_base_weight, self.threshold, self.threshold_grid = prior_base_weight, threshold, threshold_grid
        self.count_floor, self.count_growth, self.decoder_bias = count_floor, count_growth, decoder_bias
        self.schedule = schedule
        self.holdout_fraction, self.min_steps = holdout_fraction, min_steps
        self.n_threads, self.n_fits = n_threads, n_fits
        self.random_state, self.device, self.verbose = random_state, device, verbose

    @property
    def model_(self) -> nn.Module:
        """The first trained latent-shift network (``models_[0]``)."""
        return self._first("models_")

    @property
    def student_(self) -> nn.Module | None:
        """The first network's corrected-label student (``students_[0]``; None without a student)."""
        return self._first("students_")

    def _first(self, name: str) -> Any:
        if name not in self.__dict__:
            raise AttributeError(f"this {type(self).__name__} is not fitted: it has no {name} (call fit first)")
        return self.__dict__[name][0]

    @classmethod
    def paper(cls, **overrides: Any) -> LSNPC:
        """The paper's recipe (appendix D and the authors' code): 20 epochs, batch 32, AdamW 2e-4, weight decay
        1e-5, β 0.01, η 0.5, ν = ν0 = 2.01, cosine annealing with a 10-epoch period, the epoch chosen on validation
        micro-F1 whatever the triple's size (or the held-out ELBO without one), no student, no blend, threshold 0.5.
        Pass ``encoder=base.trunk_`` to start from the base model's backbone as the paper does."""
        params: dict[str, Any] = dict(epochs=20, schedule="paper", student=False, guard=False, threshold=0.5,
                                      min_val_rows=1)
        params.update(overrides)
        return cls(**params)

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        """Check every constructor parameter (called by fit, and by load on a saved config)."""
        check_params(self)

    def _check_X(self, X: Any, name: str, *, min_samples: int = 1) -> np.ndarray:
        """X must be 2-d, or any rank >= 2 when a user encoder (e.g. over spatial maps) takes it."""
        if self.encoder is None:
            return check_array(X, name, ndim=2, min_samples=min_samples)
        if np.ndim(X) < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (n_samples, ...), got shape {np.shape(X)}")
        return check_array(X, name, ndim=np.ndim(X), min_samples=min_samples)

    def _threshold_candidates(self) -> tuple[float, ...] | str:
        """``threshold_grid`` checked: "auto" or a sorted tuple (every threshold step's candidates)."""
        return check_thresholds(self.threshold_grid, "threshold_grid", auto=True)

    # ------------------------------------------------------------------ fit
    def fit(
        self, X: Any, pred_probs: Any, *, labels: Any = None, X_clean: Any = None, y_clean: Any = None,
        pred_probs_clean: Any = None, X_val: Any = None, y_val: Any = None, pred_probs_val: Any = None,
        X_unlabelled: Any = None, pred_probs_unlabelled: Any = None,
        on_epoch: Callable[[int, int, dict[str, Any]], None] | None = None,
    ) -> LSNPC:
        """Learn the correction from the base model's probabilities, in the steps of the class docstring.

        Parameters
        ----------
        X : array (n, d) (or (n, ...) when ``encoder`` takes other shapes): the training rows' features.
        pred_probs : array (n, L) in [0, 1]: the base classifier's probabilities on X.
        labels : array (n, L) 0/1 or lists of label indices, optional
            The noisy labels of the training rows (those the base model was trained on). Never trained on: they
            choose the epoch, test the output and choose the threshold where no validation triple can.
        X_clean, y_clean, pred_probs_clean : arrays (n_c, d), (n_c, L) 0/1, (n_c, L), optional
            A clean set, trained on after each epoch (semi-supervised, Algorithm 1).
        X_val, y_val, pred_probs_val : arrays, optional
            A clean validation triple: never trained on when it has ``min_val_rows`` rows or more.
        X_unlabelled, pred_probs_unlabelled : arrays (n_u, d), (n_u, L), optional
            Rows the base model was not trained on (new rows, a held-out split, the rows to be predicted), without
            labels: where no triple tunes the threshold, the label count is measured on the output over these rows,
            not over the training rows, whose probabilities a model that memorised them makes more certain than
            any new row's. Never trained on.
        on_epoch : callable, optional
            ``on_epoch(epoch, epochs, entry)`` after the warm start (entry["phase"] "warm_start"), each epoch
            ("train"), the student ("student") and the decisions ("decide"): a hook for progress displays. With
            ``n_fits`` > 1 the entries of steps 2 and 3 say which network reports them (entry["network"], from 1,
            of entry["networks"]).

        Returns
        -------
        self
        """
        self._check_params()
        self._require_pred_probs(pred_probs)
        names = column_names(X), column_names(pred_probs)
        Xa = self._check_X(X, "X", min_samples=2)
        P = check_probabilities(pred_probs, "pred_probs", min_samples=2)
        check_same_n_samples(X=Xa, pred_probs=P)
        given = None if labels is None else check_labels(labels, P)
        same = {"check_X": self._check_X, "sample_shape": Xa.shape[1:], "n_labels": P.shape[1]}
        clean = check_labelled_triple("clean", X_clean, y_clean, pred_probs_clean, **same)
        val = check_labelled_triple("val", X_val, y_val, pred_probs_val, **same)
        unlabelled = check_unlabelled_pair("unlabelled", X_unlabelled, pred_probs_unlabelled, **same)
        warn_if_flat(P)
        plan = make_plan(
            n_rows=len(P), n_val=0 if val is None else len(val[1]),
            n_val_positives=0 if val is None else int(np.count_nonzero(val[1])), labels=given is not None,
            selection=self.selection, guard=bool(self.guard), threshold_given=self.threshold != "auto",
            min_val_rows=int(self.min_val_rows), holdout_fraction=float(self.holdout_fraction),
            unlabelled=unlabelled is not None)
        if given is not None and plan.evidence == "noisy labels" and unlabelled is None:
            warn_if_memorised(P, given)
        if plan.val_set_aside:
            if self.selection == "val_f1":
                raise ValueError(f"selection='val_f1' needs a y_val with a positive label: {plan.val_set_aside}")
            warnings.warn(f"y_val is set aside: {plan.val_set_aside}; LSNPC fits as without it", UserWarning,
                          stacklevel=2)
            val = None
        if plan.selection == "val_f1" and val is None:
            raise ValueError("selection='val_f1' needs the validation triple X_val, y_val, pred_probs_val")
        if plan.selection == "noisy_f1" and given is None:
            raise ValueError("selection='noisy_f1' needs the training rows' noisy labels: fit(X, pred_probs, labels=...)")
        if plan.val_trained_on:
            clean = val if clean is None else tuple(np.concatenate([c, v]) for c, v in zip(clean, val))
        rng = check_random_state(self.random_state)
        seed, predict_seed = torch_seed_from(rng), torch_seed_from(rng)
        self.device_ = resolve_device(self.device)
        for attribute, value in zip(("feature_names_in_", "label_names_in_"), names):
            if value is None:
                self.__dict__.pop(attribute, None)
            else:
                setattr(self, attribute, value)
        with num_threads(self.n_threads):  # the whole fit, its hooks too, on n_threads
            self._fit_steps(Xa, P, given, clean, val, unlabelled, plan, rng, seed, predict_seed, on_epoch)
        return self

    def _fit_steps(self, Xa: np.ndarray, P: np.ndarray, given: np.ndarray | None, clean: Any, val: Any,
                   unlabelled: tuple[np.ndarray, np.ndarray] | None, plan: FitPlan, rng: np.random.Generator,
                   seed: int, predict_seed: int, on_epoch: Any) -> None:
        """Steps 2–5 of the class docstring, then the report. With ``n_fits`` > 1 steps 2 and 3 run once per
        network; the later networks draw their seeds from ``rng`` after the first is done (so the first is the
        fit ``n_fits=1`` gives) and hold out the first's rows."""
        val_select = val if plan.selection == "val_f1" else None
        use_val = val if plan.evidence == "validation" else None
        models, students, epochs, student_epochs = [], [], [], []
        hold = None
        n_fits = int(self.n_fits)
        for k in range(n_fits):
            if k:
                seed, predict_seed = torch_seed_from(rng), torch_seed_from(rng)
            hook = on_epoch if on_epoch is None or n_fits == 1 else _tagged(on_epoch, k + 1, n_fits)
            result, model = self._train(Xa, P, given, clean, val_select, plan, rng, seed, predict_seed, hook,
                                        holdout=hold)
            if k == 0:
                hold = (np.sort(result.holdout_rows) if result.holdout_rows is not None
                        else np.zeros(0, dtype=np.int64))
                self.epochs_, self.best_epoch_, self.history_ = result.epochs, result.best_epoch, result.history
                self.selection_, self.predict_seed_ = result.selection, predict_seed
            trained = np.setdiff1d(np.arange(len(P)), hold)
            student, fitted = self._fit_student(model, Xa, P, trained, use_val, torch_seed_from(rng))
            models.append(model)
            students.append(student)
            epochs.append(result.best_epoch)
            student_epochs.append(fitted)
            if hook is not None:
                hook(self.epochs_, self.epochs_, {"phase": "student"})
        self.models_, self.students_ = models, students
        self._student_share = STUDENT_SHARE if self.student else None
        student = (Decision("student", None, "off") if not self.student else Decision(
            "student", STUDENT_SHARE, "mean", {**student_epochs[0], "best_epochs": [f["best_epoch"] for f in student_epochs]}))
        check_rows = hold if len(hold) else trained  # rows the correction did not train on, where there are some
        blend = self._decide_blend(plan, Xa, P, given, val, check_rows, np.random.default_rng(self.predict_seed_))
        self.base_weight_ = float(blend.choice)
        threshold = self._decide_threshold(plan, Xa, P, given, val, hold, flat=bool(blend.evidence.get("flat")),
                                           unlabelled=unlabelled)
        self.threshold_ = float(threshold.choice)
        epoch = Decision("epoch", self.best_epoch_, self.selection_, {
            "epochs": self.epochs_, "n_holdout": len(hold), "n_val": len(val[1]) if plan.selection == "val_f1" else 0,
            "n_clean": 0 if clean is None else len(clean[1]), "best_epochs": epochs})
        self.report_ = FitReport(plan, (epoch, student, blend, threshold))
        if on_epoch is not None:
            on_epoch(self.epochs_, self.epochs_, {"phase": "decide"})

    def _train(self, X: np.ndarray, P: np.ndarray, given: np.ndarray | None, clean: Any, val: Any, plan: FitPlan,
               rng: np.random.Generator, seed: int, predict_seed: int, on_epoch: Any,
               holdout: np.ndarray | None = None) -> tuple[TrainResult, nn.Module]:
        """Step 2 for one network: build and train it (``holdout``: the training rows to hold out of training, None:
        drawn from ``rng``); returns the training result (its held-out rows among it) and the network. Sets the
        fitted fields every network shares (the features' and labels' shapes)."""
        params = self.get_params(deep=False)
        with num_threads(self.n_threads), seeded(seed, self.device_):
            data_dim = None if self.encoder is None else infer_output_dim(self.encoder, as_tensor(X[:2]))
            model = build_model(ModelSpec.from_params(params), n_features=int(np.prod(X.shape[1:])),
                                n_labels=P.shape[1], encoder=self.encoder, data_dim=data_dim).to(self.device_)
            model.draw_monte_carlo(torch.Generator().manual_seed(predict_seed))
            if self.encoder is None:
                model.data_encoder.set_standardization(*map(torch.as_tensor, standardization(X)))
            if self.decoder_bias == "label_means":
                start_at_label_means(model, P)
            data = TrainingData.build(X, P, clean=clean, val=val, labels=given, device=self.device_)
            result = train_latent_shift_model(
                model, data, config=TrainingConfig.from_params(params), own_encoder=self.encoder is None,
                selection=plan.selection, n_holdout=plan.n_holdout, rng=rng, device=self.device_, on_epoch=on_epoch,
                val_threshold=None if plan.threshold == "tuned on validation" else float(
                    self.threshold if plan.threshold == "given" else 0.5),
                thresholds=self._threshold_candidates(), holdout_rows=holdout)
        self.n_features_in_, self.input_shape_ = int(np.prod(X.shape[1:])), tuple(int(s) for s in X.shape[1:])
        self.n_labels_, self.data_dim_ = P.shape[1], model.label_decoder.data_dim
        return result, model

    def _fit_student(self, model: nn.Module, X: np.ndarray, P: np.ndarray, rows: np.ndarray, val: Any,
                     seed: int) -> tuple[LabelStudent | None, dict[str, Any]]:
        """Step 3 for one network: its student fitted to ``model``'s corrected posterior of the training ``rows``
        (not the held-out ones); returns the student (None with ``student=False``) and its fit's numbers."""
        if not self.student:
            return None, {}
        targets = self._correct_with(model, X[rows], P[rows])
        encoder = copy.deepcopy(model.data_encoder)
        with num_threads(self.n_threads), seeded(seed, self.device_):
            student = LabelStudent(encoder, self.data_dim_, self.n_labels_).to(self.device_)
            result = fit_student(student, as_tensor(X[rows], device=self.device_),
                                 as_tensor(targets, device=self.device_), val=None if val is None else val[:2])
        return student, {"epochs": result.epochs, "best_epoch": result.best_epoch, "chosen_by": result.selection,
                         "n_rows": len(rows)}

    def _decide_blend(self, plan: FitPlan, X: np.ndarray, P: np.ndarray, given: np.ndarray | None, val: Any,
                      rows: np.ndarray, rng: np.random.Generator) -> Decision:
        """Step 4: the base model's weight w (:mod:`lsnpc.corrector.blend`)."""
        if plan.blend == "off":
            return Decision("blend", 0.0, "off")
        if plan.blend == "validation test":
            X_val, y_val, p_val = val
            folds = multilabel_folds(y_val, int(self.val_folds), rng)
            w, evidence = blending.test_on_validation(
                y_val, self._output(X_val, p_val), p_val, candidates=tuple(self.blend_candidates),
                confidence=float(self.blend_confidence), folds=folds, rng=rng,
                thresholds=self._threshold_candidates())
            return Decision("blend", w, plan.blend, evidence)
        if plan.blend == "noisy-label test":
            w, evidence = blending.test_on_noisy_labels(
                given[rows], self._output(X[rows], P[rows]), P[rows], prior=float(self.prior_base_weight),
                confidence=float(self.blend_confidence), rng=rng)
        else:
            w, evidence = blending.prior_weight(P, prior=float(self.prior_base_weight))
        return Decision("blend", w, plan.blend, evidence)

    def _decide_threshold(self, plan: FitPlan, X: np.ndarray, P: np.ndarray, given: np.ndarray | None, val: Any,
                          hold: np.ndarray, *, flat: bool = False,
                          unlabelled: tuple[np.ndarray, np.ndarray] | None = None) -> Decision:
        """Step 5: ``predict``'s threshold, for the output as blended (:mod:`lsnpc.corrector.threshold`)."""
        if plan.threshold == "given":
            return Decision("threshold", float(self.threshold), "given")
        grid = self._threshold_candidates()
        if plan.threshold == "tuned on validation":
            curve = tune_threshold(val[1], self._blended(val[0], val[2]), thresholds=grid)
            return Decision("threshold", curve.threshold, plan.threshold, curve.to_dict())
        # no clean label: the output on the training rows (on the unlabelled rows, where given) keeps to the
        # labels a row of the noisy labels, or else to the base model's expected count (for a flat base model,
        # within count_growth times the labels a row it predicts at 0.5); held-out noisy labels choose among
        # those thresholds
        if given is not None:
            expected, source = float(given.sum(1).mean()), {"count_of": "noisy labels"}
        else:
            base_count = float(P.sum(1).mean())
            limit = (float(self.count_growth) * float((self._blended(X, P) >= 0.5).sum(1).mean()) if flat
                     else None)  # flat: the base model whole, so no correction is computed for it
            expected = base_count if limit is None else min(base_count, limit)
            source = {"count_of": "base model", "base_expected_count": base_count, "growth_limit": limit}
        floor = float(self.count_floor)
        if plan.threshold == "label count on unlabelled rows":
            counted = self._blended(*unlabelled)
            chosen, evidence = count_threshold(counted, expected, grid, floor=floor)
            return Decision("threshold", chosen, plan.threshold, {**evidence, **source, "n_counted": len(counted)})
        output = self._blended(X, P)
        if plan.threshold == "tuned on held-out noisy labels":
            curve = tune_threshold(given[hold], output[hold], thresholds=within_count(output, expected, grid, floor=floor))
            return Decision("threshold", curve.threshold, plan.threshold,
                            {**curve.to_dict(), "expected_count": expected, "floor": floor, **source})
        chosen, evidence = count_threshold(output, expected, grid, floor=floor)
        return Decision("threshold", chosen, plan.threshold, {**evidence, **source})

    # ------------------------------------------------------------------ predict
    def _check_predict_input(self, X: Any, pred_probs: Any) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self, "model_")
        check_names(self, column_names(X), "X", "feature_names_in_")
        check_names(self, column_names(pred_probs), "pred_probs", "label_names_in_")
        Xa = self._check_X(X, "X")
        P = check_probabilities(pred_probs, "pred_probs")
        check_same_n_samples(X=Xa, pred_probs=P)
        if Xa.shape[1:] != self.input_shape_:
            if Xa.ndim == 2:
                check_n_features(Xa, "X", self.n_features_in_, "features", type(self).__name__)
            raise ValueError(f"X has sample shape {Xa.shape[1:]}, but fit saw {self.input_shape_}")
        check_n_features(P, "pred_probs", self.n_labels_, "labels", type(self).__name__)
        warn_if_far_from_training(self.model_.data_encoder, Xa)
        return Xa, P

    def _correct_with(self, model: nn.Module, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """One network's correction equation (n, L) by Monte Carlo with its fixed draws."""
        model.eval()
        with num_threads(self.n_threads):
            return predict_corrected(model, X, P, feed=self.predict_feed, device=self.device_)

    def _raw_correct(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """The correction equation (n, L), without the students: the networks' mean."""
        corrected = [self._correct_with(model, X, P) for model in self.models_]
        return corrected[0] if len(corrected) == 1 else np.mean(corrected, axis=0).astype(np.float32)

    def _output(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """LSNPC's output before the blend (n, L): per network, the correction averaged with its student's
        probabilities; then the mean over the ``n_fits`` networks."""
        outputs = []
        for model, student in zip(self.models_, self.students_):
            output = self._correct_with(model, X, P)
            if student is not None:
                with num_threads(self.n_threads):
                    taught = student.predict_proba(as_tensor(X, device=self.device_)).cpu().numpy()
                share = float(self._student_share)
                output = (1 - share) * output + share * taught
            outputs.append(output)
        output = (outputs[0] if len(outputs) == 1 else np.mean(outputs, axis=0)).astype(np.float32)
        finite = np.isfinite(output).all(axis=1)
        if not finite.all():
            raise ValueError(f"LSNPC computed non-finite probabilities for {int((~finite).sum())} of {len(finite)} "
                             f"rows (first: row {int(np.argmin(finite))}); the model's weights are damaged or X is "
                             "far outside its training data")
        return output

    def _blended(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """(1 − w) · output + w · P (n, L), w = ``base_weight_``; the output is not computed where w is 1."""
        w = self.base_weight_
        if w == 1.0:
            return P.copy()
        output = self._output(X, P)
        return output if w == 0.0 else ((1 - w) * output + w * P).astype(np.float32)

    def predict_proba(self, X: Any, pred_probs: Any) -> np.ndarray:
        """Corrected label probabilities (n, L) float32 in [0, 1]: ``(1 − w) · output + w · pred_probs``, the output
        being the correction E[y | x, h] (``n_samples`` Monte-Carlo draws) averaged with the student's
        probabilities, w = ``base_weight_``.

        X : array (n, d); pred_probs : array (n, L), the base model's probabilities on X.
        """
        return self._blended(*self._check_predict_input(X, pred_probs))

    def predict(self, X: Any, pred_probs: Any, threshold: float | None = None) -> np.ndarray:
        """Corrected 0/1 labels (n, L) int64: ``predict_proba(X, pred_probs) >= threshold`` (None: ``threshold_``)."""
        check_is_fitted(self, "model_")
        threshold = self.threshold_ if threshold is None else check_threshold(threshold, "threshold")
        return (self.predict_proba(X, pred_probs) >= threshold).astype(np.int64)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, *, overwrite: bool = False) -> None:
        """Write the fitted corrector to the folder ``path``: safetensors weights (``model.safetensors``, and
        ``student.safetensors`` with a student) and ``config.json`` (parameters, fitted fields, the report, SHA-256
        checksums of everything). Atomic: the folder appears only once complete. An existing saved model is replaced
        only with ``overwrite=True``; any other folder or file is never replaced (FileExistsError)."""
        check_is_fitted(self, "model_")
        save_corrector(path, estimator=self, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path, *, encoder: nn.Module | None = None, device: str = "cpu") -> LSNPC:
        """Load a corrector written by :meth:`save`. Never unpickles; every part is checked first (checksums,
        every parameter and fitted field, the report, the weights against the config), and anything damaged
        raises one ValueError saying what. A corrector fitted with a user ``encoder`` stores its weights, not its
        code: pass a module of the same architecture as ``encoder``."""
        return restore_corrector(cls, path, encoder=encoder, device=device)

