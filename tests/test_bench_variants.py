"""The benchmarks' data-set variants (``bench_quality.parse_variant`` / ``load_arrays``): a generated
problem with other options, or a real set cut to its most frequent labels."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from bench_quality import load_arrays, parse_variant  # noqa: E402

from lsnpc.data import load_dataset  # noqa: E402


def test_parse_variant_reads_names_and_numbers():
    assert parse_variant("scene") == ("scene", {})
    assert parse_variant("bibtex[top=45]") == ("bibtex", {"top": 45})
    name, options = parse_variant("synthetic[n_labels=19,max_frequency=0.15]")
    assert name == "synthetic" and options == {"n_labels": 19, "max_frequency": 0.15}
    assert isinstance(options["n_labels"], int)


@pytest.mark.parametrize("spec, words", [
    ("bibtex[x=1]", "only top=K"),
    ("bibtex[top=0]", "positive integer"),
    ("bibtex[top=2.5]", "positive integer"),
    ("synthetic[n_labels=many]", "not key=number"),
    ("synthetic[n_labels]", "not key=number"),
    ("two words", "expected NAME"),
])
def test_parse_variant_names_what_is_wrong(spec, words):
    with pytest.raises(ValueError, match=words):
        parse_variant(spec)


def test_generated_variant_has_the_options_shape():
    X, Y, Xt, Yt = load_arrays("synthetic[n_labels=7,n_features=10,n_train=50,n_test=20]", "", 0, None)
    assert X.shape == (50, 10) and Y.shape == (50, 7) and Xt.shape == (20, 10) and Yt.shape == (20, 7)
    again = load_arrays("synthetic[n_labels=7,n_features=10,n_train=50,n_test=20]", "", 0, None)
    assert all(np.array_equal(a, b) for a, b in zip((X, Y, Xt, Yt), again, strict=True))


def test_top_keeps_the_most_frequent_training_labels(shared_data):
    train = load_dataset("scene", "train", data_home=shared_data)
    test = load_dataset("scene", "test", data_home=shared_data)
    X, Y, Xt, Yt = load_arrays("scene[top=2]", str(shared_data), 0, None)
    counts = np.asarray(train.Y).sum(0)
    keep = sorted(np.argsort(-counts, kind="stable")[:2])
    assert np.array_equal(Y, np.asarray(train.Y)[:, keep]) and np.array_equal(Yt, np.asarray(test.Y)[:, keep])
    assert np.array_equal(X, np.asarray(train.X, dtype=np.float32)) and Xt.shape[0] == len(test.Y)
    assert Y.sum(0).min() >= np.delete(counts, keep).max()


def test_label_issue_retraining_averages_over_mlp_seeds():
    """bench_label_issues.retrain: one repeat is the setting's seed alone (the older tables); more repeats
    average the seeds seed, seed + 1000, ... (a real MLP on a small generated problem)."""
    from bench_label_issues import retrain

    X, Y, Xt, Yt = load_arrays("synthetic[n_labels=5,n_features=12,n_train=120,n_test=60]", "", 0, None)
    alone = retrain(X, Y, Xt, Yt, 3)
    second = retrain(X, Y, Xt, Yt, 1003)
    assert retrain(X, Y, Xt, Yt, 3, 1) == alone
    averaged = retrain(X, Y, Xt, Yt, 3, 2)
    assert averaged == pytest.approx(tuple((a + b) / 2 for a, b in zip(alone, second, strict=True)))
    assert all(0.0 <= v <= 100.0 for v in averaged)


def test_clean_label_reference_is_the_base_model_where_nothing_was_flipped():
    """bench_quality's ``base-clean`` row: the base MLP on the true training labels. At 0% noise the
    noisy labels are the true ones, so it must equal the base row; with noise it is another model."""
    import torch
    from bench_quality import run_setting

    spec = "synthetic[n_labels=5,n_features=12,n_train=160,n_test=60]"
    threads = torch.get_num_threads()
    try:  # run_setting sets one thread, as for its worker processes; the test process gets its own back
        rows = {r["method"]: r for r in run_setting(spec, "full", "symmetric", 0.0, 0, ("base-clean",), "", 0, None)}
        noisy = {r["method"]: r for r in run_setting(spec, "full", "pairflip", 0.5, 0, ("base-clean",), "", 0, None)}
    finally:
        torch.set_num_threads(threads)
    assert set(rows) == {"base", "base-clean"}
    assert (rows["base-clean"]["micro"], rows["base-clean"]["macro"]) == (rows["base"]["micro"], rows["base"]["macro"])
    assert noisy["base-clean"]["micro"] == rows["base-clean"]["micro"]  # the true labels do not depend on the noise
    assert noisy["base"]["micro"] != rows["base"]["micro"]


def test_the_base_row_keeps_the_base_models_sharpness_and_no_flat_warning_escapes():
    """bench_quality's base row records ``base_sharpness`` of the base model on the training rows (the same
    setting built again gives the same model), and the flat-base warning of ``LSNPC.fit`` is silenced inside a
    setting only: the caller's warning filters are as they were."""
    import warnings

    import torch
    from bench_quality import prepare_setting, run_setting

    from lsnpc.corrector.blend import base_sharpness

    spec = "synthetic[n_labels=5,n_features=12,n_train=160,n_test=60]"
    threads = torch.get_num_threads()
    filters = list(warnings.filters)
    try:
        rows = {r["method"]: r for r in run_setting(spec, "full", "symmetric", 0.3, 0, ("lsnpc-noval",), "", 0, None)}
        s = prepare_setting(spec, "full", "symmetric", 0.3, 0, "", 0, None)
    finally:
        torch.set_num_threads(threads)
    assert warnings.filters == filters
    expected = base_sharpness(s["base"].predict_proba(s["X"][s["split"]["train"]]))
    assert rows["base"]["base_sharpness"] == pytest.approx(expected, abs=1e-12)
    assert 0.0 < expected < 1.0


