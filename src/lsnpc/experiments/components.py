"""The one registry of experiment components: every base classifier and post-processor a config can name.

Each :class:`Component` says what it is (a title for tables and a description), how its estimator is
built from a config's ``params``, and — for a post-processor — which labelled data the runner hands
its ``fit`` unless the config says otherwise (the *runner options*, see :data:`RUNNER_OPTIONS`). The
config parser, the runner and the command line read this registry; no other module lists components.

Estimators are imported only when built, so reading the registry (e.g. to validate a config) never
imports torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "Component",
    "COMPONENTS",
    "CLASSIFIERS",
    "POST_PROCESSORS",
    "RUNNER_OPTIONS",
    "get_component",
]

#: Keys of a post-processor's ``params`` that steer the runner rather than the estimator.
RUNNER_OPTIONS: Mapping[str, str] = MappingProxyType({
    "clean_set": "true: fit also sees the clean set (val1 with its clean labels), i.e. semi-supervised",
    "select_on": "'clean': fit gets val0 with clean labels to choose its epoch; 'none': no validation set",
    "encoder": "'classifier': LSNPC starts its data encoder from the base classifier's trunk",
    "noisy_labels": "true: fit also gets the training rows' noisy labels (LSNPC's labels=), which choose the epoch "
                    "where no clean validation labels do (LSNPC's variants only)",
})

Factory = Callable[[dict[str, Any], int, str], Any]


@dataclass(frozen=True)
class Component:
    """A named classifier or post-processor of the experiment grids.

    Attributes
    ----------
    name : str
        What configs call it (``mlp``, ``lsnpc-semi``...).
    role : {"classifier", "post_processor"}
    title : str
        How tables name it (``MLP``, ``KNN``, ``LSNPC``...).
    description : str
        One line: what it is.
    factory : callable or None
        ``factory(params, random_state, device)`` builds the estimator; None for ``none`` (the base
        classifier's own probabilities, no estimator).
    clean_set, select_on : bool, str
        The runner options' defaults for a post-processor (see :data:`RUNNER_OPTIONS`).
    takes_encoder : bool
        Whether the runner options ``encoder: classifier`` and ``noisy_labels: true`` apply (LSNPC's
        variants: a data encoder to start from the trunk, and ``fit(labels=...)``).
    """

    name: str
    role: str
    title: str
    description: str
    factory: Factory | None = field(repr=False, compare=False)
    clean_set: bool = False
    select_on: str = "none"
    takes_encoder: bool = False

    def build(self, params: Mapping[str, Any], *, random_state: int, device: str) -> Any:
        """The estimator for ``params`` (estimator parameters only, no runner option); None for ``none``."""
        return None if self.factory is None else self.factory(dict(params), random_state, device)

    def split_params(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(runner options with this component's defaults filled in, estimator parameters).

        Raises ValueError, its message starting with the option's name, when a runner option has a
        value it cannot take.
        """
        estimator_params = dict(params)
        options: dict[str, Any] = {"clean_set": self.clean_set, "select_on": self.select_on, "encoder": None,
                                   "noisy_labels": False}
        if self.role == "post_processor":
            for key in RUNNER_OPTIONS:
                if key in estimator_params:
                    options[key] = estimator_params.pop(key)
        if not isinstance(options["clean_set"], bool):
            raise ValueError(f"clean_set: must be true or false, got {options['clean_set']!r}")
        if options["select_on"] not in ("none", "clean"):
            raise ValueError(f"select_on: must be 'none' or 'clean', got {options['select_on']!r}")
        if options["encoder"] not in (None, "classifier"):
            raise ValueError(f"encoder: must be 'classifier' or absent, got {options['encoder']!r}")
        if options["encoder"] is not None and not self.takes_encoder:
            raise ValueError(f"encoder: {self.name} has no data encoder to start from the classifier's trunk")
        if not isinstance(options["noisy_labels"], bool):
            raise ValueError(f"noisy_labels: must be true or false, got {options['noisy_labels']!r}")
        if options["noisy_labels"] and not self.takes_encoder:
            raise ValueError(f"noisy_labels: {self.name} takes no training labels (only LSNPC's variants do)")
        return options, estimator_params


def _estimator(module: str, name: str, *, device: bool = True) -> Factory:
    """A factory calling ``module.name(**params, random_state=..., device=...)``."""

    def build(params: dict[str, Any], random_state: int, device_name: str) -> Any:
        cls = getattr(importlib.import_module(module), name)
        return cls(**params, random_state=random_state, **({"device": device_name} if device else {}))

    return build


def _lsnpc(preset: Mapping[str, Any] | None = None, *, paper: bool = False) -> Factory:
    """A factory for an LSNPC variant: ``preset`` parameters (a config's params override them), or
    :meth:`LSNPC.paper` with ``paper``. ``nu: learned`` (the sensitivity grid's last column) means the
    learned-ν latent."""

    def build(params: dict[str, Any], random_state: int, device: str) -> Any:
        from lsnpc.corrector import LSNPC

        params = {**(preset or {}), **params}
        if params.get("nu") == "learned":
            del params["nu"]
            params["latent"] = "learned"
        make = LSNPC.paper if paper else LSNPC
        return make(**params, random_state=random_state, device=device)

    return build


COMPONENTS: Mapping[str, Component] = MappingProxyType({c.name: c for c in (
    Component("mlp", "classifier", "MLP", "a multilabel MLP head over the features (the paper's MLP_r / MLP_v)",
              _estimator("lsnpc.classifiers", "MLPClassifier")),
    Component("addgcn", "classifier", "ADD-GCN", "attention-driven dynamic graph convolution (Ye et al., 2020)",
              _estimator("lsnpc.classifiers", "ADDGCN")),
    Component("hlc", "classifier", "HLC", "ADD-GCN trained with holistic label correction (Xia et al., 2023)",
              _estimator("lsnpc.classifiers", "HLC")),
    Component("none", "post_processor", "base model",
              "no post-processor: the base classifier's own probabilities", None),
    Component("knn", "post_processor", "KNN", "per-label k-NN vote over confidently predicted samples",
              _estimator("lsnpc.baselines", "KNNCorrector", device=False)),
    Component("npc", "post_processor", "NPC", "the direct multilabel extension of NPC (the paper's section 3)",
              _estimator("lsnpc.baselines", "NPCCorrector")),
    Component("lsnpc", "post_processor", "LSNPC",
              "unsupervised LSNPC: no clean label anywhere (epoch chosen on the noisy-data ELBO)",
              _lsnpc(), takes_encoder=True),
    Component("lsnpc-semi", "post_processor", "LSNPC-semi",
              "semi-supervised LSNPC: the clean set (val1) joins training, the epoch is chosen on clean val0",
              _lsnpc(), clean_set=True, select_on="clean", takes_encoder=True),
    Component("gauss", "post_processor", "GAUSS", "the GAUSS ablation: Normal latents instead of Student-t",
              _lsnpc({"latent": "gauss"}), takes_encoder=True),
    Component("learned-nu", "post_processor", "learned ν",
              "LSNPC with learned degrees of freedom ν_θ(x, ŷ)", _lsnpc({"latent": "learned"}), takes_encoder=True),
    Component("lsnpc-paper", "post_processor", "LSNPC (paper)",
              "LSNPC.paper(): the authors' recipe, epoch chosen on clean val0", _lsnpc(paper=True),
              select_on="clean", takes_encoder=True),
)})

#: Classifier names in registry order.
CLASSIFIERS: tuple[str, ...] = tuple(n for n, c in COMPONENTS.items() if c.role == "classifier")
#: Post-processor names in registry order (reports list methods in this order).
POST_PROCESSORS: tuple[str, ...] = tuple(n for n, c in COMPONENTS.items() if c.role == "post_processor")


def get_component(name: str, role: str | None = None) -> Component:
    """The component called ``name`` (of ``role``, "classifier" or "post_processor", when given).

    Raises ValueError listing the names there are.
    """
    component = COMPONENTS.get(name) if isinstance(name, str) else None
    if component is None or (role is not None and component.role != role):
        names = CLASSIFIERS if role == "classifier" else POST_PROCESSORS if role else tuple(COMPONENTS)
        what = (role or "component").replace("_", "-")
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(names)}")
    return component
