"""lsnpc.explain: GradCAM of a base model over a CNN and of LSNPC's correction, and the figure 5 report figure.

A random-weight ResNet-50 (torchvision, weights=None) on a dozen generated 128 × 128 pictures (coloured
squares; label k = "a square of colour k is present"); layer4's map is then 4 × 4.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lsnpc import LSNPC, MLPClassifier
from lsnpc._torch import seeded
from lsnpc._validation import NotFittedError
from lsnpc.explain import (
    classifier_cams,
    corrected_cams,
    corrected_probabilities,
    grad_cam,
    gradcam_figure,
    resnet_backbone,
)

torchvision = pytest.importorskip("torchvision")

SIDE = 128
COLOURS = np.array([[230, 30, 30], [30, 200, 30], [40, 60, 230]], dtype=np.uint8)
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def _pictures(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(n, SIDE, SIDE, 3) uint8 pictures on a grey background and their (n, 3) labels."""
    pictures = np.full((n, SIDE, SIDE, 3), 128, dtype=np.uint8)
    labels = rng.integers(0, 2, size=(n, len(COLOURS)))
    labels[labels.sum(1) == 0, 0] = 1
    for i in range(n):
        for k in np.flatnonzero(labels[i]):
            top, left = rng.integers(0, SIDE - 40, size=2)
            pictures[i, top : top + 40, left : left + 40] = COLOURS[k]
    return pictures, labels


def _network_input(pictures: np.ndarray) -> np.ndarray:
    return ((pictures / 255.0 - MEAN) / STD).transpose(0, 3, 1, 2).astype(np.float32)


@pytest.fixture(scope="module")
def setting():
    rng = np.random.default_rng(0)
    pictures, labels = _pictures(12, rng)
    x = _network_input(pictures)
    with seeded(0):
        backbone = resnet_backbone(torchvision.models.resnet50(weights=None)).eval()
    with torch.no_grad():
        features = backbone(torch.as_tensor(x)).numpy()
    base = MLPClassifier(hidden_dims=(), epochs=5, random_state=0).fit(features, labels)
    probs = base.predict_proba(features)
    # LSNPC's data encoder is a copy of the base model's CNN (and its standardisation), as in the paper
    encoder = nn.Sequential(backbone, base.trunk_)
    corrector = LSNPC(encoder=encoder, epochs=1, batch_size=6, guard=False, student=False, random_state=0).fit(x, probs)
    return {"pictures": pictures, "x": x, "labels": labels, "backbone": backbone, "base": base,
            "probs": probs, "corrector": corrector}


def _assert_normalised(maps: np.ndarray) -> None:
    assert maps.dtype == np.float32
    assert maps.min() >= 0.0 and maps.max() <= 1.0
    peaks = maps.max(axis=(2, 3))
    assert np.all(np.isclose(peaks, 1.0) | (peaks == 0.0))
    assert np.isclose(peaks, 1.0).mean() > 0.5  # most maps are not empty


def test_base_model_maps_have_the_image_shape_and_are_normalised(setting) -> None:
    maps = classifier_cams(setting["base"], setting["backbone"], setting["x"][:4], [0, 1, 2])
    assert maps.shape == (4, 3, SIDE, SIDE)
    _assert_normalised(maps)


def test_maps_change_with_the_target_label(setting) -> None:
    maps = classifier_cams(setting["base"], setting["backbone"], setting["x"][:4], [0, 1, 2])
    assert not np.allclose(maps[:, 0], maps[:, 1], atol=1e-3)
    assert not np.allclose(maps[:, 1], maps[:, 2], atol=1e-3)


def test_a_frozen_backbone_still_gives_maps(setting) -> None:
    frozen = copy.deepcopy(setting["backbone"]).requires_grad_(False)
    maps = classifier_cams(setting["base"], frozen, setting["x"][:2], 1)
    expected = classifier_cams(setting["base"], setting["backbone"], setting["x"][:2], 1)
    np.testing.assert_allclose(maps, expected, atol=1e-5)


def test_corrected_maps_are_normalised_seeded_and_differ_from_the_base_maps(setting) -> None:
    x, probs = setting["x"][:4], setting["probs"][:4]
    corrected = corrected_cams(setting["corrector"], x, probs, [0, 1, 2], layer="0.layer4", seed=3)
    assert corrected.shape == (4, 3, SIDE, SIDE)
    _assert_normalised(corrected)
    again = corrected_cams(setting["corrector"], x, probs, [0, 1, 2], layer="0.layer4", seed=3)
    np.testing.assert_array_equal(corrected, again)
    base = classifier_cams(setting["base"], setting["backbone"], x, [0, 1, 2])
    assert np.abs(corrected - base).mean() > 0.05


