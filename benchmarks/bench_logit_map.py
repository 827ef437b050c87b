"""A correction that reads the base model's probabilities: a sparse linear map of its logits fitted on the clean
triple (docs/full-size.md, "A correction that reads P").

For each label j the corrected logit is ``a_j · l_j + b_j + Σ_k w_jk · l_k + m_j`` where ``l = logit(P) − m``
(m: the training rows' mean logit, so the cross terms move no label's bias), the k run over the ``--neighbours``
labels whose training-row logits correlate most with label j's (a noise that moves positives between labels,
as pairflip does, shows there), and (a, b, w) minimise the clean triple's binary cross-entropy plus
``--penalty`` · (‖a − 1‖² + ‖b‖² + ‖w‖²) (full-batch L-BFGS, from the identity). A label with fewer than
``--min-positives`` positives among the triple's rows keeps its base logit: the triple cannot say how its
channel works. The map's threshold is tuned on its out-of-fold outputs over 5 multilabel folds of the triple;
"map+guard" is the map only where ``lsnpc.corrector.blend.test_on_validation`` (the test LSNPC() uses, its confidence 0.4, at tuned
thresholds, cross-fitted) prefers it or its ½ blend to the base model. "readsp" is the map with each test row's P
replaced by another test row's (the F1 change says how much the output depends on P).

It reads the base models' probabilities that ``bench_full_size.py --base-cache DIR`` wrote (one file a setting)
and prints Δ micro / macro / mAP against the base model at ``tune_threshold`` on the same triple:

    python benchmarks/bench_full_size.py --datasets tmc2007-500 bibtex delicious goemotions \
        --noise symmetric:0.0 symmetric:0.5 pairflip:0.3 --seeds 0 1 --bases protocol \
        --methods base-threshold --base-cache bc --out base.jsonl
    python benchmarks/bench_logit_map.py bc/*_protocol.npz --out map.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from lsnpc import tune_threshold
from lsnpc.corrector.blend import test_on_validation
from lsnpc.metrics import macro_f1, mean_average_precision, micro_f1
from lsnpc.model_selection import multilabel_folds


def logit(P: np.ndarray) -> np.ndarray:
    p = np.clip(P.astype(np.float64), 1e-4, 1 - 1e-4)
    return np.log(p) - np.log1p(-p)


def neighbours(L_train: np.ndarray, r: int) -> np.ndarray:
    """(L, r): for each label, the r other labels whose training-row logits correlate most with its own."""
    Z = (L_train - L_train.mean(0)) / (L_train.std(0) + 1e-9)
    C = np.abs(Z.T @ Z) / len(Z)
    np.fill_diagonal(C, -np.inf)
    return np.argsort(-C, axis=0, kind="stable")[:r].T


class LogitMap:
    """The map of the module docstring; ``fit(centred logits (n, L), Y (n, L))``, ``__call__(logits) -> probs``."""

    def __init__(self, mean: np.ndarray, nb: np.ndarray, fitted: np.ndarray, penalty: float) -> None:
        self.mean, self.nb, self.fitted, self.penalty = torch.tensor(mean), torch.tensor(nb), torch.tensor(fitted), penalty

    def _logits(self, A: torch.Tensor) -> torch.Tensor:
        z = A * self.a + self.b + (A[:, self.nb] * self.w).sum(-1)
        return torch.where(self.fitted, z, A) + self.mean

    def fit(self, A: np.ndarray, Y: np.ndarray) -> LogitMap:
        n, L = A.shape
        A_t, Y_t = torch.tensor(A), torch.tensor(Y, dtype=torch.float64)
        self.a = torch.ones(L, dtype=torch.float64, requires_grad=True)
        self.b = torch.zeros(L, dtype=torch.float64, requires_grad=True)
        self.w = torch.zeros(self.nb.shape, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([self.a, self.b, self.w], lr=1, max_iter=200, history_size=20,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(self._logits(A_t), Y_t, reduction="sum") / n
            loss = loss + self.penalty * ((self.a - 1).pow(2).sum() + self.b.pow(2).sum() + self.w.pow(2).sum())
            loss.backward()
            return loss

        opt.step(closure)
        return self

    def __call__(self, A: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(self._logits(torch.tensor(A))).numpy()


def scored(Yt, Q, t) -> dict:
    return {"micro": 100 * micro_f1(Yt, Q, t), "macro": 100 * macro_f1(Yt, Q, t),
            "map": 100 * mean_average_precision(Yt, Q)}


def run(path: Path, penalty: float, r: int, min_positives: int, seed: int) -> list[dict]:
    s = np.load(path)
    Y, Yt, v0 = s["Y"], s["Yt"], s["v0"]
    P_tr, P_v0, P_te = s["P_tr"], s["P_v0"], s["P_te"]
    yv = Y[v0]
    key = {"setting": path.stem}
    rows = [dict(key, method="base-threshold", **scored(Yt, P_te, tune_threshold(yv, P_v0).decision))]
    started = time.perf_counter()
    L_tr = logit(P_tr)
    mean = L_tr.mean(0)
    nb = neighbours(L_tr, r)
    fitted = yv.sum(0) >= min_positives
    A_v, A_te = logit(P_v0) - mean, logit(P_te) - mean
    folds = multilabel_folds(yv, 5, random_state=seed)
    oof = np.zeros(yv.shape)
    for train, test in folds:
        oof[test] = LogitMap(mean, nb, fitted, penalty).fit(A_v[train], yv[train])(A_v[test])
    mapping = LogitMap(mean, nb, fitted, penalty).fit(A_v, yv)
    Q = mapping(A_te)
    t = tune_threshold(yv, oof).decision
    seconds = time.perf_counter() - started
    rows.append(dict(key, method="map", **scored(Yt, Q, t), seconds=seconds, labels_fitted=int(fitted.sum())))
    shuffled = np.random.default_rng(seed).permutation(len(A_te))
    rows.append(dict(key, method="readsp", **scored(Yt, mapping(A_te[shuffled]), t)))
    w, _ = test_on_validation(yv, oof, P_v0.astype(np.float64), candidates=(0.0, 0.5), confidence=0.4,
                              folds=folds, rng=np.random.default_rng(seed))
    blended = (1 - w) * Q + w * P_te
    t_w = tune_threshold(yv, (1 - w) * oof + w * P_v0).decision
    rows.append(dict(key, method="map+guard", **scored(Yt, blended, t_w), base_weight=w))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("caches", nargs="+", type=Path, help="base-probability files of bench_full_size.py")
    parser.add_argument("--penalty", type=float, default=0.01)
    parser.add_argument("--neighbours", type=int, default=10)
    parser.add_argument("--min-positives", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    if args.report:
        print_table([json.loads(x) for x in args.out.read_text().splitlines()])
        return
    torch.set_num_threads(1)
    done = {json.loads(x)["setting"] for x in args.out.read_text().splitlines()} if args.out.exists() else set()
    for path in args.caches:
        if path.stem in done:
            continue
        seed = int(path.stem.split("_s")[-1].split("_")[0])
        rows = run(path, args.penalty, args.neighbours, args.min_positives, seed)
        with open(args.out, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
        base = rows[0]
        print(path.stem, " ".join(f"{r['method']} {r['micro'] - base['micro']:+.1f}/{r['macro'] - base['macro']:+.1f}"
                                  f"/{r['map'] - base['map']:+.1f}" for r in rows[1:]), flush=True)

    print_table([json.loads(x) for x in args.out.read_text().splitlines()])


def print_table(rows: list[dict]) -> None:
    """Per data set and method, Δ micro / macro (mAP) against base-threshold: mean at symmetric 50% and pairflip
    30% over the seeds, and the worst micro or macro Δ at 0%."""
    import pandas as pd

    df = pd.DataFrame(rows)
    df["dataset"] = df.setting.str.split("@").str[0]
    df["noisy"] = ~df.setting.str.contains("symmetric0.0")
    base = df[df.method == "base-threshold"].set_index("setting")[["micro", "macro", "map"]]
    print("| set | method | Δ micro / macro (mAP), sym 50% and pair 30% | worst Δ at 0% |")
    print("|---|---|---|---|")
    for dataset in [*dict.fromkeys(df.dataset), "all"]:
        part = df if dataset == "all" else df[df.dataset == dataset]
        for method in ("map", "map+guard", "readsp"):
            m = part[part.method == method].set_index("setting")
            d = m[["micro", "macro", "map"]] - base.loc[m.index]
            noisy, clean = d[m.noisy], d[~m.noisy]
            worst = min(clean.micro.min(), clean.macro.min())
            print(f"| {dataset} | {method} | {noisy.micro.mean():+.1f} / {noisy.macro.mean():+.1f} ({noisy['map'].mean():+.1f}) "
                  f"| {worst:+.1f} |")


if __name__ == "__main__":
    main()
