"""LSNPC, the latent-space-shift corrector, as one subpackage that reads beside section 4 of the paper.

- :mod:`.model`        the generative model and its proposals (section 4.1–4.2)
- :mod:`.objective`    the ELBO terms (eqs. 3, 7, 10, 13)
- :mod:`.config`       the frozen model / training configuration and ``build_model``
- :mod:`.training`     Algorithm 1, the warm start, epoch selection
- :mod:`.inference`    the correction equation (eq. 9), folded for prediction
- :mod:`.plan`         the fit plan: which evidence chooses the epoch, the blend and the threshold
- :mod:`.blend`        how much of the base model the output keeps
- :mod:`.threshold`    decision thresholds chosen on labelled rows (public: ``lsnpc.tune_threshold``)
- :mod:`.report`       the fit's decisions as data
- :mod:`.persistence`  safetensors + JSON save / load
- :mod:`.estimator`    the public :class:`LSNPC` estimator

The policy modules (plan, blend, threshold, report, scores) are torch-free; ``LSNPC`` is imported lazily,
so reading them never loads torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LSNPC"]


def __getattr__(name: str) -> Any:
    if name == "LSNPC":
        from .estimator import LSNPC

        return LSNPC
    raise AttributeError(f"module 'lsnpc.corrector' has no attribute {name!r}")
