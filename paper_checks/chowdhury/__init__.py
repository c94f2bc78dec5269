"""Claims of Chowdhury et al., Learning the Transformer Kernel (ids kl.*; one module per topic)."""
