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
from typing import Any, Self

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._numerics import minibatches as _batches
from .._torch import seeded
from ..metrics import macro_f1, micro_f1
from .config import TrainingConfig
from .backprop import NoisyBatchStep, aten_kernels
from .inference import predict_corrected
from .model import LatentShiftModel
from .objective import supervised_loss, unsupervised_loss

_NOISY_CLIP = 2.0  # gradient-norm clipping of the authors' code: 2 on noisy batches,
_CLEAN_CLIP = 10.0  # 10 on clean batches
_AUTO_MIN_EPOCHS, _AUTO_MAX_EPOCHS = 5, 200
# Target optimiser steps of epochs="auto". With clean validation labels the epoch is chosen on
# validation F1, and longer training helps small data sets settle (2000 steps: README quality table).
# Without them the epoch is chosen on the noisy-data ELBO, which keeps improving as g_φ learns to
# reproduce the base model's labels — i.e. as the correction fades — so training stays short (600
# steps: the offline grid in the README; 2000 steps lost 14 micro-F1 points on scene, 30% symmetric).
AUTO_STEPS_WITH_VALIDATION = 2000
AUTO_STEPS_WITHOUT_VALIDATION = 600


def f1_micro_macro(y_true: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> tuple[float, float]:
    """(micro-F1, macro-F1) of thresholded probabilities (lsnpc.metrics, i.e. scikit-learn's)."""
    return micro_f1(y_true, probs, threshold), macro_f1(y_true, probs, threshold)


@dataclass
class TrainingData:
    """Tensors for training: noisy (X, P), optional clean (X, y, P) and validation (numpy) triples."""

    X: torch.Tensor
    P: torch.Tensor
    clean: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None
    val: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    @classmethod
    def build(
        cls,
        X: np.ndarray,
        P: np.ndarray,
        *,
        clean: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        val: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        device: torch.device,
    ) -> TrainingData:
        def t(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float32, device=device)

        clean_t = None if clean is None else (t(clean[0]), t(clean[1]), t(clean[2]))
        return cls(t(X), t(P), clean_t, val)


@dataclass
class TrainResult:
    epochs: int
    best_epoch: int
    selection_description: str
    history: list[dict[str, Any]] = field(default_factory=list)


def resolve_epochs(epochs: int | str, n_train: int, batch_size: int, min_steps: int) -> int:
    """Epoch count; "auto" aims at ``min_steps`` optimiser steps within [5, 200] epochs."""
    if epochs != "auto":
        return int(epochs)
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return int(np.clip(math.ceil(min_steps / steps_per_epoch), _AUTO_MIN_EPOCHS, _AUTO_MAX_EPOCHS))


def _feed(probs: torch.Tensor, mode: str) -> torch.Tensor:
    return torch.bernoulli(probs) if mode == "sample" else probs


def warm_start_encoder(model: LatentShiftModel, X: torch.Tensor, P: torch.Tensor, *, steps: int) -> float:
    """Pre-train LSNPC's own data encoder to predict the base probabilities P (soft BCE).

    Only the encoder is kept; the throw-away linear head is discarded. The label decoder is not
    touched on purpose: LSNPC corrects by making g_φ lean on the latent (which carries ŷ through the
    shift model), and a decoder initialised to reproduce P from x alone leaves the latent unused and the
    base model's mistakes in place (measured in the README). Returns the final distillation loss.
    """
    data_dim = model.label_decoder.data_dim
    head = nn.Sequential(nn.BatchNorm1d(data_dim), nn.Linear(data_dim, P.shape[1])).to(X.device)
    optimizer = FlatAdamW([model.data_encoder, head], weight_decay=0.0)
    model.data_encoder.train()
    batch_size = min(256, len(X))
    done, loss_value = 0, float("nan")
    with optimizer:
        while done < steps:
            for idx in _batches(len(X), batch_size):
                loss = F.binary_cross_entropy_with_logits(head(model.data_encoder(X[idx])), P[idx])
                optimizer.step(loss, lr=1e-3)
                loss_value = float(loss.detach())
                done += 1
                if done >= steps:
                    break
    return loss_value


class _Selector:
    """Scores the model after each epoch and keeps the best state in memory."""

    def __init__(self, mode: str, config: TrainingConfig, data: TrainingData, holdout: tuple | None, seed: int):
        self.mode, self.config, self.data, self.holdout, self.seed = mode, config, data, holdout, seed
        self.best_score = -math.inf
        self.best_epoch = 0
        self.best_state: dict[str, torch.Tensor] | None = None

    @torch.no_grad()
    def score(self, model: LatentShiftModel) -> dict[str, float]:
        model.eval()
        out: dict[str, float] = {}
        with seeded(self.seed):
            if self.data.val is not None:
                Xv, yv, pv = self.data.val
                device = self.data.X.device
                probs = predict_corrected(model, Xv, pv, feed=self.config.predict_feed, device=device)
                out["val_micro_f1"], out["val_macro_f1"] = f1_micro_macro(yv, probs)
            if self.holdout is not None:
                Xh, noisy_h = self.holdout
                loss, _ = unsupervised_loss(model, model.data_encoder(Xh), noisy_h, self.config.beta)
                out["holdout_neg_elbo"] = float(loss)
        model.train()
        return out

    def update(self, model: LatentShiftModel, epoch: int, scores: dict[str, float]) -> None:
        if self.mode == "val_f1":
            value = scores["val_micro_f1"]
        elif self.mode == "noisy_elbo":
            value = -scores["holdout_neg_elbo"]
        else:
            value = float(epoch)
        if value > self.best_score:  # strict: ties keep the earlier epoch
            self.best_score, self.best_epoch = value, epoch
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}