def test_the_differentiated_correction_is_the_models_correction_with_the_same_draws(setting) -> None:
    """By default what predict_proba corrects (the model's own draws); with a seed, model.correct with
    the design that seed draws."""
    from lsnpc.corrector.montecarlo import monte_carlo_design

    corrector = setting["corrector"]
    x, probs = setting["x"][:5], setting["probs"][:5]
    np.testing.assert_allclose(corrected_probabilities(corrector, x, probs), corrector._raw_correct(x, probs),
                               atol=1e-5)
    ours = corrected_probabilities(corrector, x, probs, seed=11, n_samples=4)
    design = monte_carlo_design(4, corrector.model_.monte_carlo_uniforms.shape[1], torch.Generator().manual_seed(11))
    with torch.no_grad():
        reference = corrector.model_.correct(torch.as_tensor(x), torch.as_tensor(probs), uniforms=design).numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    assert np.abs(ours - corrected_probabilities(corrector, x, probs)).max() > 0  # another design


def test_grad_cam_on_any_network_and_layer() -> None:
    with seeded(1):
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(8, 2))
    images = np.random.default_rng(1).normal(size=(3, 3, 16, 16)).astype(np.float32)
    maps = grad_cam(lambda x: torch.sigmoid(net(x)), net[1], images, [0, 1])
    assert maps.shape == (3, 2, 16, 16)
    assert maps.min() >= 0 and maps.max() <= 1


def test_the_fit_handing_back_the_base_model_is_said(setting) -> None:
    corrector = copy.copy(setting["corrector"])
    corrector.base_weight_ = 1.0
    with pytest.warns(UserWarning, match="fit hands back the base model"):
        corrected_cams(corrector, setting["x"][:1], setting["probs"][:1], 0, layer="0.layer4")


def test_bad_inputs_are_refused_naming_the_argument(setting) -> None:
    base, backbone, corrector = setting["base"], setting["backbone"], setting["corrector"]
    x, probs = setting["x"][:2], setting["probs"][:2]
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        classifier_cams(base, backbone, x, [3])
    with pytest.raises(ValueError, match="labels must be a label index"):
        classifier_cams(base, backbone, x, [])
    with pytest.raises(ValueError, match="layer must name a submodule"):
        classifier_cams(base, backbone, x, 0, layer="layer9")
    with pytest.raises(ValueError, match="layer must output a feature map"):
        classifier_cams(base, backbone, x, 0, layer="flatten")
    with pytest.raises(ValueError, match="images must be a 4-d array"):
        classifier_cams(base, backbone, x[0], 0)
    with pytest.raises(ValueError, match="classifier must be"):
        classifier_cams("mlp", backbone, x, 0)
    with pytest.raises(ValueError, match="pred_probs must have shape"):
        corrected_cams(corrector, x, probs[:1], 0, layer="0.layer4")
    with pytest.raises(ValueError, match="images must have per-image shape"):
        corrected_cams(corrector, x[:, :, :64, :64], probs, 0, layer="0.layer4")
    with pytest.raises(ValueError, match="seed must be >= 0"):
        corrected_cams(corrector, x, probs, 0, layer="0.layer4", seed=-1)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        corrected_probabilities(corrector, x, probs, n_samples=0)
    with pytest.raises(ValueError, match="corrector must be a fitted LSNPC"):
        corrected_cams(base, x, probs, 0)
    with pytest.raises(NotFittedError):
        corrected_cams(LSNPC(encoder=backbone), x, probs, 0)
    features = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    own_encoder = LSNPC(epochs=1, random_state=0).fit(features, np.full((20, 3), 0.5, dtype=np.float32))
    with pytest.raises(ValueError, match="fitted without encoder="):
        corrected_cams(own_encoder, x, probs, 0)
    averaged = LSNPC(epochs=1, n_fits=2, random_state=0).fit(features, np.full((20, 3), 0.5, dtype=np.float32))
    with pytest.raises(ValueError, match=r"corrector averages 2 networks \(n_fits=2\); a Grad-CAM map explains one"):
        corrected_cams(averaged, x, probs, 0)


def test_the_figure_is_written_atomically_and_never_over_a_users_file(setting, tmp_path: Path) -> None:
    x, probs, pictures = setting["x"][:2], setting["probs"][:2], setting["pictures"][:2]
    base = classifier_cams(setting["base"], setting["backbone"], x, [0, 2])
    corrected = corrected_cams(setting["corrector"], x, probs, [0, 2], layer="0.layer4")
    p_corrected = corrected_probabilities(setting["corrector"], x, probs)
    path = tmp_path / "figure5.png"
    out = gradcam_figure(path, pictures, base, corrected, ["red", "blue"], base_probs=probs[:, [0, 2]],
                         corrected_probs=p_corrected[:, [0, 2]], true_labels=setting["labels"][:2, [0, 2]])
    assert out == path and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure5.png"]  # no temporary file left
    with pytest.raises(FileExistsError, match="overwrite=True"):
        gradcam_figure(path, pictures, base, corrected, ["red", "blue"])
    gradcam_figure(path, pictures, base, corrected, ["red", "blue"], overwrite=True)
    pdf = gradcam_figure(tmp_path / "figure5.pdf", pictures / 255.0, base, corrected, ["red", "blue"])
    assert pdf.read_bytes()[:4] == b"%PDF"


