"""Run one group of the grid: data → features → noise → base classifiers → post-processors → metrics.

:func:`run_group` is the unit of work every executor ships. It is a pure function of its
:class:`~lsnpc.experiments.grid.GroupTask`: every random choice (split, subsample, noise, network
initialisation) is seeded from the run's seed and a fixed purpose tag, never from global state.
Each finished run is written to the results store at once, so killing a worker loses only the run
in progress.

Protocol (the paper's, Section 5.1 and the reference code):

1. the training split is divided by :func:`lsnpc.data.paper_splits` into ``train`` (90 %) and two
   held-out halves ``val0`` (validation) and ``val1`` (the clean set);
2. noise corrupts the labels of all three parts; the clean labels of ``val0`` / ``val1`` are kept
   for the post-processors that are allowed to see them;
3. each base classifier is trained on the noisy ``train`` labels and picks its epoch on the noisy
   ``val0`` labels (no clean label reaches a base classifier);
4. each post-processor is fitted on the classifier's training-set probabilities and evaluated on the
   test split against clean labels.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import subprocess
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lsnpc.experiments.components import accepts, get_component, get_noise
from lsnpc.experiments.config import ComponentSpec, DatasetSpec
from lsnpc.experiments.grid import GroupTask, RunSpec
from lsnpc.experiments.store import ResultsStore

__all__ = ["GroupResult", "run_group", "prefetch_features", "derive_seed", "make_classifier", "make_processor",
           "DEFAULT_ENCODERS"]

DEFAULT_ENCODERS = {"texts": "all-MiniLM-L6-v2", "images": "resnet50"}


def derive_seed(seed: int, purpose: str) -> int:
    """A 32-bit seed for one purpose (``"noise"``, ``"split"``...) of run seed ``seed``.

    Hashing keeps the streams independent and stable across Python versions and processes.
    """
    digest = hashlib.sha256(f"{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@dataclass
class GroupResult:
    """What a group returns: finished rows, skipped run ids, errors (run id → traceback), and the run ids
    left to another runner that holds the group's claim (:meth:`ResultsStore.claim`)."""

    key: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    elsewhere: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- data


def _features(dataset: Any, spec: DatasetSpec, device: str, threads: int | None) -> np.ndarray:
    """(n, d) float32 features of a loaded data set (frozen encoder for text / image sets).

    Encoded features are cached on disk by the features module, so the groups of a grid (and
    later invocations) encode each split once.
    """
    if dataset.kind == "features":
        return np.asarray(dataset.X, dtype=np.float32)
    from lsnpc.features import extract_features, make_encoder

    encoder = make_encoder(spec.encoder or DEFAULT_ENCODERS[dataset.kind], num_threads=threads)
    return np.asarray(
        extract_features(dataset, encoder, batch_size=spec.batch_size, device=device,
                         cache_dir=spec.cache_dir, progress=False),
        dtype=np.float32,
    )


def prefetch_features(tasks: list[GroupTask], threads: int | None = None) -> None:
    """Encode (and so cache) the features of every text / image data set the tasks use, here.

    Called before local workers start, so that parallel groups of one data set find the features
    cached instead of each encoding them (GoEmotions' 48k texts take half an hour on one core).
    Failures are left for the groups to report.
    """
    from lsnpc.experiments.sources import dataset_kind, load_split

    seen: list[DatasetSpec] = []
    for task in tasks:
        spec = task.dataset
        if spec in seen:
            continue
        seen.append(spec)
        try:
            if dataset_kind(spec) == "features":
                continue
            for split in ("train", "test"):
                _features(load_split(spec, split), spec, task.device, threads)
        except Exception:  # noqa: S112 - the group will raise the same error with its run ids
            continue


@dataclass
class _GroupData:
    X: dict[str, np.ndarray]          # part -> features; parts: train, val0, val1, test
    Y_clean: dict[str, np.ndarray]
    Y_noisy: dict[str, np.ndarray]    # train, val0, val1
    noise_report: dict[str, Any]
    n_labels: int
    time_data_s: float


def _subsample(idx: np.ndarray, limit: int | None, seed: int, purpose: str) -> np.ndarray:
    if limit is None or len(idx) <= limit:
        return idx
    rng = np.random.default_rng(derive_seed(seed, purpose))
    return np.sort(rng.choice(idx, size=limit, replace=False))


