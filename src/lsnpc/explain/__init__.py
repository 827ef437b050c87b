"""What a CNN-based base model and LSNPC's correction look at: GradCAM maps and the paper's figure 5.

- :func:`classifier_cams`: GradCAM of a base classifier over a CNN (e.g. MLP_r over ResNet-50).
- :func:`corrected_cams`: GradCAM of LSNPC's corrected probabilities, when LSNPC's data encoder is a
  (fine-tuned) copy of that CNN (``LSNPC(encoder=...)``), with the model's own fixed Monte-Carlo draws.
- :func:`gradcam_figure`: the paper's figure 5, a column per image, the base model's map above LSNPC's, the
  labels marked as the paper marks them (:func:`label_marks`), saved atomically.
- :func:`collapse_message`: why a correction explains nothing (the same probability for every label).
- :func:`grad_cam`: the method itself for any score function and layer; :func:`resnet_backbone`:
  a torchvision ResNet as one module over images.
- :func:`plot_training`: a fit's training curve (loss and the score that chose the epoch, the epoch
  kept marked), from a fitted LSNPC or its ``history_``.

This package imports the corrector and torch; nothing in lsnpc imports it except the command line
and the experiments.
"""

from .figure import LabelMark, gradcam_figure, label_marks
from .gradcam import (
    classifier_cams,
    collapse_message,
    corrected_cams,
    corrected_probabilities,
    grad_cam,
    resnet_backbone,
)
from .training_curve import plot_training

__all__ = [
    "LabelMark",
    "classifier_cams",
    "collapse_message",
    "corrected_cams",
    "corrected_probabilities",
    "grad_cam",
    "gradcam_figure",
    "label_marks",
    "plot_training",
    "resnet_backbone",
]
