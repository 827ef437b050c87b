"""Why the correction loses to a tuned threshold at full size: the measurements of docs/full-size.md.

One setting (data set, size, noise, seed, base model) of the bench_quality protocol: n rows of the canonical
training split, the paper split (val0: the ≈5% clean validation triple, val1: the clean set), the paper's noise
on the train rows, a base model, then *probes*: LSNPC fits of the correction alone (``student=False,
guard=False``, the epoch and threshold chosen on val0, as ``LSNPC(guard=False)`` does), each scored on the
canonical test split, and a post-hoc ceiling that needs no LSNPC. Base models (``--bases``):

  protocol   the project's MLPClassifier, checkpoint on clean val0 micro-F1 (bench_quality's base model)
  converged  scikit-learn's MLPClassifier (100 hidden units, Adam, 200 epochs, no early stopping) on
             standardised X: a model trained to convergence on the noisy labels, as most users' are

Probes (``--probes``):

  corr       LSNPC(student=False, guard=False); from the same fit: the decoder at ẑ (what reconstructs ŷ)
             against the decoder at z (the correction), ŷ fed as a Bernoulli sample per draw (eq. 9
             literally, 64 draws) instead of the probabilities, the latent's statistics, and on the train rows
             how the correction moves the entries the noise added or removed against those it left alone
  readsp     does the correction read the base probabilities at all? The correction alone, scored with each test
             row's P replaced by the training rows' mean ("readsp-mean") and by another row's P ("readsp-shuffled");
             and the logits' spread from the data embedding against that from the latent
  betasum    the same with β · m / L: the weight that sums over labels and latent dimensions with the paper's
             β = 0.01 gives, where the objective averages (m = 64 latent dimensions, L labels)
  beta1e-4   β = 1e-4: the latent nearly free
  trunk      encoder=base.trunk_ (the protocol base model only)
  semi       with the val1 clean set trained on (Algorithm 1)
  learned    latent="learned": ν_θ(x, ŷ) per row; records its mean
  guard      LSNPC() and LSNPC(guard=False): the guard's choice and its evidence (``report_["blend"]``), and the
             blends (1 − w) · output + w · P for w = 0, ½, 1 scored like every probe ("guard-w0", "guard-w0.5",
             "guard-w1"): does the guard, which decides at 0.5, keep what wins at tuned thresholds?
  ceiling    not LSNPC: a linear map of the base model's logits, logit(P) W + b → y, fitted on the *true* labels
             of the train rows (W from the identity, L2 towards it): what a post-hoc function of the base
             probabilities alone can buy at best; and ``ceiling-val1``, the same fitted on the clean val1 rows

Scores: test micro / macro-F1 at the threshold ``tune_threshold`` chooses on val0 over the library's grid
(0.2–0.5, "tuned"), and over a wide one (0.01–0.5, "wide"); per-class mAP and LRAP (no threshold). The base
model gets the same.

    HF_HUB_OFFLINE=1 python benchmarks/diag_full_size.py --configs tmc2007-500@full bibtex@full \\
        --noise symmetric:0.0 symmetric:0.3 symmetric:0.5 pairflip:0.3 --bases protocol converged \\
        --out diag.jsonl

``--set KEY=VALUE`` passes a parameter to every LSNPC a probe fits. Appends one JSON line per (setting, probe) to ``--out`` and skips those already there (resumable); ``--report``
prints the tables of a file.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import bench_quality as bq
import numpy as np
from bench_full_size import prepare

PROBES = ("corr", "readsp", "betasum", "beta1e-4", "trunk", "semi", "learned", "ceiling", "guard")
BASES = ("protocol", "converged")
WIDE_GRID = tuple(np.round(np.concatenate([np.arange(0.01, 0.2, 0.01), np.arange(0.2, 0.5001, 0.025)]), 4))
EQ9_DRAWS = 64


def scores(Y_val: np.ndarray, Q_val: np.ndarray, Y_test: np.ndarray, Q_test: np.ndarray, prefix: str = "") -> dict:
    """Test F1 at the val0-tuned threshold (library grid and wide grid), at 0.5, and the ranking metrics."""
    from lsnpc import tune_threshold
    from lsnpc.metrics import lrap, macro_f1, mean_average_precision, micro_f1

    out = {}
    for name, grid in (("tuned", None), ("wide", WIDE_GRID)):
        t = tune_threshold(Y_val, Q_val, **({} if grid is None else dict(thresholds=grid))).threshold
        out.update({f"{name}_t": t, f"{name}_micro": micro_f1(Y_test, Q_test, t),
                    f"{name}_macro": macro_f1(Y_test, Q_test, t)})
    out.update(half_micro=micro_f1(Y_test, Q_test), half_macro=macro_f1(Y_test, Q_test),
               map=mean_average_precision(Y_test, Q_test), lrap=lrap(Y_test, Q_test),
               mean_prob=float(Q_test.mean()), sharpness=_sharpness(Q_test),
               count=float((Q_test >= out["tuned_t"]).sum(1).mean()))
    return {prefix + k: v for k, v in out.items()}


def _sharpness(Q: np.ndarray) -> float:
    from lsnpc.corrector.blend import base_sharpness

    return base_sharpness(Q)


def noise_vs_signal(Y_true: np.ndarray, Y_noisy: np.ndarray, P: np.ndarray, Q: np.ndarray) -> dict:
    """On the train rows: does the correction Q move the entries the noise changed, or those it left alone?

    Among the observed positives (ỹ = 1): AUC of a score for telling the true ones (y = 1) from those the
    noise added (y = 0), for the base probabilities P and for Q; likewise among the observed negatives for
    the positives the noise removed. And the mean change Q − P on each kind of entry."""
    from sklearn.metrics import roc_auc_score

    out: dict = {}
    for name, observed in (("pos", Y_noisy == 1), ("neg", Y_noisy == 0)):
        truth = Y_true[observed]
        if truth.min() == truth.max():
            continue
        for label, S in (("base", P), ("corr", Q)):
            out[f"auc_{name}_{label}"] = float(roc_auc_score(truth, S[observed]))
    delta = Q - P
    kinds = {"kept_pos": (Y_noisy == 1) & (Y_true == 1), "added": (Y_noisy == 1) & (Y_true == 0),
             "removed": (Y_noisy == 0) & (Y_true == 1), "kept_neg": (Y_noisy == 0) & (Y_true == 0)}
    for name, mask in kinds.items():
        out[f"delta_{name}"] = float(delta[mask].mean()) if mask.any() else float("nan")
    return out


def latent_statistics(model, X: np.ndarray, P: np.ndarray) -> dict:
    """The latent of the fitted model on rows X with ŷ = P (eval mode): q(ẑ | x, ŷ)'s mean scale σ_θ and
    location spread, how far μ_κ(ẑ) shrinks ẑ, the shift g_ψ(z) − ẑ against p(ẑ | z)'s unit scale, the
    latent dimensions in use, and ν_θ's mean when learned."""
    import torch

    model.eval()
    with torch.no_grad():
        x, p = torch.as_tensor(X[:4096], dtype=torch.float32), torch.as_tensor(P[:4096], dtype=torch.float32)
        h = model.data_encoder(x)
        loc, scale, df = model.shift_encoder(h, model.label_encoder(p))
        z_loc, z_scale = model.true_latent_encoder(loc)
        back = model.shift_decoder(z_loc)
        spread = loc.std(0)
        out = dict(zhat_scale=float(scale.mean()), zhat_loc_rms=float(loc.pow(2).mean().sqrt()),
                   zhat_active=int((spread > 0.1 * spread.max()).sum()),
                   z_over_zhat=float(z_loc.norm(dim=1).mean() / loc.norm(dim=1).mean().clamp_min(1e-12)),
                   z_scale=float(z_scale.mean()), shift_rms=float((back - loc).pow(2).mean().sqrt()))
        if df is not None:
            out["nu_mean"] = float(df.mean())
        # the decoder's reliance on the latent: logit spread from the latent against that from the data
        lat = model.label_decoder.latent_weight()
        out["latent_logit_rms"] = float((loc @ lat.T).std(0).mean())
    return out


