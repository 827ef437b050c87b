"""Retraining on corrected labels (beyond the paper).

:class:`CorrectedLabelsClassifier` wraps any multilabel classifier with ``fit`` / ``predict_proba``: it
corrects the noisy training labels from the classifier's out-of-fold probabilities
(:func:`lsnpc.correct_labels`), retrains a copy on them and, given clean validation rows, keeps whichever
of the model trained on the given labels, the retrained one and each followed by LSNPC scores best there
(:mod:`lsnpc.retrain.selection`), with the numbers that chose it in ``report_``::

    from sklearn.neural_network import MLPClassifier
    from lsnpc import CorrectedLabelsClassifier

    model = CorrectedLabelsClassifier(MLPClassifier(max_iter=500, random_state=0), random_state=0)
    model.fit(X, Y_noisy, X_val=X_val, y_val=Y_val)
    model.predict(X_test)                 # (n, L) 0/1 at model.threshold_
    model.report_.kept, model.labels_     # what was kept; the corrected training labels
"""

from __future__ import annotations

from .estimator import CorrectedLabelsClassifier
from .selection import CANDIDATES, CandidateScore, RetrainReport

__all__ = ["CorrectedLabelsClassifier", "RetrainReport", "CandidateScore", "CANDIDATES"]