def _describe(mode: str, n_val: int, n_holdout: int, n_clean: int = 0) -> str:
    """Which criterion chose the epoch and which labels it used; and whether clean labels were trained on
    (semi-supervised), so "no clean labels" is never said of a model that learnt from some."""
    trained = f"; trained on a clean set of {n_clean} samples (X_clean, y_clean)" if n_clean else ""
    if mode == "val_f1":
        return f"val_f1: epoch chosen by micro-F1 on {n_val} clean validation labels (X_val, y_val){trained}"
    if mode == "noisy_elbo":
        used = "no clean labels used to choose it" if n_clean else "no clean labels used"
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


def train_latent_shift_model(
    model: LatentShiftModel,
    data: TrainingData,
    *,
    config: TrainingConfig,
    own_encoder: bool,
    selection: str,
    rng: np.random.Generator,
    device: torch.device,
    on_epoch: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Algorithm 1: per epoch a pass over the noisy data, then one over the clean data (if any).

    ``own_encoder``: the data encoder is LSNPC's own (so ``config.warm_start`` applies to it).
    ``on_epoch(epoch, epochs, entry)``: called after the warm start (epoch 0) and after each epoch with
    its history entry (progress bars); it sees the numbers, it does not change them.
    """
    X, P = data.X, data.P
    holdout = None
    if selection == "noisy_elbo":
        n_hold = max(1, int(round(config.holdout_fraction * len(X))))
        if len(X) - n_hold < 2 or n_hold < 2:
            selection = "last"
        else:
            perm = torch.as_tensor(rng.permutation(len(X)), device=device)
            hold_idx, train_idx = perm[:n_hold], perm[n_hold:]
            noisy_hold = _feed(P[hold_idx], config.train_feed)
            holdout = (X[hold_idx], noisy_hold)
            X, P = X[train_idx], P[train_idx]

    min_steps = config.min_steps
    if min_steps == "auto":
        min_steps = AUTO_STEPS_WITH_VALIDATION if data.val is not None else AUTO_STEPS_WITHOUT_VALIDATION
    epochs = resolve_epochs(config.epochs, len(X), config.batch_size, min_steps)
    steps_per_epoch = len(_batches(len(X), config.batch_size))
    clean_steps = 0 if data.clean is None else len(_batches(len(data.clean[0]), config.batch_size))
    selector = _Selector(selection, config, data, holdout, seed=int(rng.integers(2**62)))
    history: list[dict[str, Any]] = []

    if config.warm_start and own_encoder:
        steps = int(np.clip(3 * math.ceil(len(X) / 256), 150, 600))
        loss = warm_start_encoder(model, X, P, steps=steps)
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
        # the noisy-batch gradient by hand where it is written out (student, gauss on the CPU), else autograd
        noisy_step = None
        if NoisyBatchStep.supports(model):
            noisy_step = NoisyBatchStep(model, beta=config.beta, feed=config.train_feed)
        # ATen's kernels for the whole pass only when every module is LSNPC's own (a user's CNN wants
        # oneDNN's convolutions); NoisyBatchStep switches them on for its own parts either way
        kernels = aten_kernels if own_encoder else contextlib.nullcontext
        for epoch in range(1, epochs + 1):
            started = time.perf_counter()
            sums = np.zeros(3)
            n_batches = 0
            clean_sum, clean_batches = 0.0, 0
            with kernels():
                for idx in _batches(len(X), config.batch_size):
                    if noisy_step is not None:
                        values = noisy_step(X.index_select(0, idx), P.index_select(0, idx))
                        optimizer.apply(lr=lr_now(epoch), clip=_NOISY_CLIP)
                        sums += values
                    else:
                        h = model.data_encoder(X[idx])
                        loss, parts = unsupervised_loss(model, h, _feed(P[idx], config.train_feed), config.beta)
                        optimizer.step(loss, lr=lr_now(epoch), clip=_NOISY_CLIP)
                        sums += (parts.total, parts.reconstruction, parts.latent)
                    step += 1
                    n_batches += 1
                noisy_lr = lr_now(epoch)  # the history's lr: the noisy pass's last
                if data.clean is not None:
                    Xc, yc, pc = data.clean
                    for idx in _batches(len(Xc), config.batch_size):
                        h = model.data_encoder(Xc[idx])
                        noisy = _feed(pc[idx], config.train_feed)
                        loss, parts = supervised_loss(model, h, noisy, yc[idx], config.beta, config.eta)
                        optimizer.step(loss, lr=lr_now(epoch), clip=_CLEAN_CLIP)
                        step += 1
                        clean_sum += parts.total
                        clean_batches += 1
            entry: dict[str, Any] = {
                "epoch": epoch,
                "phase": "train",
                "loss": sums[0] / max(1, n_batches),
                "reconstruction": sums[1] / max(1, n_batches),
                "latent": sums[2] / max(1, n_batches),
                "lr": noisy_lr,
            }
            if data.clean is not None:
                entry["clean_loss"] = clean_sum / max(1, clean_batches)
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
    return TrainResult(epochs, selector.best_epoch, _describe(selection, n_val, n_hold, n_clean), history)


class FlatAdamW:
    """AdamW (decoupled weight decay) with global-norm clipping over the trainable parameters of some
    modules, all laid out as views into one flat buffer — and their gradients into another.

    A training step of LSNPC at batch 32 is dominated by per-tensor overhead, not arithmetic: zeroing,
    clipping and the update each touch ~50 small tensors. On flat buffers the update is one call of
    ATen's fused AdamW kernel (the one ``torch.optim.AdamW(fused=True)`` runs, which also applies the
    clipping factor), the clipping one norm. Autograd accumulates into the gradient views in place
    (they are never set to None); :class:`~lsnpc.corrector.backprop.NoisyBatchStep` writes into them.
    The update is the AdamW of Loshchilov & Hutter as ``torch.optim.AdamW`` computes it (tested
    against it); no ``torch.optim`` object is built because constructing one imports ``torch._dynamo``
    (~1.5–2 s on first use in a process, measured), a tenth of a small fit.

    Use as a context manager: inside it the parameters live in the flat buffer; on exit each gets its
    own storage back, so the model can be saved, copied or trained normally afterwards.
    """

    def __init__(
        self,
        modules: list[nn.Module],
        *,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = [p for m in modules for p in m.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("FlatAdamW was given no trainable parameters")
        first = self.params[0]
        if any(p.dtype != first.dtype or p.device != first.device for p in self.params):
            raise ValueError("FlatAdamW needs every trainable parameter on one device with one dtype")
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.grad = torch.zeros_like(self.flat)
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.steps = torch.zeros((), dtype=self.flat.dtype, device=self.flat.device)  # the kernel reads it
        self.weight_decay, self.betas, self.eps = weight_decay, betas, eps

    def __enter__(self) -> Self:
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = self.flat[offset : offset + n].view_as(p)
            p.grad = self.grad[offset : offset + n].view_as(p)
            offset += n
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.params:
            p.data = p.data.clone()
            p.grad = None

    @torch.no_grad()
    def apply(self, *, lr: float, clip: float | None = None) -> None:
        """One AdamW update from the gradients in the flat buffer, their global norm clipped to ``clip``."""
        grad_scale = None
        if clip is not None:
            # clip_grad_norm_ multiplies by min(clip / (norm + 1e-6), 1); the kernel divides by grad_scale,
            # so pass one only when it clips: the scaling pass costs ~15% of the update (measured). The
            # norm is read on the host: free on the CPU, a synchronisation on a GPU.
            norm = float(torch.dot(self.grad, self.grad).sqrt_())
            if norm + 1e-6 > clip:
                grad_scale = torch.tensor((norm + 1e-6) / clip, dtype=self.flat.dtype, device=self.flat.device)
        self.steps.add_(1)
        beta1, beta2 = self.betas
        torch._fused_adamw_(
            [self.flat], [self.grad], [self.exp_avg], [self.exp_avg_sq], [], [self.steps], lr=lr,
            beta1=beta1, beta2=beta2, weight_decay=self.weight_decay, eps=self.eps, amsgrad=False,
            maximize=False, grad_scale=grad_scale,
        )

    def step(self, loss: torch.Tensor, *, lr: float, clip: float | None = None) -> None:
        """Zero the gradients, backpropagate ``loss``, clip their global norm to ``clip``, update."""
        self.grad.zero_()
        loss.backward()
        self.apply(lr=lr, clip=clip)