def _prepare(task: GroupTask, threads: int | None = None) -> _GroupData:
    from lsnpc.data import paper_splits
    from lsnpc.experiments.sources import load_split

    start = time.perf_counter()
    spec, seed = task.dataset, task.seed
    train_set = load_split(spec, "train")
    test_set = load_split(spec, "test")
    X_all = _features(train_set, spec, task.device, threads)
    X_test = _features(test_set, spec, task.device, threads)
    Y_all = np.asarray(train_set.Y, dtype=np.int64)
    Y_test = np.asarray(test_set.Y, dtype=np.int64)

    parts = paper_splits(len(Y_all), random_state=derive_seed(seed, "split"))
    parts = {k: np.asarray(v) for k, v in parts.items()}
    parts["train"] = _subsample(parts["train"], spec.max_train, seed, "max_train")
    test_idx = _subsample(np.arange(len(Y_test)), spec.max_test, seed, "max_test")

    # Noise is drawn once over the whole training split, so a run's noisy labels do not depend on
    # max_train (a subsample just sees fewer of the same noisy rows).
    if task.noise.rate > 0:
        Y_noisy_all, noise_report = get_noise(task.noise.kind)(Y_all, task.noise.rate, derive_seed(seed, "noise"))
    else:
        Y_noisy_all, noise_report = Y_all.copy(), {"kind": task.noise.kind, "rate": 0.0}
    return _GroupData(
        X={**{k: X_all[v] for k, v in parts.items()}, "test": X_test[test_idx]},
        Y_clean={**{k: Y_all[v] for k, v in parts.items()}, "test": Y_test[test_idx]},
        Y_noisy={k: Y_noisy_all[v] for k, v in parts.items()},
        noise_report=noise_report,
        n_labels=int(Y_all.shape[1]),
        time_data_s=time.perf_counter() - start,
    )


# ----------------------------------------------------------------------------- components


def make_classifier(spec: ComponentSpec, *, seed: int, device: str) -> Any:
    """Build the base classifier named by ``spec`` (see :mod:`lsnpc.experiments.components`)."""
    component = get_component(spec.name, "classifier")
    return component.build(spec.params, random_state=derive_seed(seed, "classifier"), device=device)


def make_processor(spec: ComponentSpec, *, seed: int, device: str, classifier: Any = None) -> Any:
    """Build the post-processor named by ``spec``; ``None`` for ``none`` (the base model itself).

    The runner options among ``spec.params`` are left out; ``encoder: classifier`` passes the base
    ``classifier``'s trunk as LSNPC's encoder.
    """
    component = get_component(spec.name, "post_processor")
    options, params = component.split_params(spec.params)
    if options["encoder"] == "classifier" and classifier is not None:
        params["encoder"] = classifier.trunk_
    return component.build(params, random_state=derive_seed(seed, "processor"), device=device)


def _version() -> str:
    from lsnpc import __version__

    return __version__


@functools.cache
def source_revision() -> str | None:
    """The git commit of the lsnpc source that runs (``abc1234``, ``+dirty`` with uncommitted changes to
    tracked files), or None when lsnpc is not run from a git checkout (e.g. an installed wheel)."""
    package_dir = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(package_dir), *args], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return commit + ("+dirty" if dirty else "")


# ----------------------------------------------------------------------------- the group


def run_name(run: RunSpec, *, processor: bool = True) -> str:
    """How a warning or error names a run: its id and what it is."""
    what = f"{run.dataset.label}, {run.noise.kind} {100 * run.noise.rate:g}%, seed {run.seed}, {run.classifier.label}"
    return f"run {run.run_id} ({what} + {run.processor.label})" if processor else f"{what} (base classifier)"


