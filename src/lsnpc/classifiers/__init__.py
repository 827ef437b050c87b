"""Base multilabel classifiers trained on (noisy) labels.

Each is a scikit-learn estimator (``get_params``, ``set_params``, ``clone``) with
``fit(X, y, *, X_val=None, y_val=None)``, ``predict_proba(X)`` and ``predict(X)``, and after fitting
exposes ``trunk_`` (a torch module mapping X to an embedding) that LSNPC can start its data encoder
from.

- :class:`MLPClassifier`: a head over fixed features (the paper's MLP_r / MLP_v).
- :class:`ADDGCN`: attention-driven dynamic graph convolution (Ye et al., 2020).
- :class:`HLC`: ADDGCN trained with holistic label correction (Xia et al., 2023).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MLPClassifier", "ADDGCN", "HLC"]

_MODULES = {"MLPClassifier": "mlp", "ADDGCN": "addgcn", "HLC": "hlc"}


def __getattr__(name: str) -> Any:
    # lazy, so that importing one classifier does not require the others' modules to exist/import
    if name in _MODULES:
        return getattr(importlib.import_module(f"lsnpc.classifiers.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'lsnpc.classifiers' has no attribute {name!r}")


def classifier_classes() -> dict[str, type]:
    """lsnpc's classifiers by name: the only classes a saved classifier may be loaded as."""
    return {name: __getattr__(name) for name in _MODULES}


def __dir__() -> list[str]:
    return __all__
