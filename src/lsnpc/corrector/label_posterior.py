"""The posterior of the true labels given the observed ones: p(y | x, ŷ = the given labels).

Beyond the paper (it names correcting training labels as future work). Three pieces:

- a **prior** p(y | x) for every entry, :func:`label_prior`: the logit blend of a model's out-of-fold
  probabilities (what the noisy labels taught it, weight ¾) and LSNPC's correction of them (¼), blended
  in turn with how often the row's nearest neighbours in feature space were given each label
  (:func:`neighbour_label_rates`; wrong labels are scattered, so a label most of a row's neighbours were
  given is likely right whatever the row was given). The neighbours' share is chosen per data set as
  the one that best predicts the given labels (:func:`choose_neighbour_weight`). For the scores, the
  row's other given labels add their say: how much more often label k goes with them than k's overall
  rate, in log-odds (:func:`cooccurrence_lift`; never negative, zero without another given label),
  with a weight chosen together with the neighbours' share (:func:`choose_prior_weights`). The
  neighbours' rates and the co-occurrences are rates of noisy labels: they sharpen the ranking, but a
  relabelling with them moves fewer wrong labels, so :meth:`lsnpc.LSNPC.correct_labels` calls
  :func:`label_correction` without them;
- a **swap channel** p(ŷ | y), the noise model of the paper's experiments and of annotators who pick a
  wrong class: each true positive k is recorded as the positive j with probability T[k, j]. A given
  positive j therefore came from a true positive k with probability ∝ T[k, j] · odds(prior_k), over
  k = j and the row's given negatives, and a given negative k is truly positive if it was the source
  of one of the row's given positives (:func:`swap_posterior`);
- the **score** reported to users, :func:`label_quality`: the posterior's probability that the given
  label is right, blended (in logits, weight 0.3) with the model's own confidence in it (what
  cleanlab's self-confidence score is), which keeps the ranking sound where the estimated channel
  is wrong.

T is estimated from the data (:func:`swap_transition`): a fixed share ``noise_rate`` of every label
leaves it, and where it goes is read from the rows that were given k and are the most confidently k.
Whatever probability those rows put on labels they were *not* given, relative to how much
unexplained probability each label has on average, is where k's labels went. Masking the given labels
keeps co-occurring true labels out of the estimate (on yeast, 4.2 labels a row, unmasked anchors mostly
measured co-occurrence); the ratio keeps labels that are merely predicted often from looking like
destinations. The measurements behind these choices are in docs/label-issues.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy import sparse
from scipy.special import expit, logit

from .._torch import as_tensor

__all__ = [
    "swap_transition", "neighbour_label_rates", "cooccurrence_lift", "choose_neighbour_weight",
    "choose_prior_weights", "label_prior", "swap_posterior", "swap_relabel", "label_posterior", "label_quality",
    "label_correction", "review",
]

_EPS = 1e-6
# entries of the (given positives × labels) source matrix built at once: bounds memory to ~64 MB
_CHUNK_ENTRIES = 8_000_000

BALANCE_CANDIDATES = 8
"""Sources weighed per given positive when :func:`swap_relabel` balances the labels' counts."""

NOISE_RATE = 0.45
"""The share of every label's positives the channel moves: the uninformed guess between the 30% and 50% of
the benchmarks. It sets how readily labels are moved (:func:`label_correction`), hardly the ranking."""
ANCHOR_SHARE = 0.1
MIN_ANCHORS = 20
SHARPNESS = 2.0
CORRECTED_WEIGHT = 0.25
SELF_CONFIDENCE_WEIGHT = 0.3
NEIGHBOURS = 50
"""Neighbours whose given labels enter the prior (:func:`neighbour_label_rates`)."""
NEIGHBOUR_WEIGHTS = tuple(i / 10 for i in range(11))
"""The neighbours' shares of the prior's logit that :func:`choose_prior_weights` tries."""
COOCCURRENCE_WEIGHTS = tuple(i / 10 for i in range(31))
"""The weights of the co-occurrence lift in the prior's logit that :func:`choose_prior_weights` tries."""
COOCCURRENCE_SMOOTHING = 2.0
"""Rows' worth of a label's overall rate added to its co-occurrence counts (:func:`cooccurrence_lift`)."""
_WEIGHT_ENTRIES = 4_000_000  # entries (rows × labels; a fixed sample of rows beyond) the weights are chosen on


