"""The paper's grids (configs/) say what the paper says: the ablation compares latents only, LSNPC's
paper recipe starts from the base model's trunk, and the semi-supervised runs use the paper's eta."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsnpc.experiments.config import load_config
from lsnpc.experiments.grid import expand_runs

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PAPER_GRIDS = ("table3", "table4", "figure3", "figure4")


def _lsnpc_runs(name: str) -> list:
    return [r for r in expand_runs(load_config(CONFIGS / f"{name}.yaml")) if r.processor.name.startswith("lsnpc")]


def test_the_ablation_rows_differ_only_in_the_latent() -> None:
    runs = _lsnpc_runs("table4")
    assert {r.processor.name for r in runs} == {"lsnpc-paper"}  # one recipe, one runner default
    rows: dict[tuple, dict[str, dict]] = {}
    for run in runs:
        key = (run.dataset.label, run.noise, run.seed, run.classifier.label)
        rows.setdefault(key, {})[run.processor.label] = dict(run.processor.params)
    assert rows
    for by_label in rows.values():
        assert {p["latent"] for p in by_label.values()} == {"student", "gauss", "learned"}
        rest = [{k: v for k, v in p.items() if k != "latent"} for p in by_label.values()]
        assert all(r == rest[0] for r in rest), by_label
        assert rest[0]["select_on"] == "clean" and rest[0]["clean_set"] is False


@pytest.mark.parametrize("name", PAPER_GRIDS)
def test_the_paper_recipe_starts_from_the_base_models_trunk_and_selects_on_clean_validation(name: str) -> None:
    paper_runs = [r for r in _lsnpc_runs(name) if r.processor.name == "lsnpc-paper"]
    assert paper_runs
    for run in paper_runs:
        assert run.processor.params["encoder"] == "classifier", run.processor.label
        assert run.processor.params["select_on"] == "clean", run.processor.label


def test_semi_supervised_runs_use_the_papers_eta_and_epochs() -> None:
    runs = [r for r in _lsnpc_runs("figure3") if r.processor.label == "lsnpc-paper-semi"]
    assert runs and all(r.processor.params["eta"] == 0.5 and r.processor.params["clean_set"] for r in runs)
    epochs = {(r.dataset.name, r.processor.label): r.processor.params["epochs"] for r in _lsnpc_runs("figure3")
              if r.processor.name == "lsnpc-paper"}
    assert epochs == {("voc2012", "lsnpc-paper"): 15, ("voc2012", "lsnpc-paper-semi"): 10,
                      ("coco2014", "lsnpc-paper"): 15, ("coco2014", "lsnpc-paper-semi"): 5}


def test_figure2_watches_npc_on_clean_validation_in_the_papers_two_settings() -> None:
    runs = [r for r in expand_runs(load_config(CONFIGS / "figure2.yaml")) if r.processor.name == "npc"]
    settings = {(r.dataset.name, r.classifier.name, r.noise.kind, r.noise.rate) for r in runs}
    assert settings == {("voc2007", "mlp", "pairflip", 0.3), ("tomato", "addgcn", "symmetric", 0.5)}
    assert all(r.processor.params["select_on"] == "clean" for r in runs)
