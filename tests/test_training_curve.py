"""lsnpc.explain.plot_training: a fit's training curve, from a fitted LSNPC or its history_."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lsnpc import LSNPC
from lsnpc.explain import plot_training

from tests.conftest import make_toy_multilabel

PNG = b"\x89PNG\r\n\x1a\n"
TINY = {"epochs": 3, "hidden_dim": 16, "latent_dim": 4, "label_embedding_dim": 8, "random_state": 0}


def _problem() -> dict[str, np.ndarray]:
    X, Y = make_toy_multilabel(150, 4, 3, seed=0)
    P = np.clip(0.6 * Y + np.random.default_rng(0).uniform(0, 0.4, Y.shape), 0, 1)
    return {"X": X, "Y": Y, "P": P}


def _fit(kind: str) -> LSNPC:
    """A tiny LSNPC whose epoch was chosen by ``kind``: validation F1, held-out noisy F1 or held-out ELBO."""
    d = _problem()
    model = LSNPC(selection=kind, **TINY)
    if kind == "val_f1":
        return model.fit(d["X"][:100], d["P"][:100], X_val=d["X"][100:], y_val=d["Y"][100:],
                         pred_probs_val=d["P"][100:])
    if kind == "noisy_f1":
        return model.fit(d["X"], d["P"], labels=d["Y"])
    return model.fit(d["X"], d["P"])


def _kept_line(figure) -> str:
    return next(line.get_label() for line in figure.axes[0].get_lines() if line.get_label().startswith("kept"))


@pytest.mark.parametrize(("kind", "axis", "legend"), [
    ("val_f1", "F1 on clean validation labels", "validation micro-F1"),
    ("noisy_f1", "held-out F1 against noisy labels", "held-out micro-F1"),
    ("noisy_elbo", "held-out negative ELBO", "held-out negative ELBO"),
])
def test_a_fitted_models_curve_is_written_as_a_png(kind: str, axis: str, legend: str, tmp_path: Path) -> None:
    """For each score that can choose the epoch: loss on one axis, that score on the other, the kept epoch marked,
    saved as a real PNG; the same from the history and the kept epoch given by hand."""
    model = _fit(kind)
    assert model.selection_.startswith(kind)
    figure = plot_training(model, path=tmp_path / "curve.png")
    data = (tmp_path / "curve.png").read_bytes()
    assert data.startswith(PNG) and len(data) > 5000
    loss_axis, score_axis = figure.axes
    assert loss_axis.get_ylabel().startswith("training loss") and score_axis.get_ylabel().startswith(axis)
    assert legend in [line.get_label() for line in score_axis.get_lines()]
    kept = model.best_epoch_
    assert _kept_line(figure) == ("kept: the warm start" if kept == 0 else f"kept: epoch {kept}")
    again = plot_training(model.history_, model.best_epoch_, path=tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes().startswith(PNG)
    assert again.axes[1].get_ylabel() == score_axis.get_ylabel()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.png", "curve.png"]  # no temporary file left


def test_entries_without_a_score_or_a_loss_are_left_out(tmp_path: Path) -> None:
    """A warm start without a training loss, a diverged epoch without a score, phases after training without an
    epoch number, and a history with no selection score at all still draw."""
    history = [
        {"epoch": 0, "phase": "warm_start", "warm_start_loss": 3.0, "holdout_neg_elbo": 9.0},
        {"epoch": 1, "phase": "train", "loss": 8.0, "holdout_neg_elbo": 7.5},
        {"epoch": 2, "phase": "train", "loss": float("nan"), "diverged": True},
        {"phase": "student", "seconds": 1.0},
        {"phase": "decide"},
    ]
    figure = plot_training(history, best_epoch=1, path=tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes().startswith(PNG)
    loss = next(line for line in figure.axes[0].get_lines() if line.get_label().startswith("training loss"))
    assert list(loss.get_xdata()) == [1.0]
    elbo = figure.axes[1].get_lines()[0]
    assert list(elbo.get_xdata()) == [0.0, 1.0]
    bare = plot_training([{"epoch": 1, "phase": "train", "loss": 2.0}, {"epoch": 2, "phase": "train", "loss": 1.5}])
    assert len(bare.axes) == 1 and "no selection score" in bare.axes[0].get_title()


def test_draws_into_the_callers_axes_and_reads_the_selection_it_is_told() -> None:
    from matplotlib.figure import Figure

    history = [{"epoch": 1, "loss": 2.0, "val_micro_f1": 0.5, "val_macro_f1": 0.4, "holdout_neg_elbo": 9.0},
               {"epoch": 2, "loss": 1.5, "val_micro_f1": 0.6, "val_macro_f1": 0.5, "holdout_neg_elbo": 8.0}]
    figure = Figure()
    ax = figure.subplots()
    assert plot_training(history, 2, ax=ax) is figure
    assert figure.axes[1].get_ylabel().startswith("F1 on clean validation labels")  # the first the history holds
    chosen = plot_training(history, 2, selection="noisy_elbo")
    assert chosen.axes[1].get_ylabel().startswith("held-out negative ELBO")


def test_bad_input_is_refused_naming_the_argument(tmp_path: Path) -> None:
    history = [{"epoch": 1, "loss": 2.0}, {"epoch": 2, "loss": 1.5}]
    for bad, match in (("abc", "history must be a list"), (5, "history must be a list"),
                       ([1, 2], "some entries are not dicts"), ([], "nothing to plot"),
                       ([{"phase": "decide"}], "nothing to plot")):
        with pytest.raises(ValueError, match=match):
            plot_training(bad)
    with pytest.raises(ValueError, match="best_epoch=9 is not an epoch of history"):
        plot_training(history, 9)
    with pytest.raises(ValueError, match="best_epoch must be an integer"):
        plot_training(history, True)
    with pytest.raises(ValueError, match="selection must be one of"):
        plot_training(history, 1, selection="val")
    with pytest.raises(ValueError, match="ax must be a matplotlib Axes"):
        plot_training(history, 1, ax="left")
    with pytest.raises(ValueError, match="path must end in one of .png"):
        plot_training(history, 1, path=tmp_path / "c.txt")
    (tmp_path / "c.png").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        plot_training(history, 1, path=tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes() == b"mine"
    plot_training(history, 1, path=tmp_path / "c.png", overwrite=True)
    assert (tmp_path / "c.png").read_bytes().startswith(PNG)
    with pytest.raises(ValueError, match="LSNPC is not fitted"):
        plot_training(LSNPC())
