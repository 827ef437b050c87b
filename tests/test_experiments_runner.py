"""The runner and executors on tiny grids: results, resume, purity, failures, a killed grid, Ray."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lsnpc
from lsnpc.experiments.config import parse_config
from lsnpc.experiments.experiment import run_experiment
from lsnpc.experiments.grid import expand_runs, group_runs
from lsnpc.experiments.runner import run_group, source_revision
from lsnpc.experiments.store import ResultsStore, load_results

TINY_LSNPC = {"epochs": 1, "batch_size": 64, "hidden_dim": 16, "latent_dim": 4, "label_embedding_dim": 8,
              "warm_start": False}


def tiny(seeds=(0, 1), processors=None, rates=(0.3,), max_train=150) -> dict:
    return {
        "name": "tiny",
        "seeds": list(seeds),
        "datasets": [{"name": "synthetic", "max_train": max_train, "max_test": 150}],
        "noise": [{"kind": "symmetric", "rate": r} for r in rates],
        "classifiers": [{"name": "mlp", "params": {"epochs": 2, "hidden_dims": [16]}}],
        "post_processors": processors or ["none", "knn", {"name": "lsnpc", "params": TINY_LSNPC}],
    }


def _mtimes(store: ResultsStore) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in store.runs_dir.glob("*.json")}


def test_grid_writes_one_complete_row_per_run_and_resumes(tmp_path: Path) -> None:
    config = parse_config(tiny())
    summary = run_experiment(config, tmp_path, threads=1)
    assert (summary.n_runs, summary.n_done, summary.n_skipped, summary.n_failed) == (6, 6, 0, 0)
    df = load_results(tmp_path)
    assert len(df) == 6 and set(df["run_id"]) == {r.run_id for r in expand_runs(config)}
    for metric in ("micro_f1", "macro_f1", "map", "lrap", "hamming_loss", "ranking_loss"):
        assert df[metric].between(0, 1).all(), metric
    for column in ("time_fit_s", "time_predict_s", "time_classifier_s", "time_data_s"):
        assert (df[column] >= 0).all()
    assert (df["lsnpc_version"] == "0.1.0").all()
    assert (df["lsnpc_revision"] == source_revision()).all()
    assert (df["n_train"] == 150).all() and (df["n_test"] == 150).all()
    lsnpc = df[df["processor"] == "lsnpc"]
    assert (lsnpc["selection"] == "noisy_elbo").all()  # unsupervised: the held-out ELBO, no label
    assert (df.loc[df["processor"] == "none", "selection"] == "n/a (base classifier output)").all()
    # labels as each processor's predict decides: LSNPC without any label at its threshold_ (a label count: from
    # count_floor, 0.05, up), the others at 0.5
    assert lsnpc["threshold"].between(0.05, 1.0).all() and (lsnpc["threshold"] != 0.5).any()
    assert (df.loc[df["processor"] != "lsnpc", "threshold"] == 0.5).all()
    rows = ResultsStore(tmp_path).rows()
    assert all("history" in r for r in rows if r["processor"] == "lsnpc")
    # the same seed gives the same base model: 'none' rows of one seed match what knn started from
    before = _mtimes(ResultsStore(tmp_path))
    again = run_experiment(config, tmp_path, threads=1)
    assert (again.n_skipped, again.n_done) == (6, 0)
    assert _mtimes(ResultsStore(tmp_path)) == before  # finished runs untouched


def test_subset_then_whole_grid_skips_the_finished_runs(tmp_path: Path) -> None:
    processors = ["none", "knn"]
    first = run_experiment(parse_config(tiny(seeds=[0], processors=processors)), tmp_path, threads=1)
    assert first.n_done == 2
    before = _mtimes(ResultsStore(tmp_path))
    whole = run_experiment(parse_config(tiny(seeds=[0, 1], processors=processors)), tmp_path, threads=1)
    assert (whole.n_skipped, whole.n_done) == (2, 2)
    after = _mtimes(ResultsStore(tmp_path))
    assert {k: after[k] for k in before} == before and len(after) == 4


def test_a_run_is_a_pure_function_of_its_spec() -> None:
    config = parse_config(tiny(seeds=[3], processors=["none", {"name": "lsnpc", "params": TINY_LSNPC}]))
    (task,) = group_runs(expand_runs(config))
    a = run_group(task, None, threads=1, raise_errors=True)
    b = run_group(task, None, threads=1, raise_errors=True)
    for ra, rb in zip(a.rows, b.rows, strict=True):
        assert ra["run_id"] == rb["run_id"]
        assert ra["micro_f1"] == rb["micro_f1"] and ra["lrap"] == rb["lrap"]
    other = parse_config(tiny(seeds=[4], processors=["none"]))
    c = run_group(group_runs(expand_runs(other))[0], None, threads=1)
    assert c.rows[0]["lrap"] != a.rows[0]["lrap"]  # another seed, another noise draw and model


def test_noisy_labels_option_hands_lsnpc_the_training_labels_the_classifier_saw() -> None:
    """``noisy_labels: true``: LSNPC's fit gets the noisy training labels, so they choose its epoch (the
    row records it); without the option the no-label ELBO chooses, as the paper's grids expect."""
    with_labels = {"name": "lsnpc", "label": "lsnpc-labels", "params": {**TINY_LSNPC, "noisy_labels": True}}
    config = parse_config(tiny(seeds=[0], processors=[{"name": "lsnpc", "params": TINY_LSNPC}, with_labels]))
    (task,) = group_runs(expand_runs(config))
    without, given = run_group(task, None, threads=1, raise_errors=True).rows
    assert without["selection"].startswith("noisy_elbo")
    assert given["selection"] == "noisy_f1"


