"""A researcher's own data set, noise process, base model and post-processor in one grid, through the CLI alone.

Everything lives in a temporary folder (an ARFF file, a Python module, a YAML grid); lsnpc is run as a real
subprocess from there and no file of the library is touched.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}

USER_MODULE = '''
"""A researcher's extensions: a noise process, a base model and a post-processor."""
import numpy as np
from sklearn.linear_model import Ridge


def drop_positives(Y, rate, random_state):
    """Missing labels: each positive is dropped with probability rate."""
    rng = np.random.default_rng(random_state)
    return np.where((Y == 1) & (rng.random(Y.shape) < rate), 0, Y)


class RidgeModel:
    """A ridge regression on the 0/1 labels, clipped into [0, 1]."""

    def __init__(self, alpha=1.0, random_state=None):
        self.alpha, self.random_state = alpha, random_state

    def fit(self, X, Y):
        self.model_ = Ridge(alpha=self.alpha).fit(X, Y)
        return self

    def predict_proba(self, X):
        return np.clip(self.model_.predict(X), 0.0, 1.0)


class Sharpen:
    """Pushes each probability away from the training rows' label mean."""

    def __init__(self, power=2.0):
        self.power = power

    def fit(self, X, pred_probs, **kwargs):
        self.mean_ = np.asarray(pred_probs).mean(0)
        return self

    def predict_proba(self, X, pred_probs):
        p = np.asarray(pred_probs)
        return np.clip(self.mean_ + np.sign(p - self.mean_) * np.abs(p - self.mean_) ** (1 / self.power), 0, 1)
'''

GRID = '''
name: mine
seeds: 1
datasets:
  - name: mybib.arff
noise:
  kinds: [flip, "myext:drop_positives"]
  rates: [0.2]
classifiers:
  - {name: mlp, params: {epochs: 3, hidden_dims: [16]}}
  - {name: "myext:RidgeModel", params: {alpha: 0.5}}
post_processors:
  - none
  - count-threshold
  - {name: "myext:Sharpen", params: {power: 3}}
'''


def _write_arff(path: Path, n: int = 240, seed: int = 0) -> None:
    """A MEKA-style ARFF file (``-C 3``: the first 3 attributes are the labels) with 5 numeric features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    Y = (X[:, :3] + 0.5 * rng.normal(size=(n, 3)) > 0.3).astype(int)
    header = ["@relation 'mybib: -C 3'"] + [f"@attribute tag{k} {{0,1}}" for k in range(3)]
    header += [f"@attribute f{j} numeric" for j in range(5)] + ["@data"]
    rows = [",".join([*map(str, Y[i]), *(f"{v:.4f}" for v in X[i])]) for i in range(n)]
    path.write_text("\n".join(header + rows) + "\n", encoding="utf-8")


def lsnpc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsnpc", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=ENV)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    _write_arff(tmp_path / "mybib.arff")
    (tmp_path / "myext.py").write_text(textwrap.dedent(USER_MODULE), encoding="utf-8")
    (tmp_path / "grid.yaml").write_text(GRID, encoding="utf-8")
    return tmp_path


def test_a_researchers_data_noise_model_and_method_run_in_one_grid_and_report(workspace: Path) -> None:
    plan = lsnpc(workspace, "experiment", "plan", "grid.yaml", "--results", "out")
    assert plan.returncode == 0, plan.stderr
    assert "12 runs" in plan.stdout  # 2 noise kinds x 2 classifiers x 3 post-processors

    run = lsnpc(workspace, "experiment", "run", "grid.yaml", "--results", "out")
    assert run.returncode == 0, run.stderr
    assert "finished 12 run(s)" in run.stdout and "failed 0" in run.stdout

    report = lsnpc(workspace, "report", "out", "--no-plots")
    assert report.returncode == 0, report.stderr
    summary = pd.read_csv(workspace / "out" / "report" / "summary.csv")
    assert set(summary["dataset"]) == {"mybib"}
    assert set(summary["noise_kind"]) == {"flip", "myext:drop_positives"}
    assert set(summary["classifier"]) == {"mlp", "RidgeModel"}
    assert set(summary["processor"]) == {"none", "count-threshold", "Sharpen"}
    assert len(summary) == 2 * 2 * 3 * 2  # ... x (macro-F1, micro-F1)
    assert summary["mean"].between(0, 1).all() and summary["mean"].gt(0).any()
    text = (workspace / "out" / "report" / "report.md").read_text(encoding="utf-8")
    assert "| RidgeModel |" in text and "Sharpen" in text and "count-threshold" in text
    assert sorted(p.name for p in workspace.iterdir()) == ["__pycache__", "grid.yaml", "mybib.arff", "myext.py", "out"]


@pytest.mark.parametrize(("line", "replacement", "message"), [
    ("  - name: mybib.arff", "  - name: mybibx", "datasets[0].name: unknown data set 'mybibx'"),
    ("  - name: mybib.arff", "  - name: other.arff", "datasets[0].name: data file not found"),
    ('"myext:drop_positives"', '"myext:drop_all"',
     "noise.kinds[1]: noise kind 'myext:drop_all': module 'myext' has no attribute 'drop_all'"),
    ('"myext:Sharpen"', '"myextx:Sharpen"',
     "post_processors[2].name: post-processor 'myextx:Sharpen': cannot import module 'myextx'"),
])
def test_a_name_that_a_run_could_not_use_fails_at_plan_time_naming_the_field(
    workspace: Path, line: str, replacement: str, message: str
) -> None:
    grid = workspace / "grid.yaml"
    grid.write_text(grid.read_text(encoding="utf-8").replace(line, replacement), encoding="utf-8")
    plan = lsnpc(workspace, "experiment", "plan", "grid.yaml", "--results", "out")
    assert plan.returncode == 1, (plan.stdout, plan.stderr)
    text = " ".join(plan.stderr.split())
    assert message in text and "a bug in lsnpc" not in text and "Traceback" not in text
