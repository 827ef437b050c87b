"""The one registry of experiment components: every base classifier and post-processor a config can name.

Each :class:`Component` says what it is (a title for tables and a description), how its estimator is
built from a config's ``params``, and — for a post-processor — which labelled data the runner hands
its ``fit`` unless the config says otherwise (the *runner options*, see :data:`RUNNER_OPTIONS`). The
config parser, the runner and the command line read this registry; no other module lists components.

Estimators are imported only when built, so reading the registry (e.g. to validate a config) never
imports torch.

The registry is open: where a config names a component, a ``module:attribute`` import path
(``mymodels:MyClassifier``, or ``path/to/file.py:MyClassifier``) names a class or factory of the
researcher's own, resolved by :func:`get_component` through the same door as the built-in names (see
docs/extending.md). The noise kinds of a grid resolve the same way (:func:`get_noise`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
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
    "get_noise",
    "accepts",
    "is_import_path",
    "resolve_import_path",
    "NOISE_KINDS",
]

#: Keys of a post-processor's ``params`` that steer the runner rather than the estimator.
RUNNER_OPTIONS: Mapping[str, str] = MappingProxyType({
    "clean_set": "true: fit also sees the clean set (val1 with its clean labels), i.e. semi-supervised",
    "select_on": "'clean': fit gets val0 with clean labels to choose its epoch; 'none': no validation set",
    "encoder": "'classifier': LSNPC starts its data encoder from the base classifier's trunk",
    "noisy_labels": "true: fit also gets the training rows' noisy labels (LSNPC's labels=), which choose the epoch "
                    "where no clean validation labels do (LSNPC's variants only)",
    "unlabelled": "true: fit also gets the val0 and val1 rows' features and base probabilities, never their labels "
                  "(X_unlabelled=: rows the base classifier never saw), on which a label count is met where no "
                  "clean validation labels tune the threshold (LSNPC's variants and count-threshold)",
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
        Whether the runner option ``encoder: classifier`` applies (LSNPC's variants: a data encoder to
        start from the trunk).
    noisy_labels : bool
        The runner option ``noisy_labels``' default: whether ``fit`` gets the training rows' noisy labels.
    takes_labels : bool or None
        Whether ``fit`` takes ``labels=`` (so ``noisy_labels: true`` applies); None: as ``takes_encoder``.
    takes_unlabelled : bool or None
        Whether ``fit`` takes ``X_unlabelled=`` and ``pred_probs_unlabelled=`` (so ``unlabelled: true`` applies);
        None: as ``takes_encoder``.
    """

    name: str
    role: str
    title: str
    description: str
    factory: Factory | None = field(repr=False, compare=False)
    clean_set: bool = False
    select_on: str = "none"
    takes_encoder: bool = False
    noisy_labels: bool = False
    takes_labels: bool | None = None
    takes_unlabelled: bool | None = None

    @property
    def accepts_unlabelled(self) -> bool:
        """Whether ``fit`` takes rows the base model never saw, without labels (``X_unlabelled=``)."""
        return self.takes_encoder if self.takes_unlabelled is None else self.takes_unlabelled

    @property
    def accepts_labels(self) -> bool:
        """Whether ``fit`` takes the training rows' noisy labels (``labels=``)."""
        return self.takes_encoder if self.takes_labels is None else self.takes_labels

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
                                   "noisy_labels": self.noisy_labels, "unlabelled": False}
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
        if options["noisy_labels"] and not self.accepts_labels:
            raise ValueError(f"noisy_labels: {self.name} takes no training labels (its fit has no labels= "
                             "parameter)")
        if not isinstance(options["unlabelled"], bool):
            raise ValueError(f"unlabelled: must be true or false, got {options['unlabelled']!r}")
        if options["unlabelled"] and not self.accepts_unlabelled:
            raise ValueError(f"unlabelled: {self.name} meets no label count (its fit has no X_unlabelled= "
                             "parameter)")
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
    Component("count-threshold", "post_processor", "base @ count threshold",
              "the base model's probabilities at the threshold its noisy labels' count implies (no correction)",
              _estimator("lsnpc.baselines", "CountThreshold", device=False), noisy_labels=True,
              takes_labels=True, takes_unlabelled=True),
)})