def swap_transition(
    labels: np.ndarray,
    pred_probs: np.ndarray,
    *,
    noise_rate: float = NOISE_RATE,
    anchor_share: float = ANCHOR_SHARE,
    min_anchors: int = MIN_ANCHORS,
    sharpness: float = SHARPNESS,
) -> np.ndarray:
    """The swap channel's T (L, L): T[k, k] = 1 − ``noise_rate``, and the rest of row k where k's labels go.

    labels: given 0/1 (n, L); pred_probs: out-of-fold probabilities (n, L). The anchors of k are the
    rows given k with the highest ``pred_probs[:, k]`` — the top ``anchor_share`` of them, at least
    ``min_anchors`` (all of them when fewer). U = pred_probs · (1 − labels) is the probability a row puts
    on labels it was not given; row k of T off the diagonal is ∝ (mean U over k's anchors / mean U over
    all rows) ** ``sharpness``, both means with a tenth of the average label's mean U added so a label
    the model hardly ever predicts cannot dominate. A label no row was given moves uniformly.
    """
    n_labels = labels.shape[1]
    if n_labels == 1:
        return np.ones((1, 1))
    unexplained = pred_probs * (1 - labels)
    baseline = unexplained.mean(0)
    smooth = 0.1 * baseline.mean() + 1e-12

    rows, cols = np.nonzero(labels)
    order = np.lexsort((-pred_probs[rows, cols], cols))  # by label, most confident first
    rows, cols = rows[order], cols[order]
    counts = np.bincount(cols, minlength=n_labels)
    rank = np.arange(len(cols)) - np.repeat(np.cumsum(counts) - counts, counts)
    n_anchors = np.minimum(counts, np.maximum(min_anchors, np.ceil(anchor_share * counts))).astype(np.int64)
    keep = rank < n_anchors[cols]
    select = sparse.csr_matrix((1.0 / n_anchors[cols[keep]], (cols[keep], rows[keep])),
                               shape=(n_labels, labels.shape[0]))
    lift = ((select @ unexplained + smooth) / (baseline + smooth)) ** sharpness  # (L, L)
    lift[counts == 0] = 1.0
    np.fill_diagonal(lift, 0.0)
    T = noise_rate * lift / lift.sum(1, keepdims=True)
    np.fill_diagonal(T, 1.0 - noise_rate)
    return T


def neighbour_label_rates(
    features: np.ndarray, labels: np.ndarray, *, n_neighbors: int = NEIGHBOURS, device: Any = None
) -> np.ndarray:
    """How often each label was given to each row's nearest neighbours (n, L) float64 in (0, 1).

    features: (n, d) the rows' features; labels: the given 0/1 labels (n, L). Neighbours by cosine
    similarity of the standardised features (each feature centred and scaled to unit variance, a constant
    one left as is), the row itself excluded, ``n_neighbors`` of them (all other rows when there are
    fewer). The rate is smoothed towards the label's overall rate with the weight of two neighbours:
    (given among the k + 2 · rate) / (k + 2), the counts one sparse (n × n, k per row) by dense (n × L)
    product, so memory stays n · L (the (n, k, L) gather it replaced took 6 GB on delicious' 12,920 rows
    and 983 labels).

    The search is exact. On the CPU (``device`` None or a CPU): Euclidean distance between the rows
    scaled to unit length (the same order as cosine similarity, and scikit-learn's fast chunked path,
    3× its cosine one); time grows as n² d — 0.3 s for 4,000 × 500, 4 s for 20,000 × 512, 92 s for
    100,000 × 512 on two cores. On a CUDA ``device`` (a torch device or its name): cosine similarities
    in float32, in row blocks of at most 256 MB, and ``topk`` there (docs/label-issues.md: the speed on
    an H100); a neighbour at a near-tie with the k-th may differ from the CPU's choice.
    """
    from sklearn.preprocessing import StandardScaler, normalize

    n = len(labels)
    k = min(int(n_neighbors), n - 1)
    if k < 1:
        raise ValueError(f"neighbour_label_rates needs at least 2 rows, got {n}")
    X = normalize(StandardScaler().fit_transform(np.asarray(features, dtype=np.float64).reshape(n, -1)))
    if device is not None and torch.device(device).type == "cuda":
        neighbours = _torch_neighbours(X, k, torch.device(device))
    else:
        from sklearn.neighbors import NearestNeighbors

        index = NearestNeighbors(n_neighbors=k, metric="euclidean", algorithm="brute").fit(X)
        neighbours = index.kneighbors(return_distance=False)  # without a query: each row's own index left out
    given = labels.astype(np.float64)
    adjacency = sparse.csr_matrix((np.ones(n * k), neighbours.reshape(-1), np.arange(0, n * k + 1, k)), shape=(n, n))
    return (adjacency @ given + 2 * given.mean(0)) / (k + 2)


