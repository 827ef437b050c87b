"""The component registry: one place names every classifier and post-processor, and the config parser,
the runner and the command line read it."""

from __future__ import annotations

import copy

import pytest
import torch

from lsnpc import ADDGCN, HLC, LSNPC, KNNCorrector, MLPClassifier, NPCCorrector
from lsnpc.baselines import CountThreshold
from lsnpc.experiments import (
    CLASSIFIERS,
    COMPONENTS,
    POST_PROCESSORS,
    ConfigError,
    get_component,
    parse_config,
)
from lsnpc.experiments.config import POST_PROCESSORS as CONFIG_POST_PROCESSORS
from lsnpc.experiments.specs import ComponentSpec
from lsnpc.experiments.runner import make_classifier, make_processor
from tests.conftest import make_toy_multilabel

BUILT = {
    "mlp": MLPClassifier, "addgcn": ADDGCN, "hlc": HLC, "knn": KNNCorrector, "npc": NPCCorrector,
    "lsnpc": LSNPC, "lsnpc-semi": LSNPC, "gauss": LSNPC, "learned-nu": LSNPC, "lsnpc-paper": LSNPC,
    "count-threshold": CountThreshold,
}


def test_the_registry_is_what_configs_and_reports_name() -> None:
    assert set(COMPONENTS) == set(CLASSIFIERS) | set(POST_PROCESSORS)
    assert CLASSIFIERS == ("mlp", "addgcn", "hlc")
    assert CONFIG_POST_PROCESSORS is POST_PROCESSORS and POST_PROCESSORS[0] == "none"
    assert all(c.title and c.description for c in COMPONENTS.values())


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_each_name_builds_its_estimator_with_the_run_seed(name: str) -> None:
    spec = ComponentSpec(name=name, label=name, params={})
    make = make_classifier if name in CLASSIFIERS else make_processor
    est = make(spec, seed=4, device="cpu")
    if name == "none":
        assert est is None
        return
    assert type(est) is BUILT[name]
    assert isinstance(est.random_state, int)
    assert est.random_state == make(spec, seed=4, device="cpu").random_state != make(spec, seed=5, device="cpu").random_state


def test_variants_are_lsnpc_with_their_preset_and_params_override_it() -> None:
    def build(name: str, **params):
        return make_processor(ComponentSpec(name, name, params), seed=0, device="cpu")

    assert build("gauss").latent == "gauss" and build("learned-nu").latent == "learned"
    assert build("gauss", latent="student").latent == "student"
    assert build("lsnpc", nu="learned", nu0=3).get_params()["latent"] == "learned"  # the sensitivity grid's column
    paper = build("lsnpc-paper", epochs=4)
    assert paper.schedule == "paper" and paper.guard is False and paper.epochs == 4


def test_runner_options_have_per_component_defaults_and_are_not_estimator_params() -> None:
    assert get_component("lsnpc-semi").split_params({})[0] == {"clean_set": True, "select_on": "clean", "encoder": None,
                                                               "noisy_labels": False, "unlabelled": False}
    assert get_component("gauss").split_params({"noisy_labels": True}) == ({"clean_set": False, "select_on": "none",
                                                                           "encoder": None, "noisy_labels": True,
                                                                           "unlabelled": False}, {})
    assert get_component("count-threshold").split_params({"unlabelled": True})[0]["unlabelled"] is True
    assert get_component("lsnpc-paper").split_params({})[0]["select_on"] == "clean"
    options, params = get_component("lsnpc").split_params({"clean_set": True, "epochs": 3})
    assert options["clean_set"] is True and params == {"epochs": 3}
    est = make_processor(ComponentSpec("lsnpc-semi", "s", {"select_on": "none", "epochs": 2}), seed=0, device="cpu")
    assert est.epochs == 2


def test_encoder_classifier_starts_lsnpc_from_the_base_models_trunk() -> None:
    X, y = make_toy_multilabel(n=40, d=5, n_labels=3)
    base = MLPClassifier(hidden_dims=(6,), epochs=1, random_state=0).fit(X, y)
    est = make_processor(ComponentSpec("lsnpc", "l", {"encoder": "classifier"}), seed=0, device="cpu",
                         classifier=base)
    assert est.encoder is base.trunk_
    with torch.no_grad():
        assert est.encoder(torch.as_tensor(X)).shape == (40, 6)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown post-processor 'mlp'; known: none, knn"):
        get_component("mlp", "post_processor")
    with pytest.raises(ValueError, match="unknown component 'bert'"):
        get_component("bert")


BASE = {
    "name": "t",
    "datasets": ["synthetic"],
    "noise": [{"kind": "symmetric", "rate": 0.3}],
    "classifiers": ["mlp"],
    "post_processors": ["none"],
}


@pytest.mark.parametrize(
    "processor, message",
    [
        ({"name": "lsnpc", "params": {"select_on": "val"}}, "post_processors[0].params.select_on: must be 'none' or 'clean'"),
        ({"name": "lsnpc", "params": {"clean_set": "yes"}}, "post_processors[0].params.clean_set: must be true or false"),
        ({"name": "lsnpc", "params": {"encoder": "resnet"}}, "post_processors[0].params.encoder: must be 'classifier'"),
        ({"name": "knn", "params": {"encoder": "classifier"}}, "post_processors[0].params.encoder: knn has no data encoder"),
        ({"name": "lsnpc", "params": {"noisy_labels": "yes"}}, "post_processors[0].params.noisy_labels: must be true or"),
        ({"name": "npc", "params": {"noisy_labels": True}}, "post_processors[0].params.noisy_labels: npc takes no training"),
        ({"name": "lsnpc", "params": {"unlabelled": 1}}, "post_processors[0].params.unlabelled: must be true or false"),
        ({"name": "knn", "params": {"unlabelled": True}}, "post_processors[0].params.unlabelled: knn meets no label count"),
        ({"name": "lsnpc", "sweep": {"select_on": ["none", "x"]}}, "post_processors[0].params.select_on"),
        ({"name": "tabnet"}, "post_processors[0].name: unknown post-processor 'tabnet'; known: none, knn, npc"),
    ],
)
def test_the_config_parser_checks_runner_options_naming_the_field(processor: dict, message: str) -> None:
    raw = copy.deepcopy(BASE)
    raw["post_processors"] = [processor]
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert str(info.value).startswith(message)


def test_a_valid_encoder_option_parses() -> None:
    raw = copy.deepcopy(BASE)
    raw["post_processors"] = [{"name": "lsnpc-semi", "params": {"encoder": "classifier", "clean_set": False}}]
    (spec,) = parse_config(raw).post_processors
    assert dict(spec.params) == {"encoder": "classifier", "clean_set": False}
