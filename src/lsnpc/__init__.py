"""lsnpc: correct the predictions of multilabel classifiers trained on noisy labels.

The public API is re-exported here and imported lazily, so ``import lsnpc`` (and the command line)
stay fast and the torch-free parts (noise, metrics) never pull in torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "LSNPC": "lsnpc.corrector",
    "simulate_noise": "lsnpc.noise",
    "transition_matrix": "lsnpc.noise",
    "evaluate": "lsnpc.metrics",
    "load_dataset": "lsnpc.data",
    "list_datasets": "lsnpc.data",
    "MultilabelDataset": "lsnpc.data",
    "MLPClassifier": "lsnpc.classifiers",
    "ADDGCN": "lsnpc.classifiers",
    "HLC": "lsnpc.classifiers",
    "KNNCorrector": "lsnpc.baselines",
    "NPCCorrector": "lsnpc.baselines",
    "CountThreshold": "lsnpc.baselines",
    "LogitMapCorrector": "lsnpc.baselines",
    "NotFittedError": "lsnpc._validation",
    "label_quality_scores": "lsnpc.label_issues",
    "find_label_issues": "lsnpc.label_issues",
    "correct_labels": "lsnpc.label_issues",
    "cross_val_pred_probs": "lsnpc.model_selection",
    "tune_threshold": "lsnpc.corrector.threshold",
    "ThresholdCurve": "lsnpc.corrector.threshold",
    "CorrectedLabelsClassifier": "lsnpc.retrain",
    "RetrainReport": "lsnpc.retrain",
}
_SUBMODULES = {"noise", "metrics", "data", "features", "classifiers", "baselines", "experiments"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"lsnpc.{name}")
    raise AttributeError(f"module 'lsnpc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