def test_label_issue_tables_say_how_many_mlp_seeds_each_retraining_averages(capsys):
    """bench_label_issues.print_tables names the retraining's MLP seeds; CSVs from before the option (no
    column) were one seed."""
    import pandas as pd
    from bench_label_issues import print_tables

    columns = [f"{m}_{k}" for m in ("lsnpc", "cleanlab") for k in ("auroc", "ap", "precision", "recall")]
    columns += [f"{m}_{k}" for m in ("noisy", "kept", "relabelled", "true") for k in ("micro", "macro")]
    row = dict(dataset="scene", kind="symmetric", rate=0.3, seed=0, **{c: 50.0 for c in columns})
    print_tables(pd.DataFrame([dict(row, retrain_seeds=3)]), ["scene"])
    assert "mean over 3 MLP seed(s)" in capsys.readouterr().out
    print_tables(pd.DataFrame([row]), ["scene"])
    assert "mean over 1 MLP seed(s)" in capsys.readouterr().out


def _small_fits(methods: tuple[str, ...], n_train: int = 160) -> dict[str, dict]:
    """bench_quality's rows for ``methods`` on a 5-label generated problem of ``n_train`` rows (160: 8 validation
    rows), 30% symmetric noise, seed 0, keyed by method (torch's thread count restored after)."""
    import torch
    from bench_quality import run_setting

    spec = f"synthetic[n_labels=5,n_features=12,n_train={n_train},n_test=60]"
    threads = torch.get_num_threads()
    try:
        return {r["method"]: r for r in run_setting(spec, "full", "symmetric", 0.3, 0, methods, "", 0, None)}
    finally:
        torch.set_num_threads(threads)


def test_bench_quality_labels_method_below_twenty_validation_rows_trains_on_the_triple():
    """``lsnpc-labels`` hands LSNPC val0 and the noisy labels; 160 rows give 8 validation rows, too few to test
    the output, so the triple is trained on as a clean set and the noisy labels choose the epoch, test the output
    and set the threshold, as in ``lsnpc-labels-noval``: the same schedule, another fit (the clean passes)."""
    rows = _small_fits(("lsnpc-labels", "lsnpc-labels-noval"))
    both, alone = rows["lsnpc-labels"], rows["lsnpc-labels-noval"]
    assert both["selection"] == alone["selection"] == "noisy_f1"
    assert both["epochs"] == alone["epochs"] and both["val_rows"] == 8 and alone["val_rows"] == 0
    assert (both["micro"], both["macro"]) != (alone["micro"], alone["macro"])