def test_unlabelled_option_hands_the_val_rows_without_labels_and_moves_only_the_threshold() -> None:
    """``unlabelled: true``: fit gets the val0 and val1 rows' features and base probabilities, never their labels,
    and the label count is met on them; the same networks, so the ranking metrics do not move."""
    counted = {"name": "lsnpc", "label": "lsnpc-unlabelled", "params": {**TINY_LSNPC, "unlabelled": True}}
    base_counted = {"name": "count-threshold", "label": "count-unlabelled", "params": {"unlabelled": True}}
    config = parse_config(tiny(seeds=[0], processors=[{"name": "lsnpc", "params": TINY_LSNPC}, counted,
                                                      "count-threshold", base_counted]))
    (task,) = group_runs(expand_runs(config))
    plain, given, count, count_given = run_group(task, None, threads=1, raise_errors=True).rows
    assert (plain["unlabelled_used"], given["unlabelled_used"]) == (False, True)
    assert given["lrap"] == plain["lrap"] and given["threshold"] != plain["threshold"]
    assert count_given["unlabelled_used"] and count_given["lrap"] == count["lrap"]
    assert count_given["threshold"] != count["threshold"]


def test_a_failing_run_is_reported_not_written_and_retried(tmp_path: Path) -> None:
    processors = ["none", {"name": "knn", "params": {"n_neighbors": -1}}]
    summary = run_experiment(parse_config(tiny(seeds=[0], processors=processors)), tmp_path, threads=1)
    assert summary.n_done == 1 and summary.n_failed == 1
    (tb,) = summary.errors.values()
    assert "n_neighbors" in tb
    assert len(ResultsStore(tmp_path).finished_ids()) == 1
    retry = run_experiment(parse_config(tiny(seeds=[0], processors=processors)), tmp_path, threads=1)
    assert retry.n_skipped == 1 and retry.n_failed == 1  # the failed run is tried again


