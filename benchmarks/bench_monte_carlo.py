"""Monte-Carlo error of LSNPC's correction on real data: how far a row's corrected probability is from
the many-sample answer, and how many 0/1 decisions that moves.

    python benchmarks/bench_monte_carlo.py --datasets scene yeast --samples 5 10 20

For each data set: 30% symmetric noise, a base MLP on the noisy labels, ``LSNPC()`` at its defaults with
the val0 triple (the protocol of bench_quality.py, seed 0). Then the test set is corrected ``--repeats``
times with independent draw sets, by two estimators of eq. 9:

* ``independent``: S independent draws of ẑ (Student-t) and z (Normal) per row, as LSNPC predicted
  before common random numbers (here drawn per row, so rows are independent of each other);
* ``lsnpc``: the library's estimator — S Latin-hypercube draws of ẑ common to all rows, z | ẑ
  integrated in closed form (a fresh design per repeat, as another ``random_state`` would give).

"Exact" is the mean of ``lsnpc`` over ``--exact-repeats`` designs of S = 5 (unbiased, so its error
shrinks as 1/sqrt(repeats)). Columns: root-mean-square and largest error of a probability, the share of
0/1 decisions at 0.5 that differ from the exact answer's, and the spread (sd) of test micro-F1.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import numpy as np

DEFAULT_HOME = Path(__file__).resolve().parents[2] / "shared" / "data"


def fitted_corrector(dataset: str, home: str):
    from lsnpc import LSNPC, MLPClassifier, simulate_noise
    from lsnpc.data import load_dataset, paper_splits

    train = load_dataset(dataset, "train", data_home=home)
    test = load_dataset(dataset, "test", data_home=home)
    X, Y = np.asarray(train.X, dtype=np.float32), train.Y
    split = paper_splits(len(X), random_state=0)
    tr, v0 = split["train"], split["val0"]
    Y_noisy, _ = simulate_noise(Y[tr], "symmetric", 0.3, random_state=0)
    base = MLPClassifier(random_state=0, n_threads=1).fit(X[tr], Y_noisy, X_val=X[v0], Y_val=Y[v0])
    P_tr, P_v0 = base.predict_proba(X[tr]), base.predict_proba(X[v0])
    corrector = LSNPC(random_state=0, n_threads=1).fit(X[tr], P_tr, X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
    Xt = np.asarray(test.X, dtype=np.float32)
    return corrector, Xt, base.predict_proba(Xt), test.Y


def lsnpc_estimates(corrector, X, P, n_samples: int, repeats: int, first_seed: int) -> np.ndarray:
    """(repeats, n, L): the library's prediction with fresh common random numbers each time."""
    import torch

    from lsnpc.corrector.inference import predict_corrected
    from lsnpc.corrector.montecarlo import monte_carlo_design

    model = copy.deepcopy(corrector.model_).eval()
    dims = model.monte_carlo_uniforms.shape[1]
    out = []
    for r in range(repeats):
        model.monte_carlo_uniforms = monte_carlo_design(n_samples, dims, torch.Generator().manual_seed(first_seed + r))
        out.append(predict_corrected(model, X, P, feed=corrector.predict_feed, device=torch.device("cpu")))
    return np.stack(out)


def independent_estimates(corrector, X, P, n_samples: int, repeats: int, seed: int) -> np.ndarray:
    """(repeats, n, L): the plain estimator, independent draws of ẑ and z for every row and sample."""
    import torch

    model = corrector.model_.eval()
    out = []
    with torch.no_grad():
        torch.manual_seed(seed)
        x, p = torch.as_tensor(X), torch.as_tensor(P)
        h = model.data_encoder(x)
        q_shifted = model.q_latent(h, p)
        for _ in range(repeats):
            zhat = q_shifted.rsample((n_samples,))
            z = model.q_true_given_shifted(zhat).rsample()
            logits = model.label_logits(h.expand(n_samples, *h.shape).flatten(0, 1), z.flatten(0, 1))
            out.append(torch.sigmoid(logits).view(n_samples, len(X), -1).mean(0).numpy())
    return np.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast"])
    parser.add_argument("--samples", nargs="+", type=int, default=[5, 10, 20])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--exact-repeats", type=int, default=400)
    parser.add_argument("--data-home", default=str(DEFAULT_HOME))
    args = parser.parse_args()
    import torch

    from lsnpc.metrics import micro_f1

    torch.set_num_threads(1)
    for dataset in args.datasets:
        corrector, X, P, Y = fitted_corrector(dataset, args.data_home)
        exact = lsnpc_estimates(corrector, X, P, 5, args.exact_repeats, first_seed=10**6).mean(0)
        print(f"\n{dataset}: {len(X)} test rows × {P.shape[1]} labels, base weight {corrector.base_weight_}, "
              f"micro-F1 of the exact correction {micro_f1(Y, exact):.4f}")
        print("| estimator | S | rms error | max error | decisions ≠ exact (%) | micro-F1 sd |")
        print("|---|---|---|---|---|---|")
        for n_samples in args.samples:
            for name in ("independent", "lsnpc"):
                if name == "lsnpc":
                    runs = lsnpc_estimates(corrector, X, P, n_samples, args.repeats, first_seed=0)
                else:
                    runs = independent_estimates(corrector, X, P, n_samples, args.repeats, seed=0)
                error = runs - exact
                flips = 100 * np.mean((runs >= 0.5) != (exact >= 0.5))
                f1_sd = np.std([micro_f1(Y, r) for r in runs])
                print(f"| {name} | {n_samples} | {np.sqrt(np.mean(error**2)):.4f} | {np.abs(error).max():.3f} | "
                      f"{flips:.2f} | {f1_sd:.4f} |", flush=True)


if __name__ == "__main__":
    main()
