"""The full-size benchmark and its diagnosis (``benchmarks/bench_full_size.py``, ``benchmarks/diag_full_size.py``):
the converged base model, the two base models on the same rows, the tables against the bar, and the
diagnosis's measurements on inputs whose answer is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from bench_full_size import (
    ConvergedMLP,
    Forest,
    prepare,
    prepared_probs,
    print_tables,
    replay_guard,
    run_setting,
)
from diag_full_size import apply_ceiling, fit_ceiling, noise_vs_signal, scores

SMALL = "synthetic[n_labels=5,n_features=8,n_train=120,n_test=60]"


def test_converged_mlp_memorises_its_labels_and_keeps_constant_columns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 40)).astype(np.float32)
    labels = (rng.uniform(size=(120, 3)) < 0.4).astype(int)  # no rule to learn: only memorisation fits them
    labels = np.column_stack([labels, np.zeros(len(X), int)])  # a label never seen
    model = ConvergedMLP(random_state=0).fit(X, labels)
    P = model.predict_proba(X)
    assert P.shape == labels.shape and P.dtype == np.float32 and (P >= 0).all() and (P <= 1).all()
    assert np.array_equal(P[:, 3], np.zeros(len(X)))  # its training frequency
    assert ((P[:, :3] >= 0.5) == labels[:, :3]).mean() > 0.95  # trained to convergence, it memorised them
    assert np.array_equal(P, ConvergedMLP(random_state=0).fit(X, labels).predict_proba(X))


def test_both_base_models_see_the_same_rows_split_and_noise():
    a = prepare(SMALL, "full", "symmetric", 0.3, 0, "protocol", "", 0, None)
    b = prepare(SMALL, "full", "symmetric", 0.3, 0, "converged", "", 0, None)
    for key in ("X", "Y", "Xt", "Yt", "Y_noisy"):
        assert np.array_equal(a[key], b[key])
    assert all(np.array_equal(a["split"][k], b["split"][k]) for k in ("train", "val0", "val1"))
    assert isinstance(b["base"], ConvergedMLP) and hasattr(a["base"], "trunk_")
    with pytest.raises(ValueError, match="base_kind"):
        prepare(SMALL, "full", "symmetric", 0.3, 0, "other", "", 0, None)


def test_an_oof_base_scores_its_training_rows_out_of_fold_and_the_rest_as_the_plain_base():
    from lsnpc import cross_val_pred_probs

    plain = prepared_probs(SMALL, "full", "symmetric", 0.3, 0, "forest", "", 0, None, None)
    oof = prepared_probs(SMALL, "full", "symmetric", 0.3, 0, "forest-oof", "", 0, None, None)
    for key in ("Y_noisy", "P_v0", "P_v1", "P_te"):
        assert np.array_equal(plain[key], oof[key])
    X_tr = plain["X"][plain["tr"]]
    expected = cross_val_pred_probs(Forest(random_state=0), X_tr, plain["Y_noisy"], cv=5, random_state=0)
    assert np.array_equal(oof["P_tr"], expected)
    # the forest reproduces its own training rows' labels; copies that never saw a row do not
    def agree(P: np.ndarray) -> float:
        return float(((P >= 0.5) == plain["Y_noisy"]).mean())

    assert agree(plain["P_tr"]) > 0.99 > agree(oof["P_tr"])


def test_run_setting_scores_each_method_with_its_threshold():
    rows = run_setting(SMALL, "full", "pairflip", 0.3, 0, "converged", ("base-threshold", "lsnpc-noguard"), "", 0,
                       None, dict(epochs=2, student=False))
    assert [r["method"] for r in rows] == ["base", "base-threshold", "lsnpc-noguard"]
    assert all(r["base"] == "converged" and r["kind"] == "pairflip" and r["rate"] == 0.3 for r in rows)
    assert rows[0]["train_f1_noisy"] >= rows[0]["train_f1_true"] - 1.0  # recorded, both in [0, 1]
    assert 0.0 < rows[1]["threshold"] < 1.0 and rows[2]["base_weight"] == 0.0
    assert all(0 <= r["micro"] <= 1 and 0 <= r["macro"] <= 1 for r in rows)


def test_the_guard_can_be_replayed_from_the_rows_of_its_candidates():
    # a triple of 10 rows or more, so the guard tests on it; its numbers are recorded beside the lsnpc row
    data = "synthetic[n_labels=5,n_features=8,n_train=300,n_test=60]"
    rows = run_setting(data, "full", "symmetric", 0.3, 0, "converged",
                       ("base-threshold", "lsnpc", "lsnpc-noguard", "lsnpc-half"), "", 0, None,
                       dict(epochs=2, student=False))
    by = {r["method"]: r for r in rows}
    fit = by["lsnpc"]
    assert fit["blend"] == "validation test" and set(fit["guard_support"]) == {"0.0", "0.5"}
    assert set(fit["guard_scores"]) == {"0.0", "0.5", "1.0"}
    assert by["lsnpc-noguard"]["base_weight"] == 0.0 and by["lsnpc-half"]["base_weight"] == 0.5
    # the row of the weight the guard chose is the fit's own output at its own threshold
    kept = {0.0: "lsnpc-noguard", 0.5: "lsnpc-half", 1.0: "base-threshold"}[fit["base_weight"]]
    assert (by[kept]["micro"], by[kept]["macro"]) == pytest.approx((fit["micro"], fit["macro"]))


def _row(base, method, rate, micro, macro, dataset="d"):
    return dict(dataset=dataset, requested="full", kind="symmetric", rate=rate, seed=0, base=base, method=method,
                micro=micro, macro=macro)


def test_tables_measure_the_bar_against_the_tuned_threshold(capsys):
    rows = []
    for rate, (t_mi, t_ma), (n_mi, n_ma) in ((0.0, (0.60, 0.50), (0.585, 0.51)),
                                            (0.3, (0.50, 0.40), (0.53, 0.38)),
                                            (0.5, (0.40, 0.30), (0.41, 0.30))):
        rows += [_row("protocol", "base", rate, 0.1, 0.1), _row("protocol", "base-threshold", rate, t_mi, t_ma),
                 _row("protocol", "lsnpc-noguard", rate, n_mi, n_ma)]
    print_tables(rows)
    out = capsys.readouterr().out
    # 30–50%: micro (+3 + 1) / 2 = +2.00, macro (−2 + 0) / 2 = −1.00; worst −2.0; at 0%: −1.5 / +1.0; no mAP
    assert "| protocol | lsnpc-noguard | 3 | +2.00 | -1.00 | -2.0 | -1.5 / +1.0 | – |" in out
    assert "53.0 / 38.0 (+3.0 / -2.0)" in out


def test_the_guard_replay_picks_what_each_confidence_lets_through(capsys):
    # the output whole lost in 30% of the resamples and scores best; the ½ blend lost in 10%; both beat the base
    # (a 15-row triple; the fit chose the output whole, its own row scores what lsnpc-noguard's does)
    fit = dict(_row("forest", "lsnpc", 0.3, 0.52, 0.38), n_val=15, base_weight=0.0,
               guard_support={"0.0": 0.3, "0.5": 0.1}, guard_scores={"0.0": [0.6, 0.5], "0.5": [0.55, 0.45],
                                                                  "1.0": [0.5, 0.4]})
    rows = [fit, _row("forest", "base-threshold", 0.3, 0.50, 0.40), _row("forest", "lsnpc-half", 0.3, 0.53, 0.43)]
    replay_guard(rows, [0.4, 0.2, 0.05], [0, 20])
    out = capsys.readouterr().out
    assert "| forest | 0.4 | 0 | 1 | +2.00 | -2.00 | -2.0 | – | 0 |" in out  # the output whole passes and wins
    assert "| forest | 0.2 | 0 | 1 | +3.00 | +3.00 | +3.0 | – | 0 |" in out  # only the ½ blend passes
    assert "| forest | 0.05 | 0 | 1 | +0.00 | +0.00 | +0.0 | – | 1 |" in out  # neither: the base model
    assert "| forest | 0.4 | 20 | 1 | +0.00 | +0.00 | +0.0 | – | 1 |" in out  # too few rows to test: the base model


def test_the_command_resumes_from_its_results_file(tmp_path):
    out = tmp_path / "full.jsonl"
    command = [sys.executable, str(BENCHMARKS / "bench_full_size.py"), "--datasets", SMALL, "--noise",
               "symmetric:0.5", "--bases", "converged", "--methods", "base-threshold", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" in first.stdout and len(out.read_text().splitlines()) == 2  # the base model and the method
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "done" not in again.stdout and len(out.read_text().splitlines()) == 2
    assert json.loads(out.read_text().splitlines()[1])["method"] == "base-threshold"


def test_noise_vs_signal_sees_a_correction_that_lowers_only_the_added_positives():
    Y_true = np.array([[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 1]])
    Y_noisy = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]])  # added (0,1), (3,0); removed (2,0)
    P = np.where(Y_noisy == 1, 0.8, 0.2)
    Q = P.copy()
    Q[0, 1] = Q[3, 0] = 0.3  # the two added positives lowered
    Q[2, 0] = 0.6  # the removed one raised
    out = noise_vs_signal(Y_true, Y_noisy, P, Q)
    assert out["auc_pos_base"] == 0.5 and out["auc_pos_corr"] == 1.0
    assert out["auc_neg_base"] == 0.5 and out["auc_neg_corr"] == 1.0
    assert out["delta_added"] == pytest.approx(-0.5) and out["delta_removed"] == pytest.approx(0.4)
    assert out["delta_kept_pos"] == 0.0 and out["delta_kept_neg"] == 0.0


def test_ceiling_learns_a_swap_of_labels_a_threshold_cannot_undo():
    rng = np.random.default_rng(0)
    P = rng.uniform(0.01, 0.99, size=(400, 2)).astype(np.float32)
    Y = (rng.uniform(size=P.shape) < P[:, ::-1]).astype(int)  # each label follows the *other* probability
    W, b = fit_ceiling(np.log(P / (1 - P)), Y, penalty=1e-6, seed=0)
    assert W[1, 0] > W[0, 0] and W[0, 1] > W[1, 1]
    mapped = apply_ceiling(W, b, P)
    assert np.abs(mapped - P[:, ::-1]).mean() < np.abs(P - P[:, ::-1]).mean() / 2


def test_scores_tunes_on_validation_and_reports_ranking():
    rng = np.random.default_rng(1)
    Y = (rng.uniform(size=(300, 4)) < 0.3).astype(int)
    Q = np.where(Y == 1, rng.uniform(0.1, 0.15, size=Y.shape), rng.uniform(0, 0.09, size=Y.shape))  # all under 0.2
    out = scores(Y[:150], Q[:150], Y[150:], Q[150:])
    assert out["half_micro"] == 0.0 and out["map"] == pytest.approx(1.0)
    assert out["wide_micro"] == pytest.approx(1.0) and out["wide_t"] == pytest.approx(0.1)
    # the library's candidates come from the scores, so it finds what the wide grid finds
    assert out["tuned_micro"] == pytest.approx(out["wide_micro"], abs=0.01)


def test_diagnosis_summary_averages_the_noisy_settings_against_the_base_model(capsys):
    from diag_full_size import print_report

    def row(probe, rate, micro, macro):
        return dict(dataset="d", base="protocol", kind="symmetric", rate=rate, probe=probe, tuned_micro=micro,
                    tuned_macro=macro, wide_micro=micro, wide_macro=macro, map=0.5, mean_prob=0.1, sharpness=0.2)

    rows = [row("base", 0.0, 0.60, 0.50), row("corr", 0.0, 0.58, 0.49), row("base", 0.3, 0.50, 0.40),
            row("corr", 0.3, 0.53, 0.38), row("base", 0.5, 0.40, 0.30), row("corr", 0.5, 0.41, 0.30)]
    print_report(rows)
    # 30–50%: micro (+3 + 1) / 2 = +2.0, macro (−2 + 0) / 2 = −1.0; at 0%: −2.0 / −1.0
    assert "| d | protocol | corr | 2 | +2.0 / -1.0 | -2.0 / -1.0 |" in capsys.readouterr().out


def test_guard_probe_reports_the_blend_decision_and_the_three_blends(tmp_path):
    out = tmp_path / "diag.jsonl"
    command = [sys.executable, str(BENCHMARKS / "diag_full_size.py"), "--configs", f"{SMALL}@full", "--noise",
               "symmetric:0.3", "--bases", "converged", "--probes", "guard", "--set", "epochs=2", "--out", str(out)]
    subprocess.run(command, capture_output=True, text=True, check=True)
    rows = {r["probe"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"base", "guard", "guard-w0", "guard-w0.5", "guard-w1"}
    # this set's triple is under 20 rows, so the guard has no validation test here; its method is recorded
    assert rows["guard"]["blend_method"] in ("validation test", "collapse", "noisy-label test", "prior")
    assert 0.0 <= rows["guard"]["base_weight"] <= 1.0
    # w = 1 is the base model itself: the same tuned test scores
    assert rows["guard-w1"]["tuned_micro"] == pytest.approx(rows["base"]["tuned_micro"])
    assert all(0 <= rows[p]["val_tuned_micro"] <= 1 for p in ("guard-w0", "guard-w0.5", "guard-w1"))


def test_logit_map_command_scores_the_map_its_guard_and_the_shuffled_probe(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "map.jsonl"
    sized = SMALL.replace("n_train=120", "n_train=400")  # ≈ 20 clean rows: the map needs 2 a fold
    subprocess.run([sys.executable, str(BENCHMARKS / "bench_full_size.py"), "--datasets", sized, "--noise",
                    "pairflip:0.3", "--bases", "converged", "--methods", "base-threshold", "--base-cache", str(cache),
                    "--out", str(tmp_path / "base.jsonl")], capture_output=True, text=True, check=True)
    files = sorted(cache.glob("*.npz"))
    assert len(files) == 1
    command = [sys.executable, str(BENCHMARKS / "bench_logit_map.py"), *map(str, files), "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["method"] for r in rows] == ["base-threshold", "map", "readsp", "map+guard"]
    assert rows[3]["base_weight"] in (0.0, 0.5, 1.0)
    assert rows[2]["micro"] != rows[1]["micro"]  # the output moves with P
    assert "| all | map |" in first.stdout
    subprocess.run(command, capture_output=True, text=True, check=True)
    assert len(out.read_text().splitlines()) == 4  # resumed: nothing fitted twice