def test_the_figure_refuses_inputs_that_do_not_fit(setting, tmp_path: Path) -> None:
    pictures = setting["pictures"][:2]
    maps = np.zeros((2, 1, SIDE, SIDE), dtype=np.float32)
    with pytest.raises(ValueError, match="path must end in"):
        gradcam_figure(tmp_path / "f.txt", pictures, maps, maps, ["red"])
    with pytest.raises(ValueError, match="corrected_maps must have shape"):
        gradcam_figure(tmp_path / "f.png", pictures, maps, maps[:1], ["red"])
    with pytest.raises(ValueError, match="images must be"):
        gradcam_figure(tmp_path / "f.png", pictures[:, :64], maps, maps, ["red"])
    with pytest.raises(ValueError, match="images must be uint8 or floats in"):
        gradcam_figure(tmp_path / "f.png", pictures.astype(np.float32), maps, maps, ["red"])
    with pytest.raises(ValueError, match="label_names must be 1 strings"):
        gradcam_figure(tmp_path / "f.png", pictures, maps, maps, ["red", "blue"])
    with pytest.raises(ValueError, match="base_maps must hold maps in"):
        gradcam_figure(tmp_path / "f.png", pictures, maps + 2, maps, ["red"])
    assert not list(tmp_path.iterdir())


def test_nothing_in_lsnpc_imports_explain_but_the_cli_and_the_experiments() -> None:
    from tests.test_import_graph import import_graph

    importers = {m for m, targets in import_graph().items() if any(t.startswith("lsnpc.explain") for t in targets)}
    allowed = {m for m in importers if m.startswith(("lsnpc.cli", "lsnpc.experiments", "lsnpc.explain"))}
    assert importers == allowed


def test_label_marks_colour_what_the_correction_fixed_as_the_paper_does() -> None:
    from lsnpc.explain import label_marks

    truth = np.array([[1, 1, 0, 0], [0, 1, 0, 1]])
    base = np.array([[1, 0, 1, 0], [0, 1, 0, 1]])
    corrected = np.array([[1, 1, 0, 1], [0, 1, 0, 1]])
    marks = label_marks(["cat", "dog", "car", "bus"], truth, base, corrected)
    # image 0: cat kept (black), dog missed then found (blue), car mis-classified then removed (red); the bus the
    # correction wrongly added is not a ground-truth label and was not fixed: not listed
    assert [(m.name, m.colour) for m in marks[0]] == [("cat", "black"), ("dog", "blue"), ("car", "red")]
    assert [(m.name, m.colour) for m in marks[1]] == [("dog", "black"), ("bus", "black")]
    with pytest.raises(ValueError, match="share one shape"):
        label_marks(["cat"], truth, base, corrected)


def test_a_collapsed_correction_is_named_and_a_working_one_is_not() -> None:
    from lsnpc.explain import collapse_message

    flat = np.full((6, 4), 0.4) + np.random.default_rng(0).normal(0, 0.003, (6, 4))
    message = collapse_message(np.clip(flat, 0, 1))
    assert message is not None and "collapsed" in message and "p ≈ 0.40" in message
    assert collapse_message(np.array([[0.9, 0.1, 0.2], [0.1, 0.8, 0.3]])) is None


def test_the_gradcam_command_draws_figure_5_from_an_npz_of_pictures(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    pictures, labels = _pictures(16, rng)
    pictures = pictures[:, ::2, ::2].copy()  # 64 x 64: quick on a CPU
    np.savez(tmp_path / "pics.npz", images=pictures, labels=labels, label_names=np.array(["red", "green", "blue"]))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    args = [sys.executable, "-m", "lsnpc", "gradcam", "pics.npz", "--out", "fig5.png", "--weights", "none",
            "--show", "3", "--mlp-epochs", "3", "--lsnpc-epochs", "1", "--noise-rate", "0.4", "--json"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (tmp_path / "fig5.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["images_shown"]) == 3 and len(result["marks"]) == 3
    assert {m["colour"] for row in result["marks"] for m in row} <= {"black", "blue", "red"}
    truth = {i: {["red", "green", "blue"][k] for k in np.flatnonzero(labels[i])} for i in result["images_shown"]}
    for i, row in zip(result["images_shown"], result["marks"], strict=True):  # black and blue: the true labels
        assert {m["label"] for m in row if m["colour"] != "red"} == truth[i]
    if result["collapsed"]:
        assert "warning: the correction has collapsed" in " ".join(done.stderr.split())
    again = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert again.returncode == 1 and "--force" in again.stderr  # the figure is never replaced silently