def decoder_at(model, X: np.ndarray, P: np.ndarray, where: str) -> np.ndarray:
    """sigmoid of g_φ(x, ·) at ẑ = the mean of q(ẑ | x, ŷ = P) (``where="zhat"``, the reconstruction of ŷ) or at
    z = μ_κ(ẑ) (``"z"``, the correction without Monte Carlo)."""
    import torch

    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(X), 4096):
            x = torch.as_tensor(X[start:start + 4096], dtype=torch.float32)
            p = torch.as_tensor(P[start:start + 4096], dtype=torch.float32)
            h = model.data_encoder(x)
            loc, _, _ = model.shift_encoder(h, model.label_encoder(p))
            latent = loc if where == "zhat" else model.true_latent_encoder(loc)[0]
            out.append(torch.sigmoid(model.label_logits(h, latent)).numpy())
    return np.concatenate(out)


def eq9(model, X: np.ndarray, P: np.ndarray, seed: int) -> np.ndarray:
    """The correction with ŷ drawn from the base probabilities in each of EQ9_DRAWS Monte-Carlo draws."""
    import torch

    from lsnpc.corrector.montecarlo import monte_carlo_design

    m = model.shift_encoder.loc.out_features
    u = monte_carlo_design(EQ9_DRAWS, 2 * m + P.shape[1], torch.Generator().manual_seed(seed))
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(X), 1024):
            x = torch.as_tensor(X[start:start + 1024], dtype=torch.float32)
            p = torch.as_tensor(P[start:start + 1024], dtype=torch.float32)
            out.append(model.correct(x, p, feed="sample", uniforms=u).numpy())
    return np.concatenate(out)


