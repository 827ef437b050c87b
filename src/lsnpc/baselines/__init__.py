"""Baseline post-processors that share LSNPC's interface.

- :class:`KNNCorrector`: the paper's per-label k-NN over confident predictions (returns
  probabilities).
- :class:`NPCCorrector`: the direct multilabel extension of NPC (section 3 of the paper).
- :class:`CountThreshold`: no correction, the base model at the threshold its noisy labels' count
  implies (as LSNPC's no-label plan chooses its threshold).
- :class:`LogitMapCorrector`: a sparse linear map of the base model's logits fitted on clean rows, a
  correction that reads the other labels' probabilities (needs the clean set).

All are scikit-learn estimators (``get_params``, ``set_params``, ``clone``) with
``fit(X, pred_probs, *, X_clean=None, y_clean=None, pred_probs_clean=None)``,
``predict_proba(X, pred_probs)``, ``predict(X, pred_probs, threshold=0.5)``.
NPCCorrector and LogitMapCorrector need torch and are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CountThreshold", "KNNCorrector", "LogitMapCorrector", "NPCCorrector"]

_EXPORTS = {"KNNCorrector": "lsnpc.baselines.knn", "NPCCorrector": "lsnpc.baselines.npc",
            "CountThreshold": "lsnpc.baselines.count_threshold", "LogitMapCorrector": "lsnpc.baselines.logit_map"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'lsnpc.baselines' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
