"""Experiment configs: parsing, grid expansion, run identity and validation errors naming the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from lsnpc.experiments.config import ConfigError, load_config, parse_config
from lsnpc.experiments.grid import expand_runs, group_runs

REPO = Path(__file__).resolve().parents[1]

BASE = {
    "name": "t",
    "seeds": 2,
    "datasets": [{"name": "synthetic", "max_train": 100, "overrides": {"mlp": {"epochs": 7}}}],
    "noise": {"kinds": ["symmetric", "pairflip"], "rates": [0.0, 0.3]},
    "classifiers": [{"name": "mlp", "params": {"epochs": 2}}],
    "post_processors": ["none", "knn", {"name": "lsnpc", "sweep": {"nu0": [2.01, 3], "nu": [2.01, "learned"]}}],
}


def test_grid_is_the_product_with_one_clean_setting() -> None:
    config = parse_config(copy.deepcopy(BASE))
    # rate 0 appears once (under the first kind), not once per kind
    assert [(n.kind, n.rate) for n in config.noise] == [
        ("symmetric", 0.0), ("symmetric", 0.3), ("pairflip", 0.3)
    ]
    labels = [p.label for p in config.post_processors]
    assert labels[:2] == ["none", "knn"]
    assert "lsnpc[nu0=3,nu=learned]" in labels and len(labels) == 6
    runs = expand_runs(config)
    assert len(runs) == 1 * 3 * 2 * 1 * 6
    groups = group_runs(runs)
    assert len(groups) == 3 * 2  # (data set, noise, seed)
    assert all(len(g.runs) == 6 for g in groups)
    assert all(len({(r.noise, r.seed) for r in g.runs}) == 1 for g in groups)


def test_per_dataset_overrides_update_component_params() -> None:
    run = expand_runs(parse_config(copy.deepcopy(BASE)))[0]
    assert run.classifier.params["epochs"] == 7
    sweep_run = next(r for r in expand_runs(parse_config(copy.deepcopy(BASE)))
                     if r.processor.label == "lsnpc[nu0=3,nu=learned]")
    assert sweep_run.processor.params == {"nu0": 3, "nu": "learned"}


def test_run_id_depends_on_what_determines_the_result_only() -> None:
    a = expand_runs(parse_config(copy.deepcopy(BASE)))
    renamed = copy.deepcopy(BASE)
    renamed["name"] = "other-name"
    b = expand_runs(parse_config(renamed))
    assert [r.run_id for r in a] == [r.run_id for r in b]
    assert len({r.run_id for r in a}) == len(a)  # seeds and settings give distinct ids
    changed = copy.deepcopy(BASE)
    changed["classifiers"][0]["params"]["epochs"] = 3
    changed["datasets"][0]["overrides"] = {}
    assert {r.run_id for r in expand_runs(parse_config(changed))}.isdisjoint({r.run_id for r in a})


def test_several_grids_share_top_level_defaults_and_do_not_duplicate_runs() -> None:
    raw = copy.deepcopy(BASE)
    raw["grids"] = [
        {"noise": [{"kind": "symmetric", "rate": 0.3}]},
        {"noise": [{"kind": "symmetric", "rate": 0.3}, {"kind": "pairflip", "rate": 0.5}]},
    ]
    config = parse_config(raw)
    assert len(config.grids) == 2
    runs = expand_runs(config)
    assert len(runs) == 2 * 2 * 6  # sym 0.3 (shared by both grids, once) + pairflip 0.5


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["post_processors"].append("magic"), r"post_processors\[3\]\.name: unknown post-processor 'magic'; known: none, knn"),
        (lambda c: c["post_processors"].append("no_such_module_x:Thing"),
         r"post_processors\[3\]\.name: post-processor 'no_such_module_x:Thing': cannot import module"),
        (lambda c: c["classifiers"].append("lsnpc.baselines:NoSuchClass"),
         r"classifiers\[1\]\.name: classifier 'lsnpc.baselines:NoSuchClass': module .* has no attribute"),
        (lambda c: c["datasets"].append("missing-file.arff"), r"datasets\[1\]\.name: data file not found"),
        (lambda c: c["datasets"].append("mybib"), r"datasets\[1\]\.name: unknown data set 'mybib'"),
        (lambda c: c.update(noise=[{"kind": "symmetric", "rate": 1.5}]), r"noise\[0\]\.rate: must be a number in \[0, 1\)"),
        (lambda c: c.update(noise=[{"kind": "uniform", "rate": 0.1}]), r"noise\[0\]\.kind: unknown noise kind 'uniform'; known: symmetric, pairflip, flip"),
        (lambda c: c.update(seeds=0), r"seeds: .* must be >= 1"),
        (lambda c: c.update(seeds=[0, 0]), r"seeds: must not repeat"),
        (lambda c: c.pop("classifiers"), r"classifiers: required field is missing"),
        (lambda c: c.update(colour="red"), r"config: unknown field\(s\) 'colour'"),
        (lambda c: c["datasets"][0].update(max_train=-5), r"datasets\[0\]\.max_train: must be a positive integer"),
        (lambda c: c["datasets"][0].update(encoding="x"), r"datasets\[0\]: unknown field\(s\) 'encoding'"),
        (lambda c: c["classifiers"].append({"name": "mlp"}), r"classifiers\[1\]\.label: duplicate label 'mlp'"),
        (lambda c: c["classifiers"][0].update(params=[1, 2]), r"classifiers\[0\]\.params: must be a mapping"),
        (lambda c: c["post_processors"][2].update(sweep={"nu": []}), r"post_processors\[2\]\.sweep\.nu: must be a non-empty list"),
        (lambda c: c.update(grids=[{"seeds": 1, "noise": "x"}]), r"grids\[0\]\.noise: must be a non-empty list"),
    ],
)
def test_validation_errors_name_the_field(mutate, message) -> None:
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="config: must be a mapping"):
        load_config(scalar)


@pytest.mark.parametrize("name", ["smoke", "offline", "table3", "table4", "figure2", "figure3", "figure4"])
def test_shipped_configs_are_valid(name: str) -> None:
    config = load_config(REPO / "configs" / f"{name}.yaml")
    assert config.name == name
    assert expand_runs(config)


def test_figure4_sweeps_nu0_by_nu_including_learned() -> None:
    config = load_config(REPO / "configs" / "figure4.yaml")
    sweep = [p for p in config.post_processors if p.name == "lsnpc-paper"]
    assert len(sweep) == 4 * 5
    assert {p.params["nu"] for p in sweep} == {2.01, 3, 5, 10, "learned"}