def fit_ceiling(L_fit: np.ndarray, Y_fit: np.ndarray, penalty: float, seed: int):
    """W, b of logit(P) W + b → y by full-batch L-BFGS on BCE + penalty · ||W − I||², from the identity."""
    import torch

    torch.manual_seed(seed)
    L = L_fit.shape[1]
    A, T = torch.as_tensor(L_fit, dtype=torch.float32), torch.as_tensor(Y_fit, dtype=torch.float32)
    eye = torch.eye(L)
    W = eye.clone().requires_grad_(True)
    b = torch.zeros(L, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=300, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(A @ W + b, T) + penalty * (W - eye).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach(), b.detach()


def apply_ceiling(W, b, P: np.ndarray) -> np.ndarray:
    import torch

    return torch.sigmoid(torch.as_tensor(_logit(P)) @ W + b).numpy()


def _logit(P: np.ndarray) -> np.ndarray:
    p = np.clip(P.astype(np.float32), 1e-4, 1 - 1e-4)
    return np.log(p) - np.log1p(-p)


def run_probe(s: dict, probe: str, seed: int, extra: dict | None = None) -> list[dict]:
    """Rows of one probe (several for corr and ceiling)."""
    from lsnpc import LSNPC

    X, Y, Xt, Yt, Yn, base = s["X"], s["Y"], s["Xt"], s["Yt"], s["Y_noisy"], s["base"]
    tr, v0, v1 = s["split"]["train"], s["split"]["val0"], s["split"]["val1"]
    P_tr, P_v0, P_v1, P_te = s["P"]
    L = Y.shape[1]
    if probe == "ceiling":
        rows = []
        for name, (Lf, Yf, penalty) in {"ceiling": (_logit(P_tr), Y[tr], 1e-4 / L),
                                        "ceiling-val1": (_logit(P_v1), Y[v1], 1e-2 / L)}.items():
            started = time.perf_counter()
            W, b = fit_ceiling(Lf, Yf, penalty, seed)
            rows.append(dict(probe=name, seconds=time.perf_counter() - started,
                             **scores(Y[v0], apply_ceiling(W, b, P_v0), Yt, apply_ceiling(W, b, P_te))))
        return rows
    params = dict(student=False, guard=False, random_state=seed, **(extra or {}))
    kwargs = dict(X_val=X[v0], y_val=Y[v0], pred_probs_val=P_v0)
    if probe == "betasum":
        params["beta"] = 0.01 * 64 / L
    elif probe == "beta1e-4":
        params["beta"] = 1e-4
    elif probe == "trunk":
        if not hasattr(base, "trunk_"):
            return []
        params["encoder"] = base.trunk_
    elif probe == "semi":
        kwargs.update(X_clean=X[v1], y_clean=Y[v1], pred_probs_clean=P_v1)
    elif probe == "learned":
        params["latent"] = "learned"
    elif probe == "readsp":
        return _reads_p(s, seed, params, kwargs)
    elif probe == "guard":
        return _guard(s, seed, extra or {}, kwargs)
    started = time.perf_counter()
    corrector = LSNPC(**params).fit(X[tr], P_tr, **kwargs)
    seconds = time.perf_counter() - started
    model = corrector.model_
    Q_v0, Q_te = corrector.predict_proba(X[v0], P_v0), corrector.predict_proba(Xt, P_te)
    row = dict(probe=probe, seconds=seconds, epoch=corrector.best_epoch_, epochs=corrector.epochs_,
               beta=params.get("beta", 0.01), **scores(Y[v0], Q_v0, Yt, Q_te))
    if probe not in ("trunk",):
        row.update(latent_statistics(model, Xt, P_te))
    rows = [row]
    if probe == "corr":
        row.update(noise_vs_signal(Y[tr], Yn, P_tr, corrector.predict_proba(X[tr], P_tr)))
        for where in ("zhat", "z"):
            rows.append(dict(probe=f"corr-decoder-{where}", **scores(
                Y[v0], decoder_at(model, X[v0], P_v0, where), Yt, decoder_at(model, Xt, P_te, where))))
        rows.append(dict(probe="corr-eq9", **scores(Y[v0], eq9(model, X[v0], P_v0, seed), Yt,
                                                    eq9(model, Xt, P_te, seed))))
    return rows


def _reads_p(s: dict, seed: int, params: dict, kwargs: dict) -> list[dict]:
    """The correction alone with the base probabilities it is fed replaced (see ``readsp`` in the docstring)."""
    import torch

    from lsnpc import LSNPC

    X, Y, Xt, Yt = s["X"], s["Y"], s["Xt"], s["Yt"]
    tr, v0 = s["split"]["train"], s["split"]["val0"]
    P_tr, P_v0, _, P_te = s["P"]
    corrector = LSNPC(**params).fit(X[tr], P_tr, **kwargs)
    rng = np.random.default_rng(seed)
    mean = P_tr.mean(0, keepdims=True)
    rows = [dict(probe="readsp", **scores(Y[v0], corrector.predict_proba(X[v0], P_v0), Yt,
                                          corrector.predict_proba(Xt, P_te)))]
    for name in ("mean", "shuffled"):
        fakes = [np.repeat(mean, len(P), 0) if name == "mean" else P[rng.permutation(len(P))] for P in (P_v0, P_te)]
        rows.append(dict(probe=f"readsp-{name}", **scores(Y[v0], corrector.predict_proba(X[v0], fakes[0]), Yt,
                                                          corrector.predict_proba(Xt, fakes[1]))))
    model = corrector.model_.eval()
    with torch.no_grad():
        x, p = torch.as_tensor(Xt[:4096], dtype=torch.float32), torch.as_tensor(P_te[:4096], dtype=torch.float32)
        h = model.data_encoder(x)
        loc, _, _ = model.shift_encoder(h, model.label_encoder(p))
        z = model.true_latent_encoder(loc)[0]
        decoder = model.label_decoder
        with_latent = decoder(h, z)
        without = decoder(h, torch.zeros_like(z))
    rows[0].update(logit_sd_total=float(with_latent.std(0).mean()), logit_sd_latent=float((with_latent - without).std(0).mean()))
    return rows


def _guard(s: dict, seed: int, extra: dict, kwargs: dict) -> list[dict]:
    """LSNPC()'s blend decision beside the blends of its unguarded output with P (see ``guard`` in the docstring)."""
    from lsnpc import LSNPC

    X, Y, Xt, Yt = s["X"], s["Y"], s["Xt"], s["Yt"]
    tr, v0 = s["split"]["train"], s["split"]["val0"]
    P_tr, P_v0, _, P_te = s["P"]
    guarded = LSNPC(random_state=seed, **extra).fit(X[tr], P_tr, **kwargs)
    blend = guarded.report_["blend"]
    free = LSNPC(random_state=seed, **{**extra, "guard": False}).fit(X[tr], P_tr, **kwargs)
    Q_v0, Q_te = free.predict_proba(X[v0], P_v0), free.predict_proba(Xt, P_te)
    rows = [dict(probe="guard", base_weight=blend.choice, blend_method=blend.method,
                 loss_support=blend.evidence.get("loss_support"),
                 **scores(Y[v0], guarded.predict_proba(X[v0], P_v0), Yt, guarded.predict_proba(Xt, P_te)))]
    for w in (0.0, 0.5, 1.0):
        mix_v0, mix_te = (1 - w) * Q_v0 + w * P_v0, (1 - w) * Q_te + w * P_te
        row = dict(probe=f"guard-w{w:g}", **scores(Y[v0], mix_v0, Yt, mix_te))
        row.update({f"val_{k}": v for k, v in scores(Y[v0], mix_v0, Y[v0], mix_v0).items()
                    if k in ("tuned_micro", "tuned_macro", "half_micro", "half_macro")})
        rows.append(row)
    return rows


def run_setting(dataset, size, kind, rate, seed, base_kind, probes, home, text_pool, feature_cache,
                extra: dict | None = None) -> list[dict]:
    from lsnpc.metrics import micro_f1

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pred_probs barely vary", category=UserWarning)
        started = time.perf_counter()
        s = prepare(dataset, size, kind, rate, seed, base_kind, home, text_pool, feature_cache)
        base_seconds = time.perf_counter() - started
        X, Y, Xt, Yt, base = s["X"], s["Y"], s["Xt"], s["Yt"], s["base"]
        tr, v0, v1 = s["split"]["train"], s["split"]["val0"], s["split"]["val1"]
        s["P"] = tuple(np.asarray(base.predict_proba(a), dtype=np.float32) for a in (X[tr], X[v0], X[v1], Xt))
        key = dict(dataset=dataset, requested=size, size=len(X), kind=kind, rate=rate, seed=seed, base=base_kind,
                   n_labels=Y.shape[1])
        # how far the base model memorised the noisy labels: its train-row micro-F1 against them and the truth
        P_tr = s["P"][0]
        rows = [dict(key, probe="base", seconds=base_seconds, train_f1_noisy=micro_f1(s["Y_noisy"], P_tr),
                     train_f1_true=micro_f1(Y[tr], P_tr), **scores(Y[v0], s["P"][1], Yt, s["P"][3]))]
        for probe in probes:
            rows += [dict(key, **r) for r in run_probe(s, probe, seed, extra)]
            print(f"    {dataset} {kind}:{rate} {base_kind}: {probe} done "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    return rows


def pct(value: float) -> str:
    """A score ×100 with one decimal ("" for a missing one)."""
    return "" if value is None or np.isnan(value) else f"{100 * value:.1f}"


def _pair(row, name: str) -> str:
    return f"{pct(row[f'{name}_micro'])} / {pct(row[f'{name}_macro'])}"


def _delta(row, base, name: str) -> str:
    return (f"{100 * (row[f'{name}_micro'] - base[f'{name}_micro']):+.1f} / "
            f"{100 * (row[f'{name}_macro'] - base[f'{name}_macro']):+.1f}")


def print_summary(df) -> None:
    """Per data set, base model and probe: the mean change of the tuned test micro / macro-F1 against the base
    model's at its tuned threshold over the noisy settings, and the change at 0% (the bar's two measures)."""
    print("\nAgainst the base model at its tuned threshold (×100, tuned grid): mean change over the noisy settings, "
          "the change at 0%")
    print("| data set | base | probe | noisy settings | mean Δ micro / macro | Δ at 0% |")
    print("|---|---|---|---|---|---|")
    base = df[df.probe == "base"].set_index(["dataset", "base", "kind", "rate"])[["tuned_micro", "tuned_macro"]].add_suffix("_b")
    for (dataset, base_kind, probe), g in df[df.probe != "base"].groupby(["dataset", "base", "probe"], sort=False):
        j = g.set_index(["dataset", "base", "kind", "rate"])[["tuned_micro", "tuned_macro"]].join(base)
        d = 100 * (j[["tuned_micro", "tuned_macro"]].to_numpy() - j[["tuned_micro_b", "tuned_macro_b"]].to_numpy())
        noisy = j.index.get_level_values("rate").to_numpy() > 0
        mean = f"{d[noisy, 0].mean():+.1f} / {d[noisy, 1].mean():+.1f}" if noisy.any() else "–"
        zero = f"{d[~noisy, 0].min():+.1f} / {d[~noisy, 1].min():+.1f}" if (~noisy).any() else "–"
        print(f"| {dataset} | {base_kind} | {probe} | {int(noisy.sum())} | {mean} | {zero} |")


def print_report(rows: list[dict]) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    keys = ["dataset", "base", "kind", "rate"]
    df["noise"] = [("0%" if r == 0 else f"{bq.NOISE_NAMES.get(k, k)} {r:.0%}") for k, r in zip(df.kind, df.rate)]
    print("\nScores (test, ×100): micro / macro-F1 at the val0-tuned threshold (grid 0.2–0.5), the same on the wide "
          "grid (0.01–0.5), mAP; Δ against the base model's same number")
    print("| data set | base | noise | probe | tuned micro / macro | wide micro / macro | mAP | Δ tuned | Δ wide | Δ mAP "
          "| mean prob | sharpness |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for _, g in df.groupby(keys, sort=False):
        b = g[g.probe == "base"].iloc[0]
        for _, r in g.iterrows():
            dmap = "" if r.probe == "base" else f"{100 * (r['map'] - b['map']):+.1f}"
            print(f"| {r.dataset} | {r.base} | {r.noise} | {r.probe} | {pct(r.tuned_micro)} / {pct(r.tuned_macro)} | "
                  f"{pct(r.wide_micro)} / {pct(r.wide_macro)} | {pct(r['map'])} | "
                  f"{'' if r.probe == 'base' else _delta(r, b, 'tuned')} | "
                  f"{'' if r.probe == 'base' else _delta(r, b, 'wide')} | "
                  f"{dmap} | {r.mean_prob:.3f} | "
                  f"{r.sharpness:.3f} |")
    print_summary(df)
    if "auc_pos_base" in df:
        print("\nNoise or signal (train rows, the correction alone): AUC telling true from noise-added positives "
              "among the observed positives, and removed positives from true negatives among the observed "
              "negatives; mean change Q − P on each kind of entry")
        print("| data set | base | noise | base train F1 vs noisy / true | AUC pos base → corr | AUC neg base → corr "
              "| Δ kept pos | Δ added | Δ removed | Δ kept neg |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for _, g in df.groupby(keys, sort=False):
            b, c = g[g.probe == "base"].iloc[0], g[g.probe == "corr"]
            if not len(c):
                continue
            c = c.iloc[0]
            auc = {n: f"{c[f'auc_{n}_base']:.3f} → {c[f'auc_{n}_corr']:.3f}" if pd.notna(c.get(f"auc_{n}_base")) else ""
                   for n in ("pos", "neg")}
            print(f"| {c.dataset} | {c.base} | {c.noise} | {pct(b.train_f1_noisy)} / {pct(b.train_f1_true)} | "
                  f"{auc['pos']} | {auc['neg']} | {c.delta_kept_pos:+.3f} | {c.delta_added:+.3f} | "
                  f"{c.delta_removed:+.3f} | {c.delta_kept_neg:+.3f} |")
    if "zhat_scale" in df:
        print("\nThe latent (test rows, ŷ = P): σ_θ of q(ẑ | x, ŷ), rms of its location, dimensions in use, "
              "|μ_κ(ẑ)| / |ẑ|, rms of the shift g_ψ(z) − ẑ (p(ẑ | z) has scale 1), the logits' spread from the "
              "latent, ν_θ (learned)")
        print("| data set | base | noise | probe | σ_θ | rms loc | dims | shrink | shift | latent logit sd | ν |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for _, r in df[df.zhat_scale.notna()].iterrows():
            nu = f"{r.nu_mean:.2f}" if "nu_mean" in r and pd.notna(r.nu_mean) else ""
            print(f"| {r.dataset} | {r.base} | {r.noise} | {r.probe} | {r.zhat_scale:.3f} | {r.zhat_loc_rms:.3f} | "
                  f"{r.zhat_active} | {r.z_over_zhat:.3f} | {r.shift_rms:.3f} | {r.latent_logit_rms:.3f} | {nu} |")
    if "logit_sd_total" in df:
        print("\nDoes the correction read the base probabilities? (the correction alone; test micro / macro-F1 at the "
              "val0-tuned threshold with P as given, with P replaced by its training mean, with P from another row; "
              "the spread of the logits and of their part from the latent z)")
        print("| data set | base | noise | P given | P = mean | P shuffled | logit sd | from z |")
        print("|---|---|---|---|---|---|---|---|")
        for _, g in df.groupby(keys, sort=False):
            r = g[g.probe == "readsp"]
            if not len(r):
                continue
            r = r.iloc[0]
            f = {name: _pair(g[g.probe == name].iloc[0], "tuned") for name in ("readsp", "readsp-mean", "readsp-shuffled")}
            print(f"| {r.dataset} | {r.base} | {r.noise} | {f['readsp']} | {f['readsp-mean']} | {f['readsp-shuffled']} "
                  f"| {r.logit_sd_total:.2f} | {r.logit_sd_latent:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["bibtex@full"], metavar="DATASET@SIZE")
    parser.add_argument("--noise", nargs="+", default=["symmetric:0.0", "symmetric:0.3", "symmetric:0.5"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bases", nargs="+", default=["protocol"], choices=BASES)
    parser.add_argument("--probes", nargs="+", default=["corr", "ceiling"], choices=PROBES)
    parser.add_argument("--data-home", default=str(bq.DEFAULT_HOME))
    parser.add_argument("--text-pool", type=int, default=100_000)
    parser.add_argument("--feature-cache", default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", dest="params",
                        help="LSNPC parameters for every probe (a variant: give it its own --out)")
    args = parser.parse_args()
    extra = dict(bq.parse_param(item) for item in args.params)
    rows = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() else []
    if not args.report:
        for spec in args.configs:
            dataset, size = bq.parse_config(spec)
            for noise in args.noise:
                kind, rate = noise.split(":")
                for base_kind in args.bases:
                    key = (dataset, size, kind, float(rate), args.seed, base_kind)
                    done = {r["probe"] for r in rows if (r["dataset"], r["requested"], r["kind"], r["rate"], r["seed"],
                                                         r["base"]) == key}
                    todo = [p for p in args.probes if p not in done]
                    if not todo and "base" in done:
                        continue
                    fresh = run_setting(*key, todo, args.data_home, args.text_pool, args.feature_cache, extra)
                    fresh = [r for r in fresh if r["probe"] not in done]
                    rows += fresh
                    with open(args.out, "a") as fh:
                        fh.writelines(json.dumps(r) + "\n" for r in fresh)
    print_report(rows)


if __name__ == "__main__":
    main()