def test_bench_quality_trunk_labels_method_is_the_trunk_fit_given_the_noisy_labels():
    """``lsnpc-trunk-labels-noval`` is ``LSNPC(encoder=base.trunk_)`` given the noisy training labels: they
    choose the epoch on the schedule a labelled fit runs (``lsnpc-labels-noval``'s epochs, not the shorter
    schedule of ``lsnpc-trunk-noval``, which has no label), and the trunk makes it another fit than the one
    with LSNPC's own encoder."""
    rows = _small_fits(("lsnpc-trunk-labels-noval", "lsnpc-labels-noval", "lsnpc-trunk-noval"))
    trunk, own, unlabelled = rows["lsnpc-trunk-labels-noval"], rows["lsnpc-labels-noval"], rows["lsnpc-trunk-noval"]
    assert trunk["epochs"] == own["epochs"] != unlabelled["epochs"]
    assert (trunk["micro"], trunk["macro"]) != (own["micro"], own["macro"])


def test_bench_quality_scores_lsnpc_at_its_decision_threshold_and_the_base_model_at_its_own():
    """An LSNPC row is scored as ``predict`` decides, at ``threshold_``, with its scores at 0.5 beside;
    ``base-threshold`` scores the base model's own probabilities at ``lsnpc.tune_threshold``'s choice on val0
    (160 rows: 8 validation rows; 420 rows: 21)."""
    from bench_quality import prepare_setting

    from lsnpc import tune_threshold
    from lsnpc.metrics import micro_f1

    rows = _small_fits(("lsnpc-noval", "lsnpc", "base-threshold"))
    for method in ("lsnpc-noval", "lsnpc"):
        row = rows[method]
        assert 0.0 < row["threshold"] < 1.0
        if row["threshold"] == 0.5:
            assert (row["micro"], row["macro"]) == (row["micro_at_half"], row["macro_at_half"])
    small = prepare_setting("synthetic[n_labels=5,n_features=12,n_train=160,n_test=60]", "full", "symmetric", 0.3,
                            0, "", 0, None)
    v0 = small["split"]["val0"]
    assert len(v0) == 8
    assert rows["base-threshold"]["threshold"] == tune_threshold(
        small["Y"][v0], small["base"].predict_proba(small["X"][v0])).threshold
    larger = _small_fits(("base-threshold",), n_train=420)["base-threshold"]
    s = prepare_setting("synthetic[n_labels=5,n_features=12,n_train=420,n_test=60]", "full", "symmetric", 0.3, 0,
                        "", 0, None)
    v0 = s["split"]["val0"]
    chosen = tune_threshold(s["Y"][v0], s["base"].predict_proba(s["X"][v0])).threshold
    assert larger["threshold"] == chosen
    assert larger["micro"] == pytest.approx(micro_f1(s["Yt"], s["base"].predict_proba(s["Xt"]), chosen))


def test_bench_quality_set_passes_parameters_to_every_lsnpc():
    """``--set KEY=VALUE`` reaches the correctors: a given threshold is the one each row is scored at."""
    from bench_quality import parse_param

    assert parse_param("threshold=0.4") == ("threshold", 0.4) and parse_param("guard=false") == ("guard", False)
    assert parse_param("min_val_rows=30") == ("min_val_rows", 30) and parse_param("selection=x") == ("selection", "x")
    assert parse_param("blend_candidates=0,0.5") == ("blend_candidates", (0, 0.5))
    with pytest.raises(ValueError, match="--set expects KEY=VALUE"):
        parse_param("threshold")
    from bench_quality import run_setting

    spec = "synthetic[n_labels=5,n_features=12,n_train=160,n_test=60]"
    rows = run_setting(spec, "full", "symmetric", 0.3, 0, ("lsnpc-noval",), "", 0, None, {"threshold": 0.45})
    assert rows[-1]["threshold"] == 0.45