#: Classifier names in registry order.
CLASSIFIERS: tuple[str, ...] = tuple(n for n, c in COMPONENTS.items() if c.role == "classifier")
#: Post-processor names in registry order (reports list methods in this order).
POST_PROCESSORS: tuple[str, ...] = tuple(n for n, c in COMPONENTS.items() if c.role == "post_processor")


def is_import_path(name: Any) -> bool:
    """Whether ``name`` is a ``module:attribute`` import path (``pkg.mod:Thing`` or ``file.py:Thing``)."""
    if not isinstance(name, str) or name.count(":") != 1:
        return False
    module, attribute = name.split(":")
    return bool(module) and attribute.isidentifier() and not (len(module) == 1 and module.isalpha())


def _import_module(module: str) -> Any:
    """Import ``module``: a dotted module name (found on ``sys.path``, the current directory first when it
    is not there, so a researcher's module beside their grid is found wherever the grid runs) or a
    ``.py`` file path."""
    if module.endswith(".py"):
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise ValueError(f"file {module!r} does not exist")
        key = "lsnpc_user_" + "".join(c if c.isalnum() else "_" for c in path)
        if key not in sys.modules:  # one module object per file, as import gives one per name
            spec = importlib.util.spec_from_file_location(key, path)
            if spec is None or spec.loader is None:
                raise ValueError(f"file {module!r} cannot be imported as a Python module")
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[key] = loaded
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[key]
                raise
        return sys.modules[key]
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.append(cwd)  # after the installed packages: a local file never shadows a library
    return importlib.import_module(module)


def resolve_import_path(path: str, what: str) -> Any:
    """The object a ``module:attribute`` import path names.

    Raises ValueError naming ``what`` (e.g. "post-processor") and the path when the module cannot be
    imported or has no such attribute; an error the module itself raises while importing is named too.
    """
    if not is_import_path(path):
        raise ValueError(f"{what} {path!r}: expected an import path 'module:attribute' "
                         "(e.g. 'mymodels:MyClassifier' or 'path/to/file.py:MyClassifier')")
    module_name, attribute = path.split(":")
    try:
        module = _import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"{what} {path!r}: cannot import module {module_name!r} ({exc}); put it in the "
                         "directory lsnpc runs from or on PYTHONPATH, or give a file path 'file.py:name'") from None
    except ValueError as exc:
        raise ValueError(f"{what} {path!r}: {exc}") from None
    except Exception as exc:  # the user's module failed while importing: say so, with its error
        raise ValueError(f"{what} {path!r}: importing {module_name!r} raised "
                         f"{type(exc).__name__}: {exc}") from exc
    if not hasattr(module, attribute):
        raise ValueError(f"{what} {path!r}: module {module_name!r} has no attribute {attribute!r}")
    return getattr(module, attribute)


