"""A correction that reads the base model's probabilities, ``lsnpc.LogitMapCorrector``: a sparse linear map of its
logits fitted on the clean triple (docs/full-size.md, "A correction that reads P").

For each label j the corrected logit is ``a_j · l_j + b_j + Σ_k w_jk · l_k + m_j`` where ``l = logit(P) − m``
(m: the training rows' mean logit, so the cross terms move no label's bias), the k run over the ``--neighbours``
labels whose training-row logits correlate most with label j's (a noise that moves positives between labels,
as pairflip does, shows there), and (a, b, w) minimise the clean triple's binary cross-entropy plus
``--penalty`` · (‖a − 1‖² + ‖b‖² + ‖w‖²) (full-batch L-BFGS, from the identity). A label with fewer than
``--min-positives`` positives among the triple's rows keeps its base logit: the triple cannot say how its
channel works. The map's threshold is tuned on its out-of-fold outputs over 5 multilabel folds of the triple;
"map+guard" (``guard=True``) is the map only where the test LSNPC() uses (each candidate at its own
cross-fitted tuned threshold, confidence 0.4) prefers it or its ½ blend to the base model. "readsp" is the map with each test row's P
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

from lsnpc import LogitMapCorrector, tune_threshold
from lsnpc.metrics import macro_f1, mean_average_precision, micro_f1


def scored(Yt, Q, t) -> dict:
    return {"micro": 100 * micro_f1(Yt, Q, t), "macro": 100 * macro_f1(Yt, Q, t),
            "map": 100 * mean_average_precision(Yt, Q)}


def run(path: Path, penalty: float, r: int, min_positives: int, seed: int) -> list[dict]:
    s = np.load(path)
    X, Y, Xt, Yt, tr, v0 = s["X"], s["Y"], s["Xt"], s["Yt"], s["tr"], s["v0"]
    P_tr, P_v0, P_te = s["P_tr"], s["P_v0"], s["P_te"]
    key = {"setting": path.stem}
    rows = [dict(key, method="base-threshold", **scored(Yt, P_te, tune_threshold(Y[v0], P_v0).decision))]
    options = {"penalty": penalty, "n_neighbours": r, "min_positives": min_positives, "random_state": seed}
    clean = {"X_clean": X[v0], "y_clean": Y[v0], "pred_probs_clean": P_v0}
    started = time.perf_counter()
    mapping = LogitMapCorrector(guard=False, **options).fit(X[tr], P_tr, **clean)
    seconds = time.perf_counter() - started
    t = mapping.threshold_
    rows.append(dict(key, method="map", **scored(Yt, mapping.predict_proba(Xt, P_te), t), seconds=seconds,
                     labels_fitted=mapping.report_["labels_mapped"]))
    shuffled = np.random.default_rng(seed).permutation(len(Xt))
    rows.append(dict(key, method="readsp", **scored(Yt, mapping.predict_proba(Xt, P_te[shuffled]), t)))
    guarded = LogitMapCorrector(guard=True, **options).fit(X[tr], P_tr, **clean)
    rows.append(dict(key, method="map+guard", **scored(Yt, guarded.predict_proba(Xt, P_te), guarded.threshold_),
                     base_weight=guarded.base_weight_))
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
