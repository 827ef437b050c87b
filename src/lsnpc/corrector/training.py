"""LSNPC's training loop (Algorithm 1), its warm start, and epoch selection.

Kept apart from the estimator so that estimator.py reads as the public API and this file as the
procedure; it reads a frozen :class:`~lsnpc.corrector.config.TrainingConfig`, never the estimator.
Batches are drawn by indexing in-memory tensors (no DataLoader: with batch 32 its per-batch
Python overhead is a large share of a step).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._numerics import minibatches as _batches
from .._torch import as_tensor, seeded
from ..metrics import macro_f1, micro_f1
from .config import TrainingConfig
from .blend import collapse_statistics, is_collapse
from .backprop import NoisyBatchStep, aten_kernels
from .inference import predict_corrected
from .threshold import tune_threshold
from .model import LatentShiftModel
from .objective import supervised_terms, unsupervised_loss, unsupervised_terms
from .optim import FlatAdamW, TrainStep, autograd_gradient

_NOISY_CLIP = 2.0  # gradient-norm clipping of the authors' code: 2 on noisy batches,
_CLEAN_CLIP = 10.0  # 10 on clean batches
_AUTO_MIN_EPOCHS, _AUTO_MAX_EPOCHS = 5, 200
# Target optimiser steps of epochs="auto". With clean validation labels the epoch is chosen on
# validation F1, and longer training helps small data sets settle (2000 steps: docs/design.md).
# Without them the epoch is chosen on the noisy-data ELBO, which keeps improving as g_φ learns to
# reproduce the base model's labels — i.e. as the correction fades — so training stays short (600
# steps: 2000 steps lost 14 micro-F1 points on scene, 30% symmetric).
# F1 against the noisy training labels of held-out rows ("noisy_f1") finds the early epochs that
# validation F1 finds, so it gets the long schedule too.
AUTO_STEPS_WITH_VALIDATION = 2000
AUTO_STEPS_WITHOUT_VALIDATION = 600
# Subtracted from the "noisy_f1" score (micro- plus macro-F1, in [0, 2]) of an epoch whose held-out correction
# blend.is_collapse calls a collapse: such epochs rank below all others, and are chosen only when none passes
_IMPLAUSIBLE_PENALTY = 10.0


def f1_micro_macro(y_true: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> tuple[float, float]:
    """(micro-F1, macro-F1) of thresholded probabilities (lsnpc.metrics, i.e. scikit-learn's)."""
    return micro_f1(y_true, probs, threshold), macro_f1(y_true, probs, threshold)


@dataclass
class TrainingData:
    """Tensors for training: noisy (X, P), optional clean (X, y, P) and validation (numpy) triples, and
    optionally the training rows' observed labels (numpy (n, L) 0/1; never trained on)."""

    X: torch.Tensor
    P: torch.Tensor
    clean: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None
    val: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    labels: np.ndarray | None = None

    @classmethod
    def build(
        cls,
        X: np.ndarray,
        P: np.ndarray,
        *,
        clean: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        val: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        labels: np.ndarray | None = None,
        device: torch.device,
    ) -> TrainingData:
        def t(a: np.ndarray) -> torch.Tensor:
            return as_tensor(a, dtype=torch.float32, device=device)

        clean_t = None if clean is None else (t(clean[0]), t(clean[1]), t(clean[2]))
        return cls(t(X), t(P), clean_t, val, labels)


@dataclass
class TrainResult:
    epochs: int
    best_epoch: int
    selection_description: str
    history: list[dict[str, Any]] = field(default_factory=list)
    selection: str = "last"  # the criterion that chose the epoch: "val_f1", "noisy_f1", "noisy_elbo" or "last"
    holdout_rows: np.ndarray | None = None  # the training rows held out of training to choose it (noisy criteria)


def resolve_epochs(epochs: int | str, n_train: int, batch_size: int, min_steps: int) -> int:
    """Epoch count; "auto" aims at ``min_steps`` optimiser steps within [5, 200] epochs."""
    if epochs != "auto":
        return int(epochs)
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return int(np.clip(math.ceil(min_steps / steps_per_epoch), _AUTO_MIN_EPOCHS, _AUTO_MAX_EPOCHS))


def start_at_label_means(model: LatentShiftModel, P: np.ndarray) -> None:
    """Set g_φ's output bias to the log-odds of each label's mean base probability (P (n, L)), so the decoder
    starts at the labels' own frequencies: from torch's default start (probability about 0.5) Adam needs
    thousands of steps at LSNPC's learning rate to reach a label seen in 1% of the rows, and an epoch chosen
    before then predicts every rare label everywhere. The mean is kept within [1/(n+1), n/(n+1)] so a label
    that is never (or always) predicted gets a finite start."""
    n = len(P)
    mean = np.clip(np.asarray(P, dtype=np.float64).mean(0), 1.0 / (n + 1), n / (n + 1.0))
    bias = model.label_decoder.out.bias
    with torch.no_grad():
        bias.copy_(torch.as_tensor(np.log(mean / (1.0 - mean)), dtype=bias.dtype, device=bias.device))


def _feed(probs: torch.Tensor, mode: str) -> torch.Tensor:
    return torch.bernoulli(probs) if mode == "sample" else probs


def warm_start_encoder(
    model: LatentShiftModel, X: torch.Tensor, P: torch.Tensor, *, steps: int, device: torch.device
) -> float:
    """Pre-train LSNPC's own data encoder to predict the base probabilities P (soft BCE).

    Only the encoder is kept; the throw-away linear head is discarded. The label decoder is not
    touched on purpose: LSNPC corrects by making g_φ lean on the latent (which carries ŷ through the
    shift model), and a decoder initialised to reproduce P from x alone leaves the latent unused and the
    base model's mistakes in place (scene, 30% symmetric noise: −2.4 micro-F1 instead of +9.8). Returns the final
    distillation loss.
    """
    data_dim = model.label_decoder.data_dim
    head = nn.Sequential(nn.BatchNorm1d(data_dim), nn.Linear(data_dim, P.shape[1])).to(X.device)
    optimizer = FlatAdamW([model.data_encoder, head], weight_decay=0.0)
    model.data_encoder.train()
    batch_size = min(256, len(X))

    def loss_fn(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = head(model.data_encoder(X.index_select(0, idx)))
        loss = F.binary_cross_entropy_with_logits(logits, P.index_select(0, idx))
        return loss, loss.detach().reshape(1)

    done = 0
    with optimizer:
        step = TrainStep(optimizer, autograd_gradient(optimizer, loss_fn), clip=None, n_values=1, device=device)
        while done < steps:
            for idx in _batches(len(X), batch_size, device=device):
                step(idx, lr=1e-3)
                done += 1
                if done >= steps:
                    break
    return float(step.last_values()[0]) if done else float("nan")


class _Selector:
    """Scores the model after each epoch and keeps the best state in memory."""

    def __init__(self, mode: str, config: TrainingConfig, data: TrainingData, holdout: tuple | None, seed: int,
                 val_threshold: float | None = 0.5, thresholds: Any = "auto"):
        self.mode, self.config, self.data, self.holdout, self.seed = mode, config, data, holdout, seed
        self.val_threshold, self.thresholds = val_threshold, thresholds
        # the held-out rows' base probabilities on the host, once: blend.collapse_statistics reads them every epoch
        self._holdout_base = (holdout[1].detach().cpu().numpy()
                              if holdout is not None and mode == "noisy_f1" else None)
        self.best_score = -math.inf
        self.best_epoch = 0
        self.best_state: dict[str, torch.Tensor] | None = None

    @torch.no_grad()
    def score(self, model: LatentShiftModel) -> dict[str, float]:
        model.eval()
        out: dict[str, float] = {}

        def correct(X: Any, probs: Any) -> np.ndarray:
            return predict_corrected(model, X, probs, feed=self.config.predict_feed, device=self.data.X.device)

        with seeded(self.seed):
            if self.data.val is not None:
                Xv, yv, pv = self.data.val
                corrected = correct(Xv, pv)
                out["val_micro_f1"], out["val_macro_f1"] = f1_micro_macro(yv, corrected)
                if self.val_threshold is None:  # scored as predict will decide: at the threshold tuned on the rows
                    threshold = tune_threshold(yv, corrected, thresholds=self.thresholds).threshold
                    out["val_threshold"] = threshold
                    out["val_tuned_micro_f1"], out["val_tuned_macro_f1"] = f1_micro_macro(yv, corrected, threshold)
            if self.holdout is not None and self.mode == "noisy_f1":
                Xh, ph, yh = self.holdout
                corrected = correct(Xh, ph)
                out["holdout_noisy_micro_f1"], out["holdout_noisy_macro_f1"] = f1_micro_macro(yh, corrected)
                # blend.collapse_statistics on the held-out rows: an epoch that is_collapse describes is
                # not chosen while another passes
                kept, ratio = collapse_statistics(corrected, self._holdout_base)
                out["holdout_kept_base_positives"], out["holdout_cardinality_ratio"] = kept, ratio
            elif self.holdout is not None:
                Xh, noisy_h = self.holdout
                loss, _ = unsupervised_loss(model, model.data_encoder(Xh), noisy_h, self.config.beta)
                out["holdout_neg_elbo"] = float(loss)
        model.train()
        return out

    def update(self, model: LatentShiftModel, epoch: int, scores: dict[str, float]) -> None:
        """Keep the model's state if epoch ``epoch`` scores best so far. The warm start (epoch 0) is kept
        only as a fallback: its latent networks are untrained, so any trained epoch replaces it whatever
        the scores say. (Where every epoch ties — a validation set without a positive label scores 0
        F1 everywhere — the earliest would otherwise win, and that was the warm start: on a generated
        19-label problem at 300 rows, 15 validation rows without a label, it lost 6–13 micro-F1.)"""
        if epoch == 0:  # the warm start: stored, but with the lowest score
            value = -math.inf
        elif self.mode == "val_f1":
            value = (scores["val_micro_f1"] if self.val_threshold is not None
                     else scores["val_tuned_micro_f1"] + scores["val_tuned_macro_f1"])
        elif self.mode == "noisy_f1":
            value = scores["holdout_noisy_micro_f1"] + scores["holdout_noisy_macro_f1"]  # in [0, 2]
            if is_collapse(scores["holdout_kept_base_positives"], scores["holdout_cardinality_ratio"]):
                value -= _IMPLAUSIBLE_PENALTY  # below every epoch that passes, above the warm start
        elif self.mode == "noisy_elbo":
            value = -scores["holdout_neg_elbo"]
        else:
            value = float(epoch)
        if value > self.best_score or epoch == 0:  # strict: ties keep the earlier (trained) epoch
            self.best_score, self.best_epoch = value, epoch
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}


def _describe(mode: str, n_val: int, n_holdout: int, n_clean: int = 0) -> str:
    """Which criterion chose the epoch and which labels it used; and whether clean labels were trained on
    (semi-supervised), so "no clean labels" is never said of a model that learnt from some."""
    trained = f"; trained on a clean set of {n_clean} samples (X_clean, y_clean)" if n_clean else ""
    used = "no clean labels used to choose it" if n_clean else "no clean labels used"
    if mode == "val_f1":
        return f"val_f1: epoch chosen by F1 on {n_val} clean validation labels (X_val, y_val){trained}"
    if mode == "noisy_f1":
        return (f"noisy_f1: epoch chosen by micro- plus macro-F1 against the observed (noisy) labels of "
                f"{n_holdout} held-out training rows ({used}){trained}")
    if mode == "noisy_elbo":
        return f"noisy_elbo: epoch chosen by the ELBO on {n_holdout} held-out noisy samples ({used}){trained}"
    return f"last: the final epoch (no selection, no labels used to choose it){trained}"


def learning_rate(schedule: str, base: float, step: int, epoch: int, total_steps: int) -> float:
    """The learning rate of optimiser step ``step`` (0-based) in epoch ``epoch`` (0-based).

    "paper": cosine annealing with a 10-epoch period stepped per epoch, as in the authors' code (the rate
    climbs again after epoch 10); "constant"; "cosine": 3% linear warm-up, then cosine decay over all
    steps to 5% of the base rate.
    """
    if schedule == "paper":
        return base * 0.5 * (1 + math.cos(math.pi * epoch / 10))
    if schedule == "constant":
        return base
    warmup = max(1, int(0.03 * total_steps))
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return base * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# The noisy-batch gradient on a CUDA device: "handwritten" (NoisyBatchStep) or "autograd". Both run
# as CUDA graphs there; the hand-written one launches fewer kernels: 0.63 against 0.75 ms per batch-32
# step on an H100, 11.5 against 13.6 s for the default fit at COCO scale (benchmarks/bench_gpu.py,
# docs/speed.md). It draws dropout masks with bernoulli_, where F.dropout uses another kernel on a
# GPU, so its training equals autograd's in distribution, not draw for draw.
GPU_NOISY_GRADIENT = "handwritten"


class _HandwrittenRows:
    """:class:`NoisyBatchStep` on the rows ``idx`` of X and P, for :class:`TrainStep`."""

    def __init__(self, step: NoisyBatchStep, X: torch.Tensor, P: torch.Tensor) -> None:
        self.step, self.X, self.P = step, X, P
        self.needs_autograd = step.needs_autograd

    def __call__(self, idx: torch.Tensor) -> tuple[float, float, float] | torch.Tensor:
        return self.step(self.X.index_select(0, idx), self.P.index_select(0, idx))


def _noisy_gradient(
    model: LatentShiftModel,
    optimizer: FlatAdamW,
    X: torch.Tensor,
    P: torch.Tensor,
    config: TrainingConfig,
    device: torch.device,
    *,
    kind: str | None = None,
) -> Callable[[torch.Tensor], Any]:
    """The gradient of a noisy batch (rows ``idx``) for :class:`TrainStep`: written out by hand where it
    is (student, gauss; :class:`NoisyBatchStep`), else autograd's. ``kind``: "handwritten" or
    "autograd" (the benchmarks and tests compare them); None: the hand-written one, on a GPU as
    ``GPU_NOISY_GRADIENT`` says."""
    gpu = device.type == "cuda"
    if kind is None:
        kind = GPU_NOISY_GRADIENT if gpu else "handwritten"
    if kind not in ("handwritten", "autograd"):
        raise ValueError(f"kind must be 'handwritten', 'autograd' or None, got {kind!r}")
    if kind == "handwritten" and NoisyBatchStep.supports(model, gpu=gpu):
        return _HandwrittenRows(NoisyBatchStep(model, beta=config.beta, feed=config.train_feed), X, P)

    def loss_fn(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = model.data_encoder(X.index_select(0, idx))
        return unsupervised_terms(model, h, _feed(P.index_select(0, idx), config.train_feed), config.beta)

    return autograd_gradient(optimizer, loss_fn)


def train_latent_shift_model(
    model: LatentShiftModel,
    data: TrainingData,
    *,
    config: TrainingConfig,
    own_encoder: bool,
    selection: str,
    n_holdout: int = 0,
    rng: np.random.Generator,
    device: torch.device,
    on_epoch: Callable[[int, int, dict[str, Any]], None] | None = None,
    val_threshold: float | None = 0.5,
    thresholds: Any = "auto",
    holdout_rows: np.ndarray | None = None,
) -> TrainResult:
    """Algorithm 1: per epoch a pass over the noisy data, then one over the clean data (if any).

    ``val_threshold``: where a validation triple chooses the epoch ("val_f1"), the threshold its micro-F1 is
    scored at (the paper's 0.5, or the fixed threshold ``predict`` will use); None: each epoch is scored as
    ``predict`` will decide it when its threshold is tuned, micro- plus macro-F1 at the threshold
    :func:`~lsnpc.corrector.threshold.tune_threshold` (candidates ``thresholds``) chooses on the triple.

    ``own_encoder``: the data encoder is LSNPC's own (so ``config.warm_start`` applies to it).
    ``n_holdout``: training rows held out (drawn from ``rng``) for the noisy criteria ("noisy_f1", "noisy_elbo");
    the plan's count (:func:`lsnpc.corrector.plan.holdout_size`). ``holdout_rows``: those rows given instead (the
    ``n_holdout`` indices another network of the same fit held out), the rest shuffled by ``rng``.
    ``on_epoch(epoch, epochs, entry)``: called after the warm start (epoch 0) and after each epoch with
    its history entry (progress bars); it sees the numbers, it does not change them.
    """
    X, P = data.X, data.P
    holdout = None
    given_rows, holdout_rows = holdout_rows, None
    if selection in ("noisy_elbo", "noisy_f1"):
        n_hold = n_holdout
        if len(X) - n_hold < 2 or n_hold < 2:
            selection = "last"
        else:
            if given_rows is None:
                order = rng.permutation(len(X))
            else:
                given_rows = np.asarray(given_rows, dtype=np.int64)
                if len(given_rows) != n_hold:
                    raise ValueError(f"holdout_rows must hold n_holdout = {n_hold} row indices, got {len(given_rows)}")
                order = np.concatenate([given_rows, rng.permutation(np.setdiff1d(np.arange(len(X)), given_rows))])
            perm = torch.as_tensor(order, device=device)
            hold_idx, train_idx = perm[:n_hold], perm[n_hold:]
            holdout_rows = order[:n_hold]
            if selection == "noisy_elbo":
                holdout = (X[hold_idx], _feed(P[hold_idx], config.train_feed))
            else:
                if data.labels is None:
                    raise ValueError("selection='noisy_f1' needs the training rows' labels (TrainingData.labels)")
                holdout = (X[hold_idx], P[hold_idx], data.labels[order[:n_hold]])
            X, P = X[train_idx], P[train_idx]

    min_steps = config.min_steps
    if min_steps == "auto":
        # the ELBO's short schedule wherever it chooses, a validation triple beside it or not
        f1_chosen = selection == "noisy_f1" or (selection != "noisy_elbo" and data.val is not None)
        min_steps = AUTO_STEPS_WITH_VALIDATION if f1_chosen else AUTO_STEPS_WITHOUT_VALIDATION
    epochs = resolve_epochs(config.epochs, len(X), config.batch_size, min_steps)
    steps_per_epoch = len(_batches(len(X), config.batch_size))
    clean_steps = 0 if data.clean is None else len(_batches(len(data.clean[0]), config.batch_size))
    selector = _Selector(selection, config, data, holdout, seed=int(rng.integers(2**62)), val_threshold=val_threshold,
                         thresholds=thresholds)
    history: list[dict[str, Any]] = []

    if config.warm_start and own_encoder:
        steps = int(np.clip(3 * math.ceil(len(X) / 256), 150, 600))
        loss = warm_start_encoder(model, X, P, steps=steps, device=device)
        entry = {"epoch": 0, "phase": "warm_start", "warm_start_loss": loss, **selector.score(model)}
        history.append(entry)
        selector.update(model, 0, entry)
        if on_epoch is not None:
            on_epoch(0, epochs, entry)

    optimizer = FlatAdamW([model], weight_decay=config.weight_decay)
    total_steps = epochs * (steps_per_epoch + clean_steps)
    step = 0

    def lr_now(epoch: int) -> float:
        return learning_rate(config.schedule, config.lr, step, epoch - 1, total_steps)

    model.train()
    with optimizer:
        noisy_gradient = _noisy_gradient(model, optimizer, X, P, config, device)
        noisy_step = TrainStep(
            optimizer, noisy_gradient, clip=_NOISY_CLIP, n_values=3, device=device,
            autograd=getattr(noisy_gradient, "needs_autograd", True),  # autograd's own gradient has no flag
        )
        clean_step = None
        if data.clean is not None:
            Xc, yc, pc = data.clean

            def clean_loss(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                h = model.data_encoder(Xc.index_select(0, idx))
                noisy = _feed(pc.index_select(0, idx), config.train_feed)
                return supervised_terms(model, h, noisy, yc.index_select(0, idx), config.beta, config.eta)

            clean_step = TrainStep(
                optimizer, autograd_gradient(optimizer, clean_loss), clip=_CLEAN_CLIP, n_values=3, device=device
            )
        # ATen's kernels for the whole pass only when every module is LSNPC's own (a user's CNN wants
        # oneDNN's convolutions); NoisyBatchStep switches them on for its own parts either way
        kernels = aten_kernels if own_encoder else contextlib.nullcontext
        for epoch in range(1, epochs + 1):
            started = time.perf_counter()
            n_batches = clean_batches = 0
            with kernels():
                for idx in _batches(len(X), config.batch_size, device=device):
                    noisy_step(idx, lr=lr_now(epoch))
                    step += 1
                    n_batches += 1
                noisy_lr = lr_now(epoch)  # the history's lr: the noisy pass's last
                if clean_step is not None:
                    for idx in _batches(len(data.clean[0]), config.batch_size, device=device):
                        clean_step(idx, lr=lr_now(epoch))
                        step += 1
                        clean_batches += 1
            sums = noisy_step.take_sums()
            entry: dict[str, Any] = {
                "epoch": epoch,
                "phase": "train",
                "loss": sums[0] / max(1, n_batches),
                "reconstruction": sums[1] / max(1, n_batches),
                "latent": sums[2] / max(1, n_batches),
                "lr": noisy_lr,
            }
            if clean_step is not None:
                entry["clean_loss"] = clean_step.take_sums()[0] / max(1, clean_batches)
            if not math.isfinite(entry["loss"]):
                entry["diverged"] = True
                history.append(entry)
                break
            entry.update(selector.score(model))
            entry["seconds"] = time.perf_counter() - started
            history.append(entry)
            selector.update(model, epoch, entry)
            if config.verbose:
                shown = ", ".join(f"{k}={v:.4g}" for k, v in entry.items() if isinstance(v, float))
                print(f"[LSNPC] epoch {epoch}/{epochs}: {shown}", flush=True)
            if on_epoch is not None:
                on_epoch(epoch, epochs, entry)

    if selector.best_state is not None:
        model.load_state_dict(selector.best_state)
    model.eval()
    n_val = 0 if data.val is None else len(data.val[0])
    n_hold = 0 if holdout is None else len(holdout[0])
    n_clean = 0 if data.clean is None else len(data.clean[0])
    return TrainResult(epochs, selector.best_epoch, _describe(selection, n_val, n_hold, n_clean), history, selection,
                       holdout_rows)
