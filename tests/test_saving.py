"""Saving fitted models as people do it: from several processes at once, to paths written with ``~``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsnpc import LSNPC

TINY = {"epochs": 1, "hidden_dim": 16, "latent_dim": 4, "label_embedding_dim": 8}


def _tiny_fit(seed: int) -> LSNPC:
    rng = np.random.default_rng(seed)
    X, P = rng.normal(size=(40, 3)), rng.uniform(size=(40, 2))
    return LSNPC(random_state=seed, **TINY).fit(X, P)


def _race_saver(worker: int, barrier: Any, source: str, targets: list[str], results: Any) -> None:
    """One racing process: loads its own fitted model, then at each round saves it to the round's
    target at the same moment as the other (both wait at ``barrier``)."""
    model = LSNPC.load(source)
    for target in targets:
        barrier.wait(timeout=300)
        try:
            model.save(target)
            results.put((target, worker, "saved"))
        except FileExistsError:
            results.put((target, worker, "refused"))
        except BaseException as exc:  # noqa: BLE001  (reported to the test, which fails on it)
            results.put((target, worker, f"{type(exc).__name__}: {exc}"))


def test_two_processes_saving_to_one_new_path_never_both_succeed(tmp_path: Path) -> None:
    """Two processes save different fitted models to the same new path at once, round after round: one
    saves, the other is refused with FileExistsError, and the folder loads as the winner's model."""
    import multiprocessing

    sources = [tmp_path / f"source{w}" for w in range(2)]
    for w, source in enumerate(sources):
        _tiny_fit(w).save(source)
    seeds = [LSNPC.load(source).predict_seed_ for source in sources]
    assert seeds[0] != seeds[1]
    targets = [str(tmp_path / f"model{r}") for r in range(4)]
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    procs = [context.Process(target=_race_saver, args=(w, barrier, str(sources[w]), targets, results))
             for w in range(2)]
    for proc in procs:
        proc.start()
    outcomes: dict[str, dict[int, str]] = {t: {} for t in targets}
    for _ in range(2 * len(targets)):
        target, worker, outcome = results.get(timeout=600)
        outcomes[target][worker] = outcome
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    for target, by_worker in outcomes.items():
        assert sorted(by_worker.values()) == ["refused", "saved"], by_worker
        winner = next(w for w, outcome in by_worker.items() if outcome == "saved")
        assert LSNPC.load(target).predict_seed_ == seeds[winner]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*(s.name for s in sources),
                                                                 *(Path(t).name for t in targets)])


def test_save_to_a_path_with_a_tilde_writes_in_the_home_folder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    model = _tiny_fit(0)
    model.save("~/model")
    assert (home / "model" / "config.json").is_file()
    assert list(work.iterdir()) == [], "no folder literally named '~'"
    with pytest.raises(FileExistsError):
        model.save("~/model")
    assert LSNPC.load(home / "model").predict_seed_ == model.predict_seed_


def test_load_from_a_path_with_a_tilde(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    model = _tiny_fit(0)
    model.save(tmp_path / "model")
    assert LSNPC.load("~/model").predict_seed_ == model.predict_seed_
