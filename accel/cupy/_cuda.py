"""The CUDA source of the CuPy kernels (compiled once per process through ``cupy.RawModule``, cached on
disk by CuPy), templated on the floating type ``T`` (``float``, ``double``)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["function", "SOURCE", "launch_1d"]

SOURCE = r"""
__device__ inline float ex(float x) { return expf(x); }
__device__ inline double ex(double x) { return exp(x); }
template <typename T> __device__ inline T neg_inf();
template <> __device__ inline float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ inline double neg_inf<double>() { return __longlong_as_double(0xfff0000000000000ULL); }
template <typename T> __device__ inline T larger(T a, T b) { return a > b ? a : b; }

// Exclusive forward scan over chunks, one thread per (batch row b, state entry k):
//   S[b, c, k] = acc before chunk c;  acc <- exp(P_{c-1} - P_c) acc + exp(mc_c - P_c) U[b, c, k]
// with P_c = max(P_{c-1}, mc_c) written to P[b, c] (by the k == 0 thread). Without scale: acc += U.
template <typename T>
__global__ void scan_fwd(const T* __restrict__ U, const T* __restrict__ mc, T* __restrict__ S,
                         T* __restrict__ P, long long B, int n, long long K, int has_scale)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * K) return;
    long long b = idx / K, k = idx - b * K;
    const T* Ub = U + b * n * K + k;
    T* Sb = S + b * n * K + k;
    T acc = 0;
    if (!has_scale) {
        for (int c = 0; c < n; ++c) { Sb[c * K] = acc; acc += Ub[c * K]; }
        return;
    }
    const T* mb = mc + b * n;
    T Pp = neg_inf<T>();
    for (int c = 0; c < n; ++c) {
        Sb[c * K] = acc;
        T m_c = mb[c];
        T Pn = larger(Pp, m_c);
        acc = acc * ex(Pp - Pn) + Ub[c * K] * ex(m_c - Pn);   // first chunk: exp(-inf) * 0 = 0
        if (k == 0) P[b * n + c] = Pn;
        Pp = Pn;
    }
}

// Exclusive reverse scan: G[b, n-1, k] = 0;  G[b, c-1, k] = exp(P_{c-1} - P_c) G[b, c, k] + V[b, c, k].
template <typename T>
__global__ void scan_rev(const T* __restrict__ V, const T* __restrict__ P, T* __restrict__ G,
                         long long B, int n, long long K, int has_scale)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * K) return;
    long long b = idx / K, k = idx - b * K;
    const T* Vb = V + b * n * K + k;
    T* Gb = G + b * n * K + k;
    const T* Pb = P + b * n;
    T acc = 0;
    for (int c = n - 1; c >= 0; --c) {
        Gb[c * K] = acc;
        if (c > 0) acc = (has_scale ? acc * ex(Pb[c - 1] - Pb[c]) : acc) + Vb[c * K];
    }
}

// Positive features, fused row stabiliser, one warp per row of u = x omega^T (N rows of m), in place:
//   u <- exp(u - max_row u),  log_scale = max_row u - |x|^2 / 2 - log(m) / 2.
template <typename T>
__global__ void positive_stable(T* __restrict__ u, const T* __restrict__ x, T* __restrict__ log_scale,
                                long long N, int m, int d, T half_log_m)
{
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= N) return;                       // the whole warp leaves together (blockDim % 32 == 0)
    T* r = u + row * m;
    T mx = neg_inf<T>();
    for (int j = lane; j < m; j += 32) mx = larger(mx, r[j]);
    for (int o = 16; o > 0; o >>= 1) mx = larger(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    for (int j = lane; j < m; j += 32) r[j] = ex(r[j] - mx);
    const T* xr = x + row * d;
    T sq = 0;
    for (int j = lane; j < d; j += 32) sq += xr[j] * xr[j];
    for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
    if (lane == 0) log_scale[row] = mx - T(0.5) * sq - half_log_m;
}
"""

_NAMES = tuple(f"{k}<{t}>" for k in ("scan_fwd", "scan_rev", "positive_stable") for t in ("float", "double"))
_CTYPE = {"float32": "float", "float64": "double"}


@functools.lru_cache(maxsize=None)
def _module():
    import cupy

    return cupy.RawModule(code=SOURCE, options=("-std=c++17",), name_expressions=_NAMES)


def function(kernel: str, dtype) -> "object":
    """The compiled ``kernel<T>`` for a NumPy/CuPy dtype (float32 -> float, float64 -> double)."""
    return _module().get_function(f"{kernel}<{_CTYPE[np.dtype(dtype).name]}>")


def launch_1d(fn, n_threads: int, args, *, block: int = 256) -> None:
    """Launch `fn` on at least `n_threads` threads in blocks of `block`."""
    grid = max(1, -(-int(n_threads) // block))
    fn((grid,), (block,), args)
