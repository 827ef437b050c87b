"""Results store and reports: the tables hold the numbers in the store; plots are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsnpc.experiments.report import format_markdown, summary_table, write_report
from lsnpc.experiments.store import ResultsStore, load_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(run_id: str, processor: str, seed: int, rate: float, micro: float, macro: float, **extra) -> dict:
    return {
        "run_id": run_id, "experiment": "t", "dataset": "scene", "noise_kind": "symmetric",
        "noise_rate": rate, "classifier": "mlp", "processor": processor,
        "processor_name": processor.split("[")[0], "processor_params": json.dumps(extra.pop("params", {})),
        "seed": seed, "micro_f1": micro, "macro_f1": macro, "selection": f"sel-{processor}",
        "lsnpc_version": "0.1.0", "lsnpc_revision": "abc123def456", **extra,
    }


@pytest.fixture
def store(tmp_path: Path) -> ResultsStore:
    s = ResultsStore(tmp_path / "results")
    rows = [
        # base model: micro 0.50 / 0.60 -> mean 55.0, std 7.1
        _row("b0", "none", 0, 0.3, 0.50, 0.40),
        _row("b1", "none", 1, 0.3, 0.60, 0.40),
        # LSNPC: micro 0.70 / 0.80 -> mean 75.0, delta +20.0
        _row("l0", "lsnpc", 0, 0.3, 0.70, 0.45, history=[{"epoch": 1, "loss": 2.0}, {"epoch": 2, "loss": 1.0}]),
        _row("l1", "lsnpc", 1, 0.3, 0.80, 0.45, history=[{"epoch": 1, "loss": 2.5}, {"epoch": 2, "loss": 1.5}]),
        # KNN: worse
        _row("k0", "knn", 0, 0.3, 0.30, 0.10),
        _row("k1", "knn", 1, 0.3, 0.30, 0.10),
        # a clean setting so the F1-vs-noise plot has two points
        _row("c0", "none", 0, 0.0, 0.90, 0.85),
        _row("c1", "lsnpc", 0, 0.0, 0.88, 0.80),
    ]
    # a (nu0, nu) sweep for the heat map
    for i, (nu0, nu) in enumerate([(2.01, 2.01), (2.01, "learned"), (3, 2.01), (3, "learned")]):
        rows.append(_row(f"s{i}", f"lsnpc-paper[nu0={nu0},nu={nu}]", 0, 0.3, 0.5 + i / 100, 0.4,
                         params={"nu0": nu0, "nu": nu}))
    for r in rows:
        s.write(r)
    return s


def test_store_roundtrip_and_partial_files(store: ResultsStore) -> None:
    assert store.has("b0") and not store.has("zz")
    assert len(store.finished_ids()) == 12
    (store.runs_dir / ".b9.json.abc.tmp").write_text("{half")  # an interrupted write
    assert len(store.partial_files()) == 1
    df = load_results(store.root)
    assert len(df) == 12 and "history" not in df.columns  # temp file ignored, history dropped
    assert "history" in load_results(store.root, with_history=True).columns
    assert store.remove_partial() == 1 and store.partial_files() == []


def test_store_writes_numpy_values_as_plain_json(tmp_path: Path) -> None:
    import numpy as np

    s = ResultsStore(tmp_path)
    s.write({"run_id": "x", "a": np.float64(0.5), "b": np.arange(3), "c": float("nan")})
    row = json.loads(s.path_for("x").read_text())
    assert row == {"run_id": "x", "a": 0.5, "b": [0, 1, 2], "c": None}
    assert [p.name for p in s.runs_dir.iterdir()] == ["x.json"]  # no temp file left


def test_summary_table_means_std_and_delta(store: ResultsStore) -> None:
    summary = summary_table(load_results(store.root))
    lsnpc = summary[(summary.processor == "lsnpc") & (summary.metric == "micro_f1") & (summary.noise_rate == 0.3)]
    assert lsnpc["mean"].item() == pytest.approx(0.75)
    assert lsnpc["std"].item() == pytest.approx(0.0707107, rel=1e-4)
    assert lsnpc["delta"].item() == pytest.approx(0.20)
    assert lsnpc["n"].item() == 2


def test_markdown_table_holds_the_store_numbers_with_best_in_bold(store: ResultsStore) -> None:
    md = format_markdown(summary_table(load_results(store.root)))
    assert "scene symmetric micro-F1" in md
    assert "55.0 ± 7.1" in md  # base, no delta
    assert "**75.0 ± 7.1 (+20.0)**" in md  # best of its block, bold, change against base
    assert "30.0 ± 0.0 (-25.0)" in md and "**30.0" not in md  # KNN not bold


def test_write_report_files(store: ResultsStore, tmp_path: Path) -> None:
    out = write_report(store.root, tmp_path / "rep")
    md = out["markdown"].read_text()
    html = out["html"].read_text()
    assert "75.0 ± 7.1 (+20.0)" in md and "<b>75.0 ± 7.1 (+20.0)</b>" in html
    assert "lsnpc: sel-lsnpc" in md  # which labels chose each checkpoint
    assert "lsnpc version: 0.1.0 (source abc123def456)" in md
    names = sorted(p.name for p in out["plots"])
    assert any(n.startswith("f1_vs_noise_scene_symmetric_mlp") for n in names)
    assert any(n.startswith("figure4_sensitivity_scene_symmetric_0.3_mlp") for n in names)
    assert any(n.startswith("history_scene_mlp_lsnpc") for n in names)
    for p in out["plots"]:
        assert p.read_bytes()[:8] == PNG_MAGIC
        assert f"({p.name})" in md and p.name in html
    assert out["csv"].read_text().startswith("classifier,")


def test_report_errors(tmp_path: Path, store: ResultsStore) -> None:
    with pytest.raises(FileNotFoundError, match="no results found"):
        write_report(tmp_path / "nothing")
    with pytest.raises(ValueError, match="not in the results"):
        summary_table(load_results(store.root), metrics=("f2",))


def test_truncated_or_empty_run_files_count_as_unfinished_and_are_named(store: ResultsStore, tmp_path: Path) -> None:
    store.path_for("k1").write_text(store.path_for("k1").read_text()[:40])  # truncated
    store.path_for("c1").write_text("")  # empty
    assert not store.has("k1") and not store.has("c1") and store.has("k0")
    assert {"k1", "c1"}.isdisjoint(store.finished_ids()) and len(store.finished_ids()) == 10
    assert [p.stem for p in store.unreadable_files()] == ["c1", "k1"]
    paths = write_report(store.root, tmp_path / "rep", plots=False)
    assert [p.name for p in paths["unreadable"]] == ["c1.json", "k1.json"]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Left out" in md and "`c1.json`" in md and "`k1.json`" in md


def test_report_says_where_a_post_processor_returned_the_base_model(tmp_path: Path) -> None:
    s = ResultsStore(tmp_path / "results")
    for seed in (0, 1):
        s.write(_row(f"b{seed}", "none", seed, 0.3, 0.5, 0.4, n_labels=6))
        s.write(_row(f"k{seed}", "knn", seed, 0.3, 0.5, 0.4, n_labels=6, n_fallback_labels=6))  # all labels
        s.write(_row(f"l{seed}", "lsnpc", seed, 0.3, 0.6 + seed / 10, 0.4, n_labels=6))
    write_report(s.root, tmp_path / "rep", plots=False)
    md = (tmp_path / "rep" / "report.md").read_text()
    section = md.split("## Where a post-processor returned the base model", 1)[1].split("##", 1)[0]
    assert ("knn: answered some labels with the base model's own probabilities (no confidently positive or no "
            "confidently negative training row for them) in 2 of 2 runs (scene: 2 of 2 runs, 6 of its 6 labels a "
            "run)") in section
    assert "scored exactly as the base model in 2 of 2 runs" in section
    assert "lsnpc" not in section


def test_history_series_keep_the_real_epoch_numbers() -> None:
    from lsnpc.experiments.plots import history_series

    lsnpc_history = [  # LSNPC's: a warm start (epoch 0) without the training losses, then epochs 1, 2
        {"epoch": 0, "phase": "warm_start", "warm_start_loss": 0.7, "val_micro_f1": 0.4},
        {"epoch": 1, "phase": "train", "loss": 3.0, "val_micro_f1": 0.5},
        {"epoch": 2, "phase": "train", "loss": 2.0, "val_micro_f1": 0.6},
    ]
    series = history_series(lsnpc_history)
    assert series["loss"] == ([1.0, 2.0], [3.0, 2.0])
    assert series["val_micro_f1"] == ([0.0, 1.0, 2.0], [0.4, 0.5, 0.6])
    assert "phase" not in series and "epoch" not in series
    assert history_series({"train_loss": [0.9, 0.8, 0.7]})["train_loss"] == ([1.0, 2.0, 3.0], [0.9, 0.8, 0.7])


def test_sweep_rows_sort_by_value_so_nu0_10_comes_after_2_01(tmp_path: Path) -> None:
    from lsnpc.experiments.report import _processor_order

    labels = ["lsnpc[nu0=10,nu=3]", "lsnpc[nu0=2.01,nu=learned]", "lsnpc[nu0=2.01,nu=3]", "none", "myext:X"]
    assert _processor_order(labels) == ["none", "lsnpc[nu0=2.01,nu=3]", "lsnpc[nu0=2.01,nu=learned]",
                                        "lsnpc[nu0=10,nu=3]", "myext:X"]


def test_every_training_curve_is_drawn_and_npc_runs_give_figure_2(tmp_path: Path) -> None:
    s = ResultsStore(tmp_path / "results")
    npc_history = [{"epoch": e, "loss": 1 / e, "val_loss": 50 + e % 3, "val_clean_loss": 5.0, "val_micro_f1": 0.5}
                   for e in range(1, 6)]
    for i in range(15):  # more processors than the old cap of 12 figures
        s.write(_row(f"l{i}", f"lsnpc[nu0={i}]", 0, 0.3, 0.6, 0.4, history=[{"epoch": 1, "loss": 1.0}]))
    s.write(_row("b", "none", 0, 0.3, 0.5, 0.4))
    s.write(_row("n", "npc", 0, 0.3, 0.5, 0.4, history=npc_history))
    out = write_report(s.root, tmp_path / "rep")
    names = [p.name for p in out["plots"]]
    assert sum(n.startswith("history_") for n in names) == 16
    assert "figure2_scene_symmetric_0.3_mlp_npc.png" in names
    # one noise rate: the F1 plot is still drawn (a column of points, the legend beside the axes)
    assert "f1_vs_noise_scene_symmetric_mlp.png" in names


def test_semi_supervised_runs_give_figure_3(tmp_path: Path) -> None:
    s = ResultsStore(tmp_path / "results")
    for seed in (0, 1):
        for rate in (0.3, 0.5):
            s.write(_row(f"b{seed}{rate}", "none", seed, rate, 0.5, 0.4, clean_set_used=False))
            s.write(_row(f"u{seed}{rate}", "lsnpc", seed, rate, 0.6, 0.5, clean_set_used=False))
            s.write(_row(f"s{seed}{rate}", "lsnpc-semi", seed, rate, 0.65, 0.55, clean_set_used=True))
    names = [p.name for p in write_report(s.root, tmp_path / "rep")["plots"]]
    assert "figure3_scene_symmetric.png" in names
    s2 = ResultsStore(tmp_path / "unsupervised")  # no run saw the clean set: no figure 3
    s2.write(_row("b", "none", 0, 0.3, 0.5, 0.4, clean_set_used=False))
    assert not [p for p in write_report(s2.root, tmp_path / "rep2")["plots"] if p.name.startswith("figure3")]