def test_grid_bar_terms_from_a_results_directory(tmp_path):
    """``grid_bar.py`` reads a results directory and gives, per post-processor, the mean Δ over the noisy
    settings and the worst setting there and at 0%, each Δ the mean over seeds against the base model's
    mean (F1 points); its command line prints them, and a directory without base runs is an error naming it."""
    import subprocess

    from grid_bar import bar_terms

    from lsnpc.experiments.store import ResultsStore, load_results

    store = ResultsStore(tmp_path / "results")
    values = {  # (dataset, kind, rate): {processor: [(micro, macro) per seed]}
        ("scene", "symmetric", 0.3): {"none": [(0.50, 0.40), (0.60, 0.40)], "lsnpc": [(0.70, 0.45), (0.80, 0.45)]},
        ("scene", "pairflip", 0.5): {"none": [(0.40, 0.30), (0.40, 0.30)], "lsnpc": [(0.41, 0.28), (0.41, 0.29)]},
        ("yeast", "symmetric", 0.0): {"none": [(0.60, 0.35), (0.62, 0.35)], "lsnpc": [(0.60, 0.34), (0.61, 0.34)]},
    }
    for (dataset, kind, rate), by_processor in values.items():
        for processor, seeds in by_processor.items():
            for seed, (micro, macro) in enumerate(seeds):
                store.write({"run_id": f"{dataset}-{kind}-{rate}-{processor}-{seed}", "experiment": "t",
                             "dataset": dataset, "noise_kind": kind, "noise_rate": rate, "classifier": "mlp",
                             "processor": processor, "seed": seed, "micro_f1": micro, "macro_f1": macro})
    terms = bar_terms(load_results(tmp_path / "results")).set_index("processor")
    row = terms.loc["lsnpc"]
    assert row.settings == 3 and row.seeds == 2
    # noisy: scene sym 30% Δ (+20, +5), scene pair 50% Δ (+1, -1.5); at 0% yeast Δ (-0.5, -1)
    assert row.mean_micro == pytest.approx((20 + 1) / 2) and row.mean_macro == pytest.approx((5 - 1.5) / 2)
    assert row.worst == pytest.approx(-1.5) and row.worst_setting == "scene pairflip 50%"
    assert row.worst_clean == pytest.approx(-1.0) and row.worst_clean_setting == "yeast symmetric 0%"
    assert "none" not in terms.index
    script = BENCHMARKS / "grid_bar.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "results")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    line = "| mlp | lsnpc | 3 | 2 | +10.50 | +1.75 | -1.50 (scene pairflip 50%) | -1.00 (yeast symmetric 0%) |"
    assert line in done.stdout
    with pytest.raises(ValueError, match="'base'"):
        bar_terms(load_results(tmp_path / "results"), base="base")


def test_noise_signal_statistics_and_summary():
    """bench_noise_signal: the statistics of a base model's probabilities against its noisy labels and of an
    output against them (values worked by hand), and the summary that says whether one threshold separates 0%
    noise from 30–50% (for ``flip`` the 0% extreme is the lowest)."""
    from bench_noise_signal import correction_signal, noise_signal, summarise

    P = np.array([[0.9, 0.2], [0.6, 0.1], [0.1, 0.7], [0.3, 0.4]])
    Y = np.array([[1, 0], [1, 1], [0, 1], [1, 0]])
    stats = noise_signal(P, Y)
    # decisions (0.9, 0.6, 0.7) hit 3 of the 5 noisy positives; 3 decisions over 4 rows, expected Σp = 3.3 / 4
    assert stats["recall"] == pytest.approx(3 / 5) and stats["ratio"] == pytest.approx(0.75 / (3.3 / 4))
    assert stats["density"] == pytest.approx(P.mean())
    m = P.mean(0)
    assert stats["sharpness"] == pytest.approx(P.var(0).sum() / (m * (1 - m)).sum())
    output = np.array([[0.8, 0.6], [0.2, 0.1], [0.3, 0.9], [0.4, 0.4]])
    # the output drops (1, 0) and adds (0, 1): 2 changed decisions over the base model's 3 positives
    change = correction_signal(output, P)
    assert change["flip"] == pytest.approx(2 / 3)
    assert change["sharp_out"] == pytest.approx(
        (output.var(0).sum() / (output.mean(0) * (1 - output.mean(0))).sum()) / stats["sharpness"])
    row = dict(stats, **change, dataset="d", size="300", kind="symmetric", seed=0)
    rows = [dict(row, rate=0.0, sharpness=0.6, flip=0.5), dict(row, rate=0.3, sharpness=0.4, flip=1.0),
            dict(row, dataset="e", rate=0.0, sharpness=0.3, flip=0.8), dict(row, dataset="e", rate=0.5, sharpness=0.1,
                                                                            flip=1.2)]
    lines = summarise(rows)
    assert "| d | 300 | 0% | 0.600 |" in "\n".join(lines)
    assert "| sharpness | 2 of 2 | 0.300–0.600 | 0.100–0.400 | does not separate |" in lines
    assert "| flip | 2 of 2 | 0.500–0.800 | 1.000–1.200 | separates |" in lines


