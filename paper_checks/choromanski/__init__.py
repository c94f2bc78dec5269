"""Claims of Choromanski et al., FourierLearner-Transformers (ids flt.*; one module per topic)."""
