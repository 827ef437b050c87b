"""The posterior of the true labels given the observed ones: p(y | x, ŷ = the given labels).

Beyond the paper (it names correcting training labels as future work). Two pieces:

- a **prior** p(y | x) for every entry: the logit average of a model's out-of-fold probabilities (what
  the noisy labels taught it) and LSNPC's correction of them (what the latent-shift model says the
  true labels are);
- a **swap channel** p(ŷ | y), the noise model of the paper's experiments and of annotators who pick a
  wrong class: each true positive k is recorded as the positive j with probability T[k, j]. A given
  positive j therefore came from a true positive k with probability ∝ T[k, j] · odds(prior_k), over
  k = j and the row's given negatives, and a given negative k is truly positive if it was the source
  of one of the row's given positives.

T is estimated from the data, not assumed: half a symmetric matrix (``noise_rate`` on its
off-diagonal, the uninformed guess) and half the anchor estimate of class-conditional noise (the
rows most confidently predicted as k show, in their probabilities, where k's labels went). The anchor
half finds directed confusions (pairflip noise, where a symmetric T misses most flips); the symmetric
half keeps the estimate stable where co-occurring labels blur the anchors (yeast, 4.2 labels per
row). The measurements behind these choices are in the README (label issues).
"""

from __future__ import annotations

import numpy as np

from ..noise import transition_matrix

__all__ = [
    "anchor_transition", "swap_transition", "combine_priors", "swap_posterior", "swap_relabel", "label_posterior",
    "label_correction",
]

_EPS = 1e-6
# entries of the (given positives × labels) source matrix built at once: bounds memory to ~64 MB
_CHUNK_ENTRIES = 8_000_000


def anchor_transition(pred_probs: np.ndarray, quantile: float = 0.97) -> np.ndarray:
    """T[k, :] ∝ the mean probabilities of the rows in the top ``1 - quantile`` of column k (L, L).

    A row almost surely of class k is predicted, by a model trained on noisy labels, as p(ŷ | y = k):
    row k of the transition matrix (Patrini et al., 2017, anchor points). Rows are normalised to sum 1.
    """
    n_labels = pred_probs.shape[1]
    T = np.empty((n_labels, n_labels))
    cut = np.quantile(pred_probs, quantile, axis=0)
    for k in range(n_labels):
        T[k] = pred_probs[pred_probs[:, k] >= cut[k]].mean(0)
    T = np.clip(T, _EPS, None)
    return T / T.sum(1, keepdims=True)


def swap_transition(pred_probs: np.ndarray, *, noise_rate: float = 0.3, anchor_weight: float = 0.5) -> np.ndarray:
    """The swap channel's T (L, L): ``anchor_weight`` · anchors + the rest · symmetric(``noise_rate``)."""
    n_labels = pred_probs.shape[1]
    if n_labels == 1:
        return np.ones((1, 1))
    symmetric = transition_matrix("symmetric", noise_rate, n_labels)
    return anchor_weight * anchor_transition(pred_probs) + (1 - anchor_weight) * symmetric


def combine_priors(pred_probs: np.ndarray, corrected: np.ndarray) -> np.ndarray:
    """p(y = 1 | x) as the mean of the two logits (a geometric blend of the odds), (n, L)."""
    def logit(p: np.ndarray) -> np.ndarray:
        p = np.clip(p.astype(np.float64), _EPS, 1 - _EPS)
        return np.log(p) - np.log1p(-p)

    return 1.0 / (1.0 + np.exp(-0.5 * (logit(pred_probs) + logit(corrected))))


def _source_chunks(labels: np.ndarray, prior: np.ndarray, transition: np.ndarray):
    """Yield (rows, cols, source) per chunk of given positives: source[e, k] = P(true k produced the given
    positive (rows[e], cols[e])), over k = cols[e] and the row's given negatives."""
    p = np.clip(prior.astype(np.float64), _EPS, 1 - _EPS)
    odds = p / (1 - p)
    rows, cols = np.nonzero(labels)
    step = max(1, _CHUNK_ENTRIES // labels.shape[1])
    for start in range(0, len(rows), step):
        r, c = rows[start : start + step], cols[start : start + step]
        weight = transition[:, c].T * odds[r] * (1 - labels[r])  # (chunk, L): T[k, j] odds_k, k negative
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
        np.add.at(log_not_source, r, np.log1p(-np.minimum(source, 1 - 1e-12)))
    posterior = -np.expm1(log_not_source)
    posterior[np.nonzero(labels)] = np.concatenate(stays) if stays else []
    return posterior


def swap_relabel(labels: np.ndarray, prior: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """The most likely true labels (n, L) 0/1: every given positive replaced by its most likely source.

    A positive judged wrong is moved to the label it most likely came from, not just removed, so a row
    keeps its number of positives (unless two positives share a source).
    """
    out = np.zeros(labels.shape, dtype=np.int64)
    for r, _, source in _source_chunks(labels, prior, transition):
        out[r, source.argmax(1)] = 1
    return out


def label_posterior(
    labels: np.ndarray,
    pred_probs: np.ndarray,
    corrected: np.ndarray,
    *,
    noise_rate: float = 0.3,
    anchor_weight: float = 0.5,
) -> np.ndarray:
    """P(y = 1 | x, ŷ = labels) (n, L) from the out-of-fold ``pred_probs`` and LSNPC's ``corrected``
    probabilities: the swap channel of :func:`swap_transition` over the prior :func:`combine_priors`."""
    transition = swap_transition(pred_probs, noise_rate=noise_rate, anchor_weight=anchor_weight)
    return swap_posterior(labels, combine_priors(pred_probs, corrected), transition)


def label_correction(
    labels: np.ndarray,
    pred_probs: np.ndarray,
    corrected: np.ndarray,
    *,
    noise_rate: float = 0.3,
    anchor_weight: float = 0.5,
) -> np.ndarray:
    """The suggested labels (n, L) 0/1: :func:`swap_relabel` with the prior and channel of
    :func:`label_posterior` (same arguments)."""
    transition = swap_transition(pred_probs, noise_rate=noise_rate, anchor_weight=anchor_weight)
    return swap_relabel(labels, combine_priors(pred_probs, corrected), transition)
