"""The optimiser of every LSNPC network, and the training step that runs it without host round trips.

:class:`FlatAdamW` keeps all trainable parameters (and their gradients) in two flat buffers, so an
update is one fused kernel. :class:`TrainStep` is one optimiser step over a mini-batch: on the CPU it
runs eagerly; on a CUDA device it never waits for the GPU (clipping and the learning rate stay on the
device, the loss values are summed there and read once per epoch) and, after a few eager calls per
batch shape, it is captured as a CUDA graph and replayed: a step of LSNPC at batch 32 is a few hundred
tiny kernels, and launching them one by one from Python was the whole cost on a GPU (7.7 ms per step on
an H200, kernel-launch bound; docs/speed.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Self

import numpy as np
import torch
from torch import nn

__all__ = ["FlatAdamW", "TrainStep", "autograd_gradient", "USE_CUDA_GRAPHS"]

# Capture training steps on CUDA devices as graphs (False: the same sync-free steps, launched eagerly;
# the benchmarks switch it off to measure the eager path).
USE_CUDA_GRAPHS = True
# eager calls per batch shape before it is captured: cuBLAS/cuDNN handles, workspaces and autograd's
# lazily built state must exist before a capture (PyTorch's CUDA-graph notes warm up on a side stream)
_EAGER_CALLS = 3


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
        views: int | None = None,
    ) -> None:
        """``views``: how many pieces the update hands the fused kernel (None: 32 on a CUDA device, else 1).
        The arithmetic is elementwise, so the result is the same (bit for bit on a GPU; to float rounding
        on the CPU, whose kernel rounds a vector loop and a scalar tail differently); on a GPU ATen's kernel
        gives each 65,536-element chunk of a tensor one thread block, and one flat buffer of LSNPC's
        0.36–0.78 M parameters left most of the device idle (27 µs per update on an H100, 12–20 µs in
        32 pieces, measured in CUDA graphs: ``benchmarks/bench_gpu_kernels.py``)."""
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
        if views is None:
            views = 32 if self.flat.device.type == "cuda" else 1
        if isinstance(views, bool) or not isinstance(views, Integral) or views < 1:
            raise ValueError(f"views must be a positive integer, got {views!r}")
        views = min(int(views), self.flat.numel())
        self._pieces = [list(t.tensor_split(views)) for t in (self.flat, self.grad, self.exp_avg, self.exp_avg_sq)]
        self._pieces.append([self.steps] * views)

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
    def apply(self, *, lr: float | torch.Tensor, clip: float | None = None) -> None:
        """One AdamW update from the gradients in the flat buffer, their global norm clipped to ``clip``.

        ``lr`` a float, or a 0-d tensor on the parameters' device: then nothing is read back to the host
        (the clipping factor is computed on the device and always passed, where dividing by 1 changes
        nothing), so the update can be captured in a CUDA graph.
        """
        grad_scale = None
        if clip is not None:
            # clip_grad_norm_ multiplies by min(clip / (norm + 1e-6), 1); the kernel divides by grad_scale
            norm = torch.dot(self.grad, self.grad).sqrt_()
            if isinstance(lr, torch.Tensor):
                grad_scale = norm.add_(1e-6).div_(clip).clamp_(min=1.0)
            else:
                # on the host, pass a factor only when it clips: the scaling pass costs ~15% of the
                # update (measured); reading the norm is free on the CPU
                value = float(norm)
                if value + 1e-6 > clip:
                    grad_scale = torch.tensor((value + 1e-6) / clip, dtype=self.flat.dtype, device=self.flat.device)
        self.steps.add_(1)
        beta1, beta2 = self.betas
        flat, grad, exp_avg, exp_avg_sq, steps = self._pieces
        torch._fused_adamw_(
            flat, grad, exp_avg, exp_avg_sq, [], steps, lr=lr,
            beta1=beta1, beta2=beta2, weight_decay=self.weight_decay, eps=self.eps, amsgrad=False,
            maximize=False, grad_scale=grad_scale,
        )

    def step(self, loss: torch.Tensor, *, lr: float, clip: float | None = None) -> None:
        """Zero the gradients, backpropagate ``loss``, clip their global norm to ``clip``, update."""
        self.grad.zero_()
        loss.backward()
        self.apply(lr=lr, clip=clip)


Gradient = Callable[..., "torch.Tensor | Sequence[float]"]


def autograd_gradient(
    optimizer: FlatAdamW, loss_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]
) -> Callable[..., torch.Tensor]:
    """A gradient function for :class:`TrainStep` from a loss: ``loss_fn(*inputs)`` returns the loss (a
    scalar) and the values to report (a detached 1-d tensor); the gradient is written into the
    optimiser's flat buffer by autograd (zeroed first)."""

    def gradient(*inputs: torch.Tensor) -> torch.Tensor:
        optimizer.grad.zero_()
        loss, values = loss_fn(*inputs)
        loss.backward()
        return values

    return gradient


class _Captured:
    """A captured step: its graph and the static input tensors it reads."""

    def __init__(self, graph: torch.cuda.CUDAGraph, inputs: list[torch.Tensor]) -> None:
        self.graph, self.inputs = graph, inputs


