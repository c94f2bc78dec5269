"""Relative positional encodings: Horn et al. S1 (rotation) and S2 (clipped distances), exact Toeplitz-FFT RPE,
and FourierLearner (FLT) masks from their Fourier spectra."""

__all__: list[str] = []
