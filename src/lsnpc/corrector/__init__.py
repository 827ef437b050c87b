"""LSNPC, the latent-space-shift corrector, as one subpackage that reads beside section 4 of the paper.

- :mod:`.model`        the generative model and its proposals (section 4.1–4.2)
- :mod:`.objective`    the ELBO terms (eqs. 3, 7, 10, 13)
- :mod:`.config`       the frozen model / training configuration and ``build_model``
- :mod:`.training`     Algorithm 1, the warm start, epoch selection, the flat-buffer AdamW
- :mod:`.inference`    the correction equation (eq. 9), folded for prediction
- :mod:`.guard`        blending the correction with the base model on clean validation evidence
- :mod:`.persistence`  safetensors + JSON save / load
- :mod:`.estimator`    the public :class:`LSNPC` estimator

Imports run one way: estimator → training / inference / guard / persistence → config → model.
"""

from .estimator import LSNPC

__all__ = ["LSNPC"]