class TrainStep:
    """One optimiser step: ``gradient(*inputs)`` writes the gradient into ``optimizer``'s flat buffer and
    returns the values to report (a 1-d tensor, or floats); then AdamW updates with the gradient's norm
    clipped to ``clip``. Call it with the step's input tensors and the learning rate.

    On the CPU each call runs eagerly (the values summed in float64). On a CUDA device nothing
    is read back: the learning rate is a device tensor, clipping is computed on the device, the values
    are summed there (:meth:`take_sums` reads them, once per epoch). There the first ``_EAGER_CALLS``
    calls of each input shape run eagerly on a side stream; the next is captured as a CUDA graph and
    every later call of that shape copies its inputs into the graph's static inputs and replays it. The
    inputs should therefore be small (batch indices) and the data the graph reads fixed in memory. The
    random draws inside follow the device generator as eager calls would. If a capture fails (a
    user's encoder may do something graphs cannot), a warning says so and the steps run eagerly.
    """

    def __init__(
        self,
        optimizer: FlatAdamW,
        gradient: Gradient,
        *,
        clip: float | None,
        n_values: int,
        device: torch.device,
        autograd: bool = True,
    ) -> None:
        """``autograd=False`` says that ``gradient`` needs no autograd (it writes the gradient itself,
        as :class:`~lsnpc.corrector.backprop.NoisyBatchStep` does): on the CPU the whole step then runs
        in ``torch.inference_mode``, where each operation skips autograd's dispatch layers (the same
        kernels, the same numbers; 4–9% off a batch-32 step, docs/speed.md)."""
        self.optimizer, self.gradient, self.clip = optimizer, gradient, clip
        self.on_gpu = device.type == "cuda"
        self._inference = not autograd and not self.on_gpu
        self.graphs = self.on_gpu and USE_CUDA_GRAPHS
        self.sums = torch.zeros(n_values, dtype=torch.float64 if not self.on_gpu else torch.float32, device=device)
        self.last = torch.zeros(n_values, dtype=self.sums.dtype, device=device)
        self.calls = 0
        self.captures = 0
        self._lr = torch.zeros((), dtype=optimizer.flat.dtype, device=device) if self.on_gpu else None
        self._captured: dict[tuple, _Captured] = {}
        self._eager_calls: dict[tuple, int] = {}
        self._side_stream = torch.cuda.Stream(device) if self.graphs else None

    def __call__(self, *inputs: torch.Tensor, lr: float) -> None:
        self.calls += 1
        if not self.on_gpu:
            with torch.inference_mode(self._inference):  # False: as the caller runs (autograd on)
                self._body(inputs, lr)
            return
        self._lr.fill_(lr)  # type: ignore[union-attr]
        if not self.graphs:
            self._body(inputs, self._lr)
            return
        key = tuple((tuple(t.shape), t.dtype) for t in inputs)
        captured = self._captured.get(key)
        if captured is None:
            done = self._eager_calls.get(key, 0)
            if done < _EAGER_CALLS:
                self._eager_calls[key] = done + 1
                stream = self._side_stream
                stream.wait_stream(torch.cuda.current_stream())  # type: ignore[union-attr]
                with torch.cuda.stream(stream):
                    self._body(inputs, self._lr)
                torch.cuda.current_stream().wait_stream(stream)  # type: ignore[arg-type]
                return
            captured = self._capture(key, inputs)
            if captured is None:
                self._body(inputs, self._lr)
                return
        for static, value in zip(captured.inputs, inputs, strict=True):
            static.copy_(value)
        captured.graph.replay()

    def _body(self, inputs: Sequence[torch.Tensor], lr: float | torch.Tensor | None) -> None:
        """Gradient, bookkeeping, update: ``lr`` a float on the CPU, the device tensor on a GPU."""
        values = self.gradient(*inputs)
        with torch.no_grad():
            values = torch.as_tensor(values, dtype=self.sums.dtype, device=self.sums.device)
            self.sums.add_(values)
            self.last.copy_(values)
        self.optimizer.apply(lr=lr, clip=self.clip)  # type: ignore[arg-type]

    def _capture(self, key: tuple, inputs: Sequence[torch.Tensor]) -> _Captured | None:
        static = [t.clone() for t in inputs]
        graph = torch.cuda.CUDAGraph()
        try:
            torch.cuda.synchronize()
            with torch.cuda.graph(graph):
                self._body(static, self._lr)
        except Exception as exc:  # noqa: BLE001 - any capture failure: fall back to eager steps
            self.graphs = False
            torch.cuda.synchronize()
            warnings.warn(
                f"LSNPC could not capture its training step as a CUDA graph ({type(exc).__name__}: {exc}); "
                "training continues with eager steps (same results, slower)",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        self.captures += 1
        self._captured[key] = captured = _Captured(graph, static)
        return captured

    def take_sums(self) -> np.ndarray:
        """The values added up since the last call (n_values,), and reset (a device sync on a GPU)."""
        sums = self.sums.double().cpu().numpy().copy()  # a copy: on the CPU .numpy() shares the memory
        self.sums.zero_()
        return sums

    def last_values(self) -> np.ndarray:
        """The values of the last step (n_values,)."""
        return self.last.double().cpu().numpy().copy()
