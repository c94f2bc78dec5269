"""Claims of Choromanski et al., FourierLearner-Transformers (ids flt.*); importing the package registers all
of them (``tests/paper_checks/test_claims.py`` checks that every module is listed here)."""

from . import algorithm1, concentration, experiments, kernels, local_rpe, unbiased

__all__ = ["algorithm1", "concentration", "experiments", "kernels", "local_rpe", "unbiased"]