def test_interrupted_writes_are_cleaned_before_a_run(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.runs_dir.mkdir(parents=True)
    (store.runs_dir / ".abc.json.x1.tmp").write_text("{half")
    summary = run_experiment(parse_config(tiny(seeds=[0], processors=["none"])), tmp_path, threads=1)
    assert summary.partial_removed == 1 and store.partial_files() == []


@pytest.mark.slow
def test_killed_grid_loses_nothing_finished_and_resumes(tmp_path: Path) -> None:
    """Kill `lsnpc experiment run --jobs 2` (spawned workers included) mid-grid, then resume."""
    config = tiny(seeds=list(range(6)), processors=["none", "knn"])
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    results = tmp_path / "results"
    store = ResultsStore(results)
    cmd = [sys.executable, "-m", "lsnpc.cli", "experiment", "run", str(path), "--results", str(results),
           "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while len(store.finished_ids()) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = store.finished_ids()
    assert finished, "no run finished before the kill"
    for run_id in finished:  # every file present is complete JSON
        assert json.loads(store.path_for(run_id).read_text())["run_id"] == run_id
    before = {rid: store.path_for(rid).read_bytes() for rid in finished}

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(finished)} already finished" in done.stderr.replace("\n", " ")
    assert len(store.finished_ids()) == 12 and store.partial_files() == []
    assert {rid: store.path_for(rid).read_bytes() for rid in finished} == before


@pytest.mark.slow
def test_ray_executor_on_a_local_instance(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    # worker_niceness 0: Ray's default (nice 15) starves the workers on a busy 2-core machine
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _system_config={"worker_niceness": 0})
    try:
        seen = []
        summary = run_experiment(parse_config(tiny(seeds=[0, 1], processors=["none", "knn"])), tmp_path,
                                 jobs=2, executor="ray", threads=1, on_result=seen.append)
    finally:
        ray.shutdown()
    assert (summary.n_done, summary.n_failed) == (4, 0)
    assert len(seen) == 2 and len(ResultsStore(tmp_path).finished_ids()) == 4
    local = run_group(group_runs(expand_runs(parse_config(tiny(seeds=[0], processors=["none"]))))[0],
                      None, threads=1)
    ray_row = json.loads(ResultsStore(tmp_path).path_for(local.rows[0]["run_id"]).read_text())
    assert ray_row["micro_f1"] == local.rows[0]["micro_f1"]  # same result wherever it runs


def test_executor_argument_errors(tmp_path: Path) -> None:
    config = parse_config(tiny(seeds=[0], processors=["none"]))
    with pytest.raises(ValueError, match="executor must be one of"):
        run_experiment(config, tmp_path, executor="slurm")
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        run_experiment(config, tmp_path, jobs=0)


def test_prefetch_skips_feature_sets_and_swallows_missing_data(tmp_path: Path) -> None:
    from lsnpc.experiments.runner import prefetch_features

    raw = tiny(seeds=[0], processors=["none"])
    raw["datasets"].append({"name": "goemotions", "data_home": str(tmp_path / "empty")})
    tasks = group_runs(expand_runs(parse_config(raw)))
    prefetch_features(tasks, threads=1)  # synthetic: nothing to encode; goemotions: absent, left to the group
    result = run_group(tasks[1], None, threads=1)
    assert not result.rows and "not found" in next(iter(result.errors.values()))


def test_source_revision_names_the_checked_out_commit() -> None:
    """Run from this git checkout, results record its commit (a real git subprocess)."""
    package = Path(lsnpc.__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=False)
    if head.returncode != 0:
        pytest.skip("lsnpc is not running from a git checkout here (installed as a wheel)")
    revision = source_revision()
    assert revision is not None and revision.removesuffix("+dirty") == head.stdout.strip()


# ----------------------------------------------------------------------------- runs that must not be lost or doubled


def test_a_truncated_or_empty_run_file_is_redone(tmp_path: Path) -> None:
    config = parse_config(tiny(seeds=[0], processors=["none", "knn"]))
    run_experiment(config, tmp_path, threads=1)
    store = ResultsStore(tmp_path)
    first, second = sorted(store.finished_ids())
    good = store.path_for(first).read_text()
    store.path_for(first).write_text(good[: len(good) // 2])
    store.path_for(second).write_text("")
    summary = run_experiment(config, tmp_path, threads=1)
    assert (summary.n_skipped, summary.n_done) == (0, 2)
    redone, before = json.loads(store.path_for(first).read_text()), json.loads(good)
    assert redone["run_id"] == first and redone["micro_f1"] == before["micro_f1"]  # the same run, complete again
    assert store.unreadable_files() == []


_HOLD_CLAIM = """
import sys, time
from lsnpc.experiments.store import ResultsStore
assert ResultsStore(sys.argv[1]).claim(sys.argv[2])
print("held", flush=True)
time.sleep(120)
"""


def test_a_group_another_runner_holds_is_left_to_it_until_that_runner_is_gone(tmp_path: Path) -> None:
    config = parse_config(tiny(seeds=[0, 1], processors=["none", "knn"]))
    taken = group_runs(expand_runs(config))[0]
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_CLAIM, str(tmp_path), taken.key], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        summary = run_experiment(config, tmp_path, threads=1)
        assert (summary.n_done, summary.n_elsewhere) == (2, 2)
        assert ResultsStore(tmp_path).finished_ids().isdisjoint(r.run_id for r in taken.runs)
        assert len(ResultsStore(tmp_path).live_claims()) == 1  # this runner dropped its own claims
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    summary = run_experiment(config, tmp_path, threads=1)  # the holder died: its claim is stale
    assert (summary.n_done, summary.n_elsewhere, summary.n_skipped) == (2, 0, 2)
    assert ResultsStore(tmp_path).live_claims() == []


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_workers_end_with_their_killed_parent(tmp_path: Path) -> None:
    """`kill -9` of `lsnpc experiment run --jobs 2` alone (not its process group) leaves no orphan worker."""
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(tiny(seeds=list(range(8)), max_train=300)))
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "lsnpc.cli", "experiment", "run", str(path), "--results", str(results), "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not ResultsStore(results).live_claims() and time.time() < deadline:  # workers are running groups
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert len(workers) >= 2, "the workers did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 30
        while any(Path(f"/proc/{w}").exists() for w in workers) and time.time() < deadline:
            time.sleep(0.2)
        alive = [w for w in workers if Path(f"/proc/{w}").exists()
                 and Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        assert alive == [], "workers outlived their parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