def accepts(target: Any, parameter: str) -> bool:
    """Whether calling ``target`` (a class or function) accepts the keyword ``parameter``."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    return parameter in signature.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def _user_factory(target: Any) -> Factory:
    """A factory calling ``target(**params)``, adding ``random_state`` and ``device`` where it takes them."""

    def build(params: dict[str, Any], random_state: int, device: str) -> Any:
        extra: dict[str, Any] = {}
        if "random_state" not in params and accepts(target, "random_state"):
            extra["random_state"] = random_state
        if "device" not in params and accepts(target, "device"):
            extra["device"] = device
        return target(**params, **extra)

    return build


def _user_component(path: str, role: str) -> Component:
    """The component a researcher's ``module:attribute`` names: a class or factory whose instances
    honour the classifier (``fit(X, Y)``, ``predict_proba(X)``) or post-processor (``fit(X, pred_probs,
    ...)``, ``predict_proba(X, pred_probs)``) interface."""
    what = role.replace("_", "-")
    target = resolve_import_path(path, what)
    if not callable(target):
        raise ValueError(f"{what} {path!r}: must name a class or a function that builds the estimator, "
                         f"got {type(target).__name__}")
    fit = getattr(target, "fit", None)
    takes_labels = fit is not None and accepts(fit, "labels")
    takes_unlabelled = fit is not None and accepts(fit, "X_unlabelled") and accepts(fit, "pred_probs_unlabelled")
    title = getattr(target, "title", None)
    return Component(path, role, title if isinstance(title, str) else path.split(":")[1],
                     (inspect.getdoc(target) or path).splitlines()[0], _user_factory(target),
                     takes_labels=takes_labels, takes_unlabelled=takes_unlabelled)


def get_component(name: str, role: str | None = None) -> Component:
    """The component called ``name`` (of ``role``, "classifier" or "post_processor", when given).

    ``name`` is a built-in name or a ``module:attribute`` import path of the researcher's own (then
    ``role`` is required: what the object is used as).

    Raises ValueError listing the names there are, or saying why an import path does not resolve.
    """
    if role is not None and is_import_path(name):
        return _user_component(name, role)
    component = COMPONENTS.get(name) if isinstance(name, str) else None
    if component is None or (role is not None and component.role != role):
        names = CLASSIFIERS if role == "classifier" else POST_PROCESSORS if role else tuple(COMPONENTS)
        what = (role or "component").replace("_", "-")
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(names)}, or an import path "
                         "'module:attribute' of your own (see docs/extending.md)")
    return component


#: The built-in noise kinds (:func:`lsnpc.noise.simulate_noise`); a grid may also name an import path.
NOISE_KINDS: tuple[str, ...] = ("symmetric", "pairflip", "flip")

NoiseFunction = Callable[[Any, float, int], tuple[Any, dict[str, Any]]]


def get_noise(kind: str) -> NoiseFunction:
    """The noise process a grid's ``kind`` names, as ``noise(Y, rate, seed) -> (Y_noisy, report dict)``.

    A built-in kind is :func:`lsnpc.noise.simulate_noise`; a ``module:attribute`` path names a function
    ``f(Y, rate, random_state)`` returning the noisy labels (or ``(noisy labels, report)``), where
    ``Y`` is the clean (n, L) 0/1 matrix and ``random_state`` an int seed.

    Raises ValueError naming the kinds there are, or saying why an import path does not resolve.
    """
    if kind in NOISE_KINDS:
        def simulate(Y: Any, rate: float, seed: int) -> tuple[Any, dict[str, Any]]:
            from lsnpc.noise import simulate_noise

            noisy, report = simulate_noise(Y, kind, rate, random_state=seed)
            return noisy, report.to_dict()

        return simulate
    if not is_import_path(kind):
        raise ValueError(f"unknown noise kind {kind!r}; known: {', '.join(NOISE_KINDS)}, or an import path "
                         "'module:function' of your own (see docs/extending.md)")
    function = resolve_import_path(kind, "noise kind")
    if not callable(function):
        raise ValueError(f"noise kind {kind!r}: must name a function f(Y, rate, random_state), "
                         f"got {type(function).__name__}")

    def custom(Y: Any, rate: float, seed: int) -> tuple[Any, dict[str, Any]]:
        import numpy as np

        out = function(Y, rate, random_state=seed)
        noisy, report = (out if isinstance(out, tuple) and len(out) == 2 else (out, {}))
        noisy = np.asarray(noisy)
        if noisy.shape != np.shape(Y):
            raise ValueError(f"noise kind {kind!r} returned labels of shape {noisy.shape}; expected the clean "
                             f"labels' shape {np.shape(Y)}")
        changed = float(np.mean(noisy != np.asarray(Y))) if noisy.size else 0.0
        report = {"kind": kind, "rate": rate, "realised_rate": changed, **dict(report or {})}
        return noisy.astype(np.int64), report

    return custom