@contextlib.contextmanager
def _named_warnings(where: str) -> Iterator[None]:
    """Re-issue the warnings raised in the body with ``where`` in front, so that a warning printed while a
    grid runs says which run raised it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        warnings.warn_explicit(f"{where}: {warning.message}", warning.category, warning.filename, warning.lineno)


def _run_processor(
    run: RunSpec, data: _GroupData, classifier: Any, probs: dict[str, np.ndarray], threads: int | None
) -> dict[str, Any]:
    from lsnpc.metrics import evaluate

    options, _ = get_component(run.processor.name, "post_processor").split_params(run.processor.params)
    processor = make_processor(run.processor, seed=run.seed, device=run.device, classifier=classifier)
    processor = _with_threads(processor, threads, run.processor.params)
    history: Any = None
    fit_s = 0.0
    start = time.perf_counter()
    if processor is None:
        corrected = probs["test"]
        selection = "n/a (base classifier output)"
    else:
        kwargs: dict[str, Any] = {}
        if options["clean_set"]:
            kwargs.update(X_clean=data.X["val1"], y_clean=data.Y_clean["val1"],
                          pred_probs_clean=probs["val1"])
        if options["select_on"] == "clean":
            kwargs.update(X_val=data.X["val0"], y_val=data.Y_clean["val0"], pred_probs_val=probs["val0"])
        if options["noisy_labels"]:  # the labels the base classifier was trained on
            kwargs.update(labels=data.Y_noisy["train"])
        if options["unlabelled"]:  # rows the base classifier never saw, their labels unread
            kwargs.update(X_unlabelled=np.concatenate([data.X["val0"], data.X["val1"]]),
                          pred_probs_unlabelled=np.concatenate([probs["val0"], probs["val1"]]))
        processor.fit(data.X["train"], probs["train"], **kwargs)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        corrected = processor.predict_proba(data.X["test"], probs["test"])
        selection = str(getattr(processor, "selection_", "none (no model selection)"))
        history = getattr(processor, "history_", None)
    predict_s = time.perf_counter() - start
    # labels as the processor's predict decides them: LSNPC's fitted decision threshold, else 0.5
    threshold = float(getattr(processor, "threshold_", 0.5))
    metrics = evaluate(data.Y_clean["test"], corrected, threshold=threshold)
    row: dict[str, Any] = {
        **run.flat(),
        **{k: float(v) for k, v in metrics.items()},
        "selection": selection,
        "threshold": threshold,
        "clean_set_used": bool(options["clean_set"]) and processor is not None,
        "unlabelled_used": bool(options["unlabelled"]) and processor is not None,
        "time_fit_s": fit_s,
        "time_predict_s": predict_s,
        "lsnpc_version": _version(),
        "lsnpc_revision": source_revision(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if history is not None:
        row["history"] = history
    fallback = getattr(processor, "fallback_labels_", None)  # labels KNN answers with the base model's
    if fallback is not None:
        row["n_fallback_labels"] = int(np.sum(fallback))
    return row


def _with_threads(estimator: Any, threads: int | None, params: Any) -> Any:
    """Give ``estimator`` ``n_threads=threads`` unless its config ``params`` chose one (the estimator's own
    default, e.g. LSNPC's 1, is not a choice)."""
    if estimator is None or threads is None or not hasattr(estimator, "n_threads"):
        return estimator
    if "n_threads" not in params:
        estimator.n_threads = threads
    return estimator


def run_group(
    task: GroupTask,
    results_dir: str | Path | None = None,
    *,
    threads: int | None = None,
    raise_errors: bool = False,
) -> GroupResult:
    """Run every unfinished run of ``task``; write each finished run to ``results_dir`` at once.

    Runs already in the store are skipped (and their base classifier is not trained when no run of
    it is left). A failing run is recorded in ``errors`` with its traceback and not written, so the
    next invocation retries it; the other runs of the group go on. With ``raise_errors`` the first
    error propagates instead (the demo wants the user's mistake, not a traceback string).

    ``threads`` is the torch thread count of every estimator that takes ``n_threads`` (unless its
    params set one); it does not change results, only speed, so it is not part of a run's identity.
    """
    store = ResultsStore(results_dir) if results_dir is not None else None
    result = GroupResult(key=task.key)
    pending = [r for r in task.runs if store is None or not store.has(r.run_id)]
    result.skipped = [r.run_id for r in task.runs if r not in pending]
    if not pending:
        return result
    try:
        data = _prepare(task, threads)
    except Exception:
        if raise_errors:
            raise
        tb = traceback.format_exc()
        result.errors = {r.run_id: tb for r in pending}
        return result

    by_classifier: dict[str, list[RunSpec]] = {}
    for run in pending:
        by_classifier.setdefault(run.classifier.label, []).append(run)
    for runs in by_classifier.values():
        spec = runs[0].classifier
        try:
            start = time.perf_counter()
            classifier = _with_threads(make_classifier(spec, seed=task.seed, device=task.device), threads,
                                       spec.params)
            # The base classifier sees noisy labels only, validation included.
            with _named_warnings(run_name(runs[0], processor=False)):
                # noisy validation labels choose the epoch where fit takes them (a user's model may not)
                validation = ({"X_val": data.X["val0"], "y_val": data.Y_noisy["val0"]}
                              if accepts(classifier.fit, "X_val") else {})
                classifier.fit(data.X["train"], data.Y_noisy["train"], **validation)
            classifier_s = time.perf_counter() - start
            probs = {part: classifier.predict_proba(data.X[part]) for part in ("train", "val0", "val1", "test")}
        except Exception:
            if raise_errors:
                raise
            tb = traceback.format_exc()
            result.errors.update({r.run_id: tb for r in runs})
            continue
        for run in runs:
            try:
                with _named_warnings(run_name(run)):
                    row = _run_processor(run, data, classifier, probs, threads)
            except Exception:
                if raise_errors:
                    raise
                result.errors[run.run_id] = traceback.format_exc()
                continue
            row.update({
                "time_data_s": data.time_data_s,
                "time_classifier_s": classifier_s,
                "classifier_selection": "noisy validation labels (val0)",
                "noise_realised_rate": data.noise_report.get("realised_rate", 0.0),
                "n_train": int(len(data.Y_noisy["train"])),
                "n_test": int(len(data.Y_clean["test"])),
                "n_labels": data.n_labels,
            })
            if store is not None:
                store.write(row)
            result.rows.append(row)
    return result