def test_bench_quality_oof_methods_fit_on_out_of_fold_probabilities():
    """``lsnpc-oof``: each training row's probabilities come from a base MLP trained the same way (same seed,
    checkpoint on clean val0) on the other four folds, so they differ from the base model's in-sample ones;
    the rows record the time those five base fits took apart from the corrector's."""
    import torch
    from bench_quality import out_of_fold_probs, prepare_setting

    from lsnpc import MLPClassifier
    from lsnpc.model_selection import multilabel_folds

    threads = torch.get_num_threads()
    try:
        s = prepare_setting("synthetic[n_labels=5,n_features=12,n_train=160,n_test=60]", "full", "symmetric", 0.3,
                            0, "", 0, None)
        P_oof = out_of_fold_probs(s, 0)
        tr, v0 = s["split"]["train"], s["split"]["val0"]
        fit_rows, held = multilabel_folds(s["Y_noisy"], 5, 0)[0]
        fold = MLPClassifier(random_state=0, n_threads=1).fit(s["X"][tr][fit_rows], s["Y_noisy"][fit_rows],
                                                              X_val=s["X"][v0], y_val=s["Y"][v0])
    finally:
        torch.set_num_threads(threads)
    assert P_oof.shape == s["Y_noisy"].shape and np.isfinite(P_oof).all()
    np.testing.assert_allclose(P_oof[held], fold.predict_proba(s["X"][tr][held]), rtol=0, atol=1e-6)
    assert np.abs(P_oof - s["base"].predict_proba(s["X"][tr])).max() > 0.05
    rows = _small_fits(("lsnpc-noval", "lsnpc-oof-noval"))
    plain, oof = rows["lsnpc-noval"], rows["lsnpc-oof-noval"]
    assert oof["oof_seconds"] > 0 and "oof_seconds" not in plain
    assert (oof["micro"], oof["macro"]) != (plain["micro"], plain["macro"])


def test_bench_quality_runs_a_pool_of_configurations_each_at_its_own_size(tmp_path):
    """``--configs DATASET@SIZE ...`` runs each data set at its own size in one command (a real subprocess on a
    small generated problem); the summary against the bar is the pool's, and ``--report`` with ``--configs``
    reads back only the configurations asked for."""
    import json
    import subprocess

    script = BENCHMARKS / "bench_quality.py"
    spec = "synthetic[n_labels=4,n_features=8,n_train=160,n_test=60]"
    out = tmp_path / "pool.jsonl"
    common = ["--noise", "symmetric:0.3", "--seeds", "0", "--methods", "base-threshold", "--jobs", "1"]
    done = subprocess.run([sys.executable, str(script), "--configs", f"{spec}@100", f"{spec}@140", *common,
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["requested"], r["size"], r["method"]) for r in rows) == [
        ("100", 100, "base"), ("100", 100, "base-threshold"), ("140", 140, "base"), ("140", 140, "base-threshold")]
    assert "| base-threshold | 2 |" in done.stdout  # one summary over both configurations

    report = subprocess.run([sys.executable, str(script), "--report", "--out", str(out), "--configs", f"{spec}@100"],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    assert "| base-threshold | 1 |" in report.stdout and f"| {spec} | 140 |" not in report.stdout
    nothing = subprocess.run([sys.executable, str(script), "--report", "--out", str(out), "--configs", f"{spec}@120"],
                             capture_output=True, text=True, timeout=300)
    assert nothing.returncode == 0 and "No results of these data sets, sizes and methods" in nothing.stdout


@pytest.mark.parametrize("args, words", [
    (["--configs", "scene"], "--configs expects DATASET@SIZE"),
    (["--configs", "scene@many"], "--configs expects DATASET@SIZE"),
    (["--configs", "scene@640", "--train-sizes", "500"], "instead of --datasets and --train-sizes"),
    ([], "pass them with --out"),
    (["--out", "missing.jsonl"], "no such results file to report on: missing.jsonl"),
])
def test_bench_quality_report_and_configs_name_what_is_wrong(args, words, tmp_path):
    import subprocess

    script = BENCHMARKS / "bench_quality.py"
    done = subprocess.run([sys.executable, str(script), *args, "--report"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and words in done.stderr, done.stderr