_BLOCK_BYTES = 256 * 2**20  # the similarity block of the GPU search


def _torch_neighbours(X: np.ndarray, k: int, device: torch.device) -> np.ndarray:
    """The k most cosine-similar other rows of each row (n, k) int64, rows of ``X`` (n, d) unit length; on
    ``device``, blocks of rows against all rows, nothing but the indices copied back. (Any torch device;
    the library calls it for CUDA ones, the tests on the CPU too.)"""
    n = len(X)
    rows = as_tensor(X, dtype=torch.float32, device=device)
    out = torch.empty((n, k), dtype=torch.int64, device=device)
    block = max(1, _BLOCK_BYTES // (4 * n))
    for start in range(0, n, block):
        stop = min(n, start + block)
        similarity = rows[start:stop] @ rows.T  # (block, n)
        own = torch.arange(start, stop, device=device)
        similarity[own - start, own] = -torch.inf  # the row itself is no neighbour
        out[start:stop] = similarity.topk(k, dim=1, sorted=False).indices
    return out.cpu().numpy()


def _clipped_logit(p: np.ndarray) -> np.ndarray:
    return logit(np.clip(p.astype(np.float64), _EPS, 1 - _EPS))


def choose_neighbour_weight(labels: np.ndarray, model_logits: np.ndarray, neighbour_rates: np.ndarray) -> float:
    """The neighbours' share b of the prior's logit, (1 − b) · model_logits + b · logit(neighbour_rates):
    of :data:`NEIGHBOUR_WEIGHTS`, the one whose prior predicts the given ``labels`` best — the prior of
    :func:`choose_prior_weights` without the co-occurrence lift. All arrays (n, L).

    Where wrong labels do not depend on the features (the benchmarks' simulated noise), the mixture that
    best predicts the given labels also ranks the true ones best: neighbours in a space where similar
    rows share labels earn a large share (0.8–0.9 on scene and tmc2007-500, 0.5–0.7 on yeast),
    bag-of-words features a small one (0.2–0.4 on bibtex and delicious; on delicious a fixed 0.8 ranked
    worse than no neighbours at all).
    """
    return choose_prior_weights(labels, model_logits, _clipped_logit(neighbour_rates))[0]


def choose_prior_weights(labels: np.ndarray, model_logits: np.ndarray, neighbour_logits: np.ndarray | None,
                         lift: np.ndarray | None = None) -> tuple[float, float]:
    """The prior's weights (b, c) for (1 − b) · model_logits + b · neighbour_logits + c · lift: of
    :data:`NEIGHBOUR_WEIGHTS` × :data:`COOCCURRENCE_WEIGHTS` (b = 0 without neighbours, c = 0 without a
    lift), the pair whose prior predicts the given ``labels`` best (mean binary cross-entropy; ties to the
    smaller b, then the smaller c). All arrays (n, L); beyond 4 M entries a fixed sample of the rows.

    The likelihood of *noisy* labels is a fair judge of parts that do not see them (the model, the
    neighbours: simulated noise does not depend on x). The lift is built from the given labels, but only
    from the row's *other* labels and the other rows' counts, and it can only raise a label: a part that
    could lower labels, or shrink the model's logits towards each label's rate, was rewarded for
    predicting the noise (docs/label-issues.md).
    """
    b_grid = NEIGHBOUR_WEIGHTS if neighbour_logits is not None else (0.0,)
    c_grid = COOCCURRENCE_WEIGHTS if lift is not None else (0.0,)
    return _choose_weights(labels, model_logits, neighbour_logits, lift, b_grid, c_grid)


def _choose_weights(labels: np.ndarray, model_logits: np.ndarray, neighbour_logits: np.ndarray | None,
                    lift: np.ndarray | None, b_grid: tuple[float, ...], c_grid: tuple[float, ...]
                    ) -> tuple[float, float]:
    """:func:`choose_prior_weights` over the given grids (a one-value grid fixes that weight)."""
    if len(b_grid) == 1 and len(c_grid) == 1:
        return b_grid[0], c_grid[0]
    n, n_labels = labels.shape
    rows = np.arange(n)
    if n * n_labels > _WEIGHT_ENTRIES:
        rows = np.sort(np.random.default_rng(0).choice(n, max(1, _WEIGHT_ENTRIES // n_labels), replace=False))
    # −log σ(m) for a given positive, −log σ(−m) for a negative: softplus(−s m), s = ±1, signs applied once
    flip = torch.as_tensor(np.where(labels[rows] == 1, -1.0, 1.0))
    model = flip * torch.as_tensor(model_logits[rows], dtype=torch.float64)
    neighbours, raise_ = (None if a is None else flip * torch.as_tensor(a[rows], dtype=torch.float64)
                          for a in (neighbour_logits, lift))
    best = (np.inf, b_grid[0], c_grid[0])
    for b in b_grid:
        mixed = model if neighbours is None or b == 0.0 else torch.lerp(model, neighbours, b)

        @functools.cache
        def loss(i: int, mixed: torch.Tensor = mixed) -> float:
            signed = mixed if raise_ is None or c_grid[i] == 0.0 else mixed + c_grid[i] * raise_
            return float(torch.nn.functional.softplus(signed, threshold=50.0).mean())

        i = _first_minimum(loss, len(c_grid))
        if loss(i) < best[0]:
            best = (loss(i), b, c_grid[i])
    return best[1], best[2]


def _first_minimum(loss: Callable[[int], float], n: int) -> int:
    """The first minimum of a convex sequence loss(0), …, loss(n − 1), by bisection on where it stops
    falling (5 steps for 31 points, not 31 losses). The prior's loss is convex in the lift's weight: a
    logistic loss of a logit affine in it."""
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if loss(mid + 1) < loss(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def cooccurrence_lift(labels: np.ndarray, *, smoothing: float = COOCCURRENCE_SMOOTHING) -> np.ndarray:
    """How much the row's other given labels raise each label, in log-odds: (n, L), ≥ 0.

    r[i, k] is the mean over the row's other given positives j of P(k | j), counted over the other rows
    (row i itself left out) with ``smoothing`` rows at k's overall rate π_k added to each count; the lift
    is logit(max(r, π_k)) − logit(π_k). It is zero where the row has no given label besides k and where
    the row's labels go with k no more often than chance. It is never negative: on data whose rows carry
    one label (scene), the wrong label that replaced a true one never co-occurs with it, and a lift
    allowed to be negative ranked the missing true label *down* (docs/label-issues.md). Labels in the
    rows of a tag-like data set go together (delicious: 19 a row), and there the lift finds the missing
    ones.

    Time and memory: two products of the (sparse) labels with (L, L) float64 matrices (8 L² bytes each:
    7.7 MB for delicious' 983 labels, 800 MB for 10,000); the output is dense (n, L).
    """
    given = np.asarray(labels, dtype=np.float64)
    n, n_labels = given.shape
    Y = sparse.csr_matrix(given)
    counts = (Y.T @ Y).toarray()  # N[j, k]: rows given both
    count = np.diag(counts).copy()
    rate = (count + 0.5) / (n + 1.0)
    # a row given j sees j's other rows: N_j − 1 of them, and N_jk less its own k
    others = np.maximum(count - 1.0 + smoothing, 1e-12)
    conditional = (counts + smoothing * rate[None, :]) / others[:, None]  # M[j, k] ≈ P(k | j)
    inverse = 1.0 / others
    summed = np.asarray(Y @ conditional)  # Σ_{j given} M[j, k]
    own = np.asarray(Y @ inverse).reshape(-1, 1)  # Σ_{j given} 1 / (N_j − 1 + s)
    # leave out j = k (a given k is not its own evidence) and the row's own count in N_jk (1 where k is given)
    summed -= given * np.diag(conditional)[None, :] + given * (own - given * inverse[None, :])
    n_other = given.sum(1, keepdims=True) - given
    mean = np.where(n_other > 0, summed / np.maximum(n_other, 1.0), rate[None, :])
    floor = np.clip(np.broadcast_to(rate, mean.shape), _EPS, 1 - _EPS)
    return logit(np.clip(np.maximum(mean, rate[None, :]), _EPS, 1 - _EPS)) - logit(floor)


def label_prior(pred_probs: np.ndarray, corrected: np.ndarray, neighbour_rates: np.ndarray | None = None, *,
                labels: np.ndarray | None = None, corrected_weight: float = CORRECTED_WEIGHT,
                neighbour_weight: float | str = "auto", cooccurrence_weight: float | str | None = None) -> np.ndarray:
    """p(y = 1 | x) (n, L): the logit blend m = (1 − w) · logit(pred_probs) + w · logit(corrected),
    w = ``corrected_weight``; with ``neighbour_rates`` (:func:`neighbour_label_rates`, (n, L)) blended in
    turn, (1 − b) · m + b · logit(neighbour_rates), b = ``neighbour_weight``; with a
    ``cooccurrence_weight`` c, plus c · :func:`cooccurrence_lift` of the given ``labels``. "auto" weights
    are chosen together by :func:`choose_prior_weights` from the given ``labels`` (then required, (n, L)
    0/1); None leaves the co-occurrence out."""
    return expit(_prior_logit(pred_probs, corrected, neighbour_rates, labels=labels, corrected_weight=corrected_weight,
                              neighbour_weight=neighbour_weight, cooccurrence_weight=cooccurrence_weight))


def _weight_grid(name: str, weight: float | str, grid: tuple[float, ...]) -> tuple[float, ...]:
    if weight == "auto":
        return grid
    if isinstance(weight, str) or not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] or 'auto', got {weight!r}")
    return (float(weight),)


def _prior_logit(pred_probs: np.ndarray, corrected: np.ndarray, neighbour_rates: np.ndarray | None, *,
                 labels: np.ndarray | None, corrected_weight: float = CORRECTED_WEIGHT,
                 neighbour_weight: float | str = "auto", cooccurrence_weight: float | str | None = None,
                 model_logit: np.ndarray | None = None) -> np.ndarray:
    """The logit of :func:`label_prior` (n, L); ``model_logit``: its blend without the neighbours, when the
    caller has it (:func:`review`)."""
    b_grid = _weight_grid("neighbour_weight", neighbour_weight, NEIGHBOUR_WEIGHTS)
    c_grid = (0.0,) if cooccurrence_weight is None else _weight_grid(
        "cooccurrence_weight", cooccurrence_weight, COOCCURRENCE_WEIGHTS)
    if neighbour_rates is None:
        b_grid = (0.0,)
    if labels is None and (len(b_grid) > 1 or cooccurrence_weight is not None):
        what = "the co-occurrence" if cooccurrence_weight is not None else "neighbour_weight='auto'"
        raise ValueError(f"label_prior needs the given labels for {what}")
    mixed = model_logit
    if mixed is None:
        mixed = (1 - corrected_weight) * _clipped_logit(pred_probs) + corrected_weight * _clipped_logit(corrected)
    neighbours = None if neighbour_rates is None else _clipped_logit(neighbour_rates)
    lift = None if cooccurrence_weight is None else cooccurrence_lift(labels)  # type: ignore[arg-type]
    b, c = _choose_weights(labels, mixed, neighbours, lift, b_grid, c_grid)  # type: ignore[arg-type]
    out = mixed if neighbours is None or b == 0.0 else (1 - b) * mixed + b * neighbours
    return out if lift is None or c == 0.0 else out + c * lift


def _source_chunks(labels: np.ndarray, prior: np.ndarray, transition: np.ndarray):
    """Yield (rows, cols, source) per chunk of given positives: source[e, k] = P(true k produced the given
    positive (rows[e], cols[e])), over k = cols[e] and the row's given negatives. Positives come in row
    order."""
    p = np.clip(prior.astype(np.float64), _EPS, 1 - _EPS)
    odds = p / (1 - p)
    negative_odds = odds * (1 - labels)  # odds_k where k is a given negative, else 0 (n, L)
    into = np.ascontiguousarray(transition.T)  # into[j, k] = T[k, j]: rows gathered, not columns
    rows, cols = np.nonzero(labels)
    step = max(1, _CHUNK_ENTRIES // labels.shape[1])
    for start in range(0, len(rows), step):
        r, c = rows[start : start + step], cols[start : start + step]
        weight = into[c] * negative_odds[r]  # (chunk, L): T[k, j] odds_k, k negative
        weight[np.arange(len(r)), c] = transition[c, c] * odds[r, c]
        yield r, c, weight / weight.sum(1, keepdims=True)


def swap_posterior(labels: np.ndarray, prior: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """P(true label = 1 | prior, given labels) per entry under the swap channel ``transition`` (n, L).

    labels: given 0/1 (n, L); prior: p(y = 1 | x) (n, L); transition: T[k, j] = p(given j | true k).
    Given positive (i, j): the chance it is its own source, T[j, j] odds_ij / Σ_k T[k, j] odds_ik over
    k ∈ {j} ∪ the row's given negatives (another given positive is taken to be its own source).
    Given negative (i, k): 1 − Π_j (1 − P(k is the source of j)) over the row's given positives j.
    """
    log_not_source = np.zeros(labels.shape)
    stays: list[np.ndarray] = []
    for r, c, source in _source_chunks(labels, prior, transition):
        stays.append(source[np.arange(len(r)), c])
        # add each row's terms in the order np.add.at would (it took 1.6 s on delicious), the j-th
        # positives of the chunk's rows at once: a row's positives are consecutive, so within one j no
        # row repeats and fancy indexing adds each term once
        terms = np.log1p(-np.minimum(source, 1 - 1e-12))
        rank = np.arange(len(r)) - np.searchsorted(r, r, side="left")  # j: the positive's place in its row
        for j in range(int(rank.max()) + 1):
            at = np.flatnonzero(rank == j)
            log_not_source[r[at]] += terms[at]
    posterior = -np.expm1(log_not_source)
    posterior[np.nonzero(labels)] = np.concatenate(stays) if stays else []
    return posterior


def swap_relabel(labels: np.ndarray, prior: np.ndarray, transition: np.ndarray, *, balance: bool = True
                 ) -> np.ndarray:
    """The suggested true labels (n, L) 0/1: every given positive replaced by one source.

    A positive judged wrong is moved to the label it likely came from, not just removed, so a row keeps
    its number of positives (unless two positives share a source). ``balance=False``: each goes to its
    most likely source. That argmax shrinks rare labels: the source weights carry the prior's odds, so
    a rare label's positives move to frequent labels and almost none move in (a generated 19-label
    problem: ten of its rarest labels lost 6–18 positives each and got at most one back; docs/label-issues.md).
    ``balance=True`` (the default) gives every label room for the count the posterior expects,
    Σ over the given positives of P(source = k), rounded up; the (positive, source) pairs are taken from
    the most likely down, each positive to the first of its sources that still has room. A positive
    leaves its label only for a source likely enough to win a place, and no label ends above its
    expected count (+ 1) but through a positive whose candidates are all full (rare: it keeps its most
    likely source). Only each positive's ``BALANCE_CANDIDATES`` most likely sources are weighed.
    """
    out = np.zeros(labels.shape, dtype=np.int64)
    if not balance:
        for r, _, source in _source_chunks(labels, prior, transition):
            out[r, source.argmax(1)] = 1
        return out
    n_labels = labels.shape[1]
    top = min(BALANCE_CANDIDATES, n_labels)
    rows, candidates, chances = [], [], []
    for r, _, source in _source_chunks(labels, prior, transition):
        best = np.argpartition(-source, top - 1, axis=1)[:, :top]
        rows.append(r)
        candidates.append(best)
        chances.append(np.take_along_axis(source, best, 1))
    if not rows:
        return out
    r, candidates, probs = np.concatenate(rows), np.concatenate(candidates), np.concatenate(chances)
    # room per label: the count the posterior expects, rounded up (about as many places as positives:
    # only the sources beyond each positive's top candidates are left out)
    room = np.ceil(np.bincount(candidates.ravel(), weights=probs.ravel(), minlength=n_labels) - 1e-9)
    choice = np.full(len(r), -1)
    left = len(r)
    # the (positive, source) pairs from the most to the least likely; each positive takes the first
    # source that still has room (a stable sort: ties keep the candidates' order)
    for flat in np.argsort(-probs.ravel(), kind="stable"):
        e, k = divmod(int(flat), top)
        label = candidates[e, k]
        if choice[e] < 0 and room[label] >= 1:
            choice[e] = label
            room[label] -= 1
            left -= 1
            if not left:
                break
    unplaced = choice < 0  # every candidate full (sources beyond the top ones): the most likely one
    choice[unplaced] = candidates[unplaced, np.argmax(probs[unplaced], 1)]
    out[r, choice] = 1
    return out


def label_posterior(labels: np.ndarray, pred_probs: np.ndarray, corrected: np.ndarray,
                    neighbour_rates: np.ndarray | None = None, *, noise_rate: float = NOISE_RATE,
                    cooccurrence: bool = True) -> np.ndarray:
    """P(y = 1 | x, ŷ = labels) (n, L) from the out-of-fold ``pred_probs``, LSNPC's ``corrected``
    probabilities and the neighbours' ``neighbour_rates`` (all (n, L); the last optional): the channel of
    :func:`swap_transition` over the prior of :func:`label_prior`, with the row's other labels'
    :func:`cooccurrence_lift` unless ``cooccurrence=False`` (weights chosen by the likelihood)."""
    transition = swap_transition(labels, pred_probs, noise_rate=noise_rate)
    prior = label_prior(pred_probs, corrected, neighbour_rates, labels=labels,
                        cooccurrence_weight="auto" if cooccurrence else None)
    return swap_posterior(labels, prior, transition)


def label_quality(labels: np.ndarray, pred_probs: np.ndarray, corrected: np.ndarray,
                  neighbour_rates: np.ndarray | None = None, *, noise_rate: float = NOISE_RATE,
                  self_confidence_weight: float = SELF_CONFIDENCE_WEIGHT, cooccurrence: bool = True) -> np.ndarray:
    """How likely each given label is right (n, L) in [0, 1]; low = likely wrong.

    The logit blend of the posterior's P(y = given) (:func:`label_posterior`, weight 1 − w) and the
    model's own P(y = given) from ``pred_probs`` (w = ``self_confidence_weight``).
    """
    posterior = label_posterior(labels, pred_probs, corrected, neighbour_rates, noise_rate=noise_rate,
                                cooccurrence=cooccurrence)
    return _quality(labels, pred_probs, posterior, self_confidence_weight)


def _quality(labels: np.ndarray, pred_probs: np.ndarray, posterior: np.ndarray, self_confidence_weight: float
             ) -> np.ndarray:
    """:func:`label_quality` from the posterior (n, L)."""
    agree = np.clip(np.where(labels == 1, posterior, 1 - posterior), _EPS, 1 - _EPS)
    confidence = np.clip(np.where(labels == 1, pred_probs, 1 - pred_probs).astype(np.float64), _EPS, 1 - _EPS)
    return expit((1 - self_confidence_weight) * logit(agree) + self_confidence_weight * logit(confidence))


def label_correction(labels: np.ndarray, pred_probs: np.ndarray, corrected: np.ndarray,
                     neighbour_rates: np.ndarray | None = None, *, noise_rate: float = NOISE_RATE) -> np.ndarray:
    """The suggested labels (n, L) 0/1: :func:`swap_relabel` with the prior and channel of
    :func:`label_posterior` (same arguments)."""
    transition = swap_transition(labels, pred_probs, noise_rate=noise_rate)
    return swap_relabel(labels, label_prior(pred_probs, corrected, neighbour_rates, labels=labels), transition)


def review(labels: np.ndarray, pred_probs: np.ndarray, corrected: np.ndarray,
           neighbour_rates: np.ndarray | None = None, *, noise_rate: float = NOISE_RATE,
           self_confidence_weight: float = SELF_CONFIDENCE_WEIGHT, cooccurrence: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`label_quality` (n, L) with ``neighbour_rates`` and the co-occurrence, :func:`label_correction`
    (n, L) without either), the same numbers as the two calls, from one channel T and one logit blend of
    the model's probabilities (each call estimates both again: 1 s of a 19 s review on delicious)."""
    transition = swap_transition(labels, pred_probs, noise_rate=noise_rate)
    model = _prior_logit(pred_probs, corrected, None, labels=labels)
    suggested = swap_relabel(labels, expit(model), transition)
    prior = expit(_prior_logit(pred_probs, corrected, neighbour_rates, labels=labels, model_logit=model,
                               cooccurrence_weight="auto" if cooccurrence else None))
    scores = _quality(labels, pred_probs, swap_posterior(labels, prior, transition), self_confidence_weight)
    return scores, suggested
