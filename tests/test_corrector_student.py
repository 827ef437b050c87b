"""The corrected-label student: its fit, its place in LSNPC's output, and the paper's recipe without it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lsnpc import LSNPC
from lsnpc.corrector.student import LabelStudent, fit_student, student_epochs
from lsnpc.metrics import micro_f1
from tests.conftest import make_noisy_problem, make_toy_multilabel

FAST = dict(epochs=2, n_threads=1, latent_dim=8, label_embedding_dim=16, hidden_dim=32)


def test_epochs_shrink_for_large_data_but_stay_at_least_three() -> None:
    assert student_epochs(300) == student_epochs(4000) == 30
    assert student_epochs(50_000) == 3
    assert 3 < student_epochs(20_000) < 30


def _student(d: int, n_labels: int, seed: int = 0) -> LabelStudent:
    torch.manual_seed(seed)
    encoder = nn.Sequential(nn.Linear(d, 16), nn.GELU())
    return LabelStudent(encoder, 16, n_labels)


def test_fit_student_learns_soft_targets() -> None:
    X, Y = make_toy_multilabel(400, 8, 3, seed=1)
    targets = torch.as_tensor(np.where(Y == 1, 0.9, 0.1), dtype=torch.float32)
    student = _student(8, 3)
    Xt = torch.as_tensor(X)
    before = micro_f1(Y, student.predict_proba(Xt).numpy())
    result = fit_student(student, Xt, targets)
    after = student.predict_proba(Xt).numpy()
    assert result.epochs == result.best_epoch == 30 and "last epoch" in result.selection
    assert micro_f1(Y, after) > max(before + 0.2, 0.7)
    assert not student.training


def test_fit_student_keeps_the_best_validation_epoch() -> None:
    X, Y = make_toy_multilabel(300, 8, 3, seed=2)
    targets = torch.as_tensor(Y, dtype=torch.float32)
    student = _student(8, 3, seed=2)
    result = fit_student(student, torch.as_tensor(X[:250]), targets[:250], val=(X[250:], Y[250:]))
    assert "validation" in result.selection and len(result.val_scores) == result.epochs
    assert result.best_epoch == int(np.argmax(result.val_scores)) + 1  # the first of equal scores
    kept = micro_f1(Y[250:], student.predict_proba(torch.as_tensor(X[250:])).numpy())
    assert kept == pytest.approx(max(result.val_scores))


@pytest.fixture(scope="module")
def noisy_problem() -> dict[str, np.ndarray]:
    return make_noisy_problem(500, 0.2)


def test_lsnpc_output_is_the_mean_of_correction_and_student(noisy_problem: dict[str, np.ndarray]) -> None:
    X, Y, P = noisy_problem["X"], noisy_problem["Y"], noisy_problem["P"]
    model = LSNPC(random_state=0, guard=False, **FAST).fit(X[:300], P[:300], X_val=X[300:350], y_val=Y[300:350],
                                                           pred_probs_val=P[300:350])
    student = model.report_["student"]
    assert student.choice == 0.5 and student.evidence["chosen_by"] == "validation micro-F1"
    assert student.evidence["n_rows"] == 300  # every training row: the triple chose the epoch, none held out
    assert model.student_.encoder is not model.model_.data_encoder  # a trained copy, not the corrector's own
    out = model.predict_proba(X[350:], P[350:])
    corrected = model._raw_correct(X[350:], P[350:])
    taught = model.student_.predict_proba(torch.as_tensor(X[350:])).numpy()
    np.testing.assert_allclose(out, 0.5 * corrected + 0.5 * taught, rtol=1e-6, atol=1e-6)

    alone = LSNPC(random_state=0, guard=False, student=False, **FAST).fit(
        X[:300], P[:300], X_val=X[300:350], y_val=Y[300:350], pred_probs_val=P[300:350])
    assert alone.student_ is None and alone.report_["student"].choice is None
    # the student is fitted after the corrector, from its own seed: the correction itself is unchanged
    np.testing.assert_array_equal(alone.predict_proba(X[350:], P[350:]), corrected)


def test_the_paper_recipe_has_no_student_and_no_guard() -> None:
    paper = LSNPC.paper()
    assert paper.student is False and paper.guard is False
    assert LSNPC().student is True and LSNPC().guard is True


@pytest.mark.parametrize("bad", [{"blend_confidence": 0.0}, {"blend_confidence": 1.5}, {"prior_base_weight": -0.1},
                                 {"prior_base_weight": 2}, {"prior_base_weight": "half"}])
def test_blend_parameters_are_checked(bad: dict, noisy_problem: dict[str, np.ndarray]) -> None:
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        LSNPC(**bad, **FAST).fit(noisy_problem["X"][:50], noisy_problem["P"][:50])


def test_the_student_is_saved_checked_and_loaded(noisy_problem: dict[str, np.ndarray], tmp_path) -> None:
    X, P = noisy_problem["X"], noisy_problem["P"]
    model = LSNPC(random_state=0, **FAST).fit(X[:200], P[:200])
    model.save(tmp_path / "m")
    loaded = LSNPC.load(tmp_path / "m")
    assert loaded.report_["student"] == model.report_["student"] and loaded.student_ is not None
    assert model.report_["student"].evidence["n_rows"] == 180  # the 20 rows held out to choose the epoch are not
    np.testing.assert_array_equal(loaded.predict_proba(X[300:], P[300:]), model.predict_proba(X[300:], P[300:]))
    weights = tmp_path / "m" / "student.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
    with pytest.raises(ValueError, match="student.safetensors is damaged"):
        LSNPC.load(tmp_path / "m")


def test_a_saved_model_predicts_with_the_student_share_it_was_fitted_with(
    noisy_problem: dict[str, np.ndarray], tmp_path,
) -> None:
    """The student's share is part of the fitted model (``report_["student"].choice``): a model saved with
    another share than today's default predicts with its own; a share outside [0, 1] or missing is a damaged
    file."""
    import json

    from lsnpc._saving import config_digest

    def write(config: dict) -> None:  # a consistent saved file with that share, digest included
        config_path.write_text(json.dumps({**config, "config_sha256": config_digest(config)}))

    X, P = noisy_problem["X"], noisy_problem["P"]
    model = LSNPC(random_state=0, guard=False, **FAST).fit(X[:200], P[:200])
    model.save(tmp_path / "m")
    config_path = tmp_path / "m" / "config.json"
    config = json.loads(config_path.read_text())
    fitted = config["fitted"]
    student = fitted["report_"]["decisions"][1]
    assert student["step"] == "student" and student["choice"] == 0.5
    student["choice"] = 0.75
    write(config)
    other = LSNPC.load(tmp_path / "m")
    corrected = other._raw_correct(X[300:], P[300:])
    taught = other.student_.predict_proba(torch.as_tensor(X[300:])).numpy()
    np.testing.assert_allclose(other.predict_proba(X[300:], P[300:]), 0.25 * corrected + 0.75 * taught, rtol=1e-6,
                               atol=1e-6)
    for weight, match in ((1.5, "student share must be null or a number in"), ("half", "choice must be a number"),
                          (None, "params.student is True but the report has no student")):
        student["choice"] = weight
        write(config)
        with pytest.raises(ValueError, match=match):
            LSNPC.load(tmp_path / "m")
