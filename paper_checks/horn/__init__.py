"""Claims of Horn et al., Translational Equivariance in Kernelizable Attention (one module per topic)."""
