"""NumPy-only edge of :mod:`refattn.rpe.toeplitz`: the NumPy/SciPy fast path of the Toeplitz FFT RPE.

``scipy.fft`` real FFTs (``workers`` threads) along the contiguous last axis of per-head ``(ca, e, N)``
blocks: ``ca`` features and all ``e = d_v + 1`` value columns of one head per call, the sequence written
into a zero-padded buffer that is reused, ``N = next_fast_len(2L - 1, real=True)``. Taken by
``toeplitz_attention_fwd`` and ``_bwd`` for NumPy inputs; every other namespace takes the array-API path in
``toeplitz.py``, and the tests check that both give the same result and gradients. Axes as in
``toeplitz.py``; ``B`` = flattened batch.

Threads: with ``w`` workers (SciPy's count; None reads ``scipy.fft.get_workers()``) and ``B >= 2`` heads, the
heads are spread over ``min(w, B)`` threads (each head is independent and writes its own slice of the
outputs; NumPy and pocketfft release the GIL), every FFT inside a thread with ``w // min(w, B)`` workers:
the elementwise work between the FFTs then runs in parallel too (BENCHMARKS.md, horn-rpe). With one head the
workers go to the FFTs. Results do not depend on the count.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["fast_len", "kernel_spectrum", "numer", "grads", "correlation"]


def _sfft():
    """``scipy.fft``, imported on first use: with the ``scipy.special`` it loads it was about 40 % of the time
    of ``import refattn``, which every process pays, and only this path needs it."""
    import scipy.fft

    return scipy.fft


def fast_len(L: int) -> int:
    """FFT size for a linear convolution of length-L signals with a (2L - 1)-tap kernel."""
    return _sfft().next_fast_len(2 * L - 1, real=True)


def kernel_spectrum(h):
    """``rfft`` of the wrapped kernel ``h: (*c, N)`` -> ``(*c, F)``."""
    return _sfft().rfft(h, axis=-1)


def correlation(corr_hat, n_fft, workers):
    """Inverse real FFT of the summed cross-spectrum: ``(..., F)`` -> ``(..., N)``."""
    return _sfft().irfft(corr_hat, n=n_fft, axis=-1, workers=workers)


def _thread_plan(workers, B):
    """``(head_threads, fft_workers)`` for `workers` (SciPy's convention) and `B` heads."""
    w = _sfft().get_workers() if workers is None else workers
    w = w if w > 0 else max(1, (os.cpu_count() or 1) + 1 + w)                       # -1: every CPU
    threads = max(1, min(w, B))
    return threads, max(1, w // threads)


def _over_heads(fn, B, threads):
    """``fn(b, slot)`` for every head ``b`` (``slot``: the thread's buffer index), on `threads` threads."""
    if threads == 1:
        for b in range(B):
            fn(b, 0)
        return

    def run(slot):
        for b in range(slot, B, threads):
            fn(b, slot)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for f in [pool.submit(run, slot) for slot in range(threads)]:
            f.result()                                                             # re-raises a failure


def _heads(x, batch, tail):
    """NumPy view/broadcast of `x` as ``(B, *tail)`` over the flattened batch axes."""
    return np.broadcast_to(x, batch + tail).reshape((-1,) + tail)


def numer(phi_q, phi_k, v_aug, h_hat, n_fft, ca, workers):
    """NumPy/SciPy version of ``toeplitz._numer_generic`` (same result to rounding), heads over threads."""
    batch, (L, m), e = tuple(phi_q.shape[:-2]), phi_q.shape[-2:], v_aug.shape[-1]
    F, fft = n_fft // 2 + 1, _sfft()
    pq, pk = _heads(phi_q, batch, (L, m)), _heads(phi_k, batch, (L, m))           # (B, L, m)
    va = _heads(v_aug, batch, (L, e))                                              # (B, L, e)
    hh = _heads(h_hat, batch, (F,))                                                # (B, F) complex
    numer = np.empty((pq.shape[0], e, L), dtype=v_aug.dtype)                       # (B, e, L)
    threads, w = _thread_plan(workers, pq.shape[0])
    Us = np.zeros((threads, ca, e, n_fft), dtype=v_aug.dtype)                      # (ca, e, N) per thread

    def head(b, slot):
        U = Us[slot]                                                               # zero tail kept
        # contiguous transposes: the outer products below then stream along L instead of striding
        vT, qT, kT = (np.ascontiguousarray(x[b].T) for x in (va, pq, pk))          # (e, L), (m, L), (m, L)
        acc = numer[b]                                                             # (e, L)
        acc[...] = 0
        for a0 in range(0, m, ca):
            n = min(m, a0 + ca) - a0
            np.multiply(kT[a0:a0 + n, None, :], vT, out=U[:n, :, :L])              # (n, e, L) U_j,ae
            U_hat = fft.rfft(U[:n], axis=-1, workers=w)                           # (n, e, F)
            U_hat *= hh[b]                                                         # Toeplitz = circular conv
            T = fft.irfft(U_hat, n=n_fft, axis=-1, workers=w, overwrite_x=True)   # (n, e, N)
            acc += np.einsum("aei,ai->ei", T[:, :, :L], qT[a0:a0 + n])             # (e, L) sum_a q_ia T_aei

    _over_heads(head, pq.shape[0], threads)
    return np.swapaxes(numer, -1, -2).reshape(batch + (L, e))                      # (..., L, e)


def grads(g, c):
    """NumPy/SciPy version of ``toeplitz._grads_generic``, heads over threads."""
    batch, (L, m), e = tuple(c.phi_q.shape[:-2]), c.phi_q.shape[-2:], c.v_aug.shape[-1]
    N, F, ca, fft = c.n_fft, c.n_fft // 2 + 1, c.chunk, _sfft()
    pq, pk = _heads(c.phi_q, batch, (L, m)), _heads(c.phi_k, batch, (L, m))       # (B, L, m)
    va, gg = _heads(c.v_aug, batch, (L, e)), _heads(g, batch, (L, e))              # (B, L, e)
    hh = _heads(c.h_hat, batch, (F,))                                              # (B, F)
    B, dt = pq.shape[0], c.v_aug.dtype
    dq, dk = np.empty((B, m, L), dtype=dt), np.empty((B, m, L), dtype=dt)          # (B, m, L)
    dva = np.zeros((B, e, L), dtype=dt)                                            # (B, e, L)
    corr_hat = np.zeros((B, F), dtype=hh.dtype)                                    # (B, F)
    threads, w = _thread_plan(c.workers, B)
    bufs = np.zeros((threads, 2, ca, e, N), dtype=dt)                              # U, dT per thread

    def head(b, slot):
        U, dT = bufs[slot]                                                         # (ca, e, N) zero tails
        vT, gT, qT, kT = (np.ascontiguousarray(x[b].T) for x in (va, gg, pq, pk))  # (e|m, L) contiguous
        for a0 in range(0, m, ca):
            n = min(m, a0 + ca) - a0
            np.multiply(kT[a0:a0 + n, None, :], vT, out=U[:n, :, :L])              # (n, e, L)
            np.multiply(qT[a0:a0 + n, None, :], gT, out=dT[:n, :, :L])             # (n, e, L) dT = phi_q g
            U_hat = fft.rfft(U[:n], axis=-1, workers=w)                           # (n, e, F)
            dT_hat = fft.rfft(dT[:n], axis=-1, workers=w)                         # (n, e, F)
            corr_hat[b] += (dT_hat * U_hat.conj()).reshape(-1, F).sum(axis=0)     # (F,) sum over channels
            U_hat *= hh[b]
            T = fft.irfft(U_hat, n=N, axis=-1, workers=w, overwrite_x=True)[:, :, :L]  # (n, e, L) recomputed
            dT_hat *= hh[b].conj()                                               # adjoint: conjugate spectrum
            dU = fft.irfft(dT_hat, n=N, axis=-1, workers=w, overwrite_x=True)[:, :, :L]  # (n, e, L) C^T dT
            # einsum contracts without forming the (n, e, L) product temporaries
            dq[b, a0:a0 + n] = np.einsum("aei,ei->ai", T, gT)                      # sum_e g_ie T_aei
            dk[b, a0:a0 + n] = np.einsum("aej,ej->aj", dU, vT)                     # sum_e dU_aej v_aug_je
            dva[b] += np.einsum("aej,aj->ej", dU, kT[a0:a0 + n])                   # sum_a dU_aej phi_k_ja

    _over_heads(head, B, threads)

    def back(x, k):                                                                # (B, k, L) -> (..., L, k)
        return np.swapaxes(x, -1, -2).reshape(batch + (L, k))

    return back(dq, m), back(dk, m), back(dva, e), corr_hat.reshape(batch + (F,))
