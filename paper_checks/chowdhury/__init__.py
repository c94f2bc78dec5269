"""Claims of Chowdhury et al., Learning the Transformer Kernel (ids kl.*); importing the package registers all
of them (``tests/paper_checks/test_claims.py`` checks that every module is listed here)."""

from . import complexity, eq1, experiments, fastfood, features, generative, gmm, theorem3, turing

__all__ = ["complexity", "eq1", "experiments", "fastfood", "features", "generative", "gmm", "theorem3",
           "turing"]
