"""Claims of Horn et al., Translational Equivariance in Kernelizable Attention (ids horn.*); importing the
package registers all of them (``tests/paper_checks/test_claims.py`` checks that every module is listed
here)."""

from . import experiments, favor, lemma1, rpe

__all__ = ["experiments", "favor", "lemma1", "rpe"]
