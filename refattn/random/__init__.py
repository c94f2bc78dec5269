"""NumPy-only edge: every random draw of refattn is made in this package from a ``numpy.random.Generator``.

One module per family: ``performer`` (Gaussian and Haar-orthogonal projections), ``spectra`` (KL-Transformer
GMM / FastFood / generator noise), ``positional`` (S1 frequencies, FLT frequency draws), ``layers`` (initial
layer parameters, dropout masks), with the shared argument checks and transfers in ``common``; everything is
re-exported here, so ``refattn.random.draw_gaussian`` works. A model's parameters and attention features are
drawn by :mod:`refattn.nn.init` from these primitives (this package imports nothing from ``refattn.nn``).

The core never draws: feature maps and attention take the drawn arrays (``omega``, FastFood's diagonals, ...),
so queries and keys share one draw by construction. Draws are returned as NumPy arrays; move them to another
array library with :func:`as_xp` (``as_xp(omega, like=x)``), an explicit, small transfer.

Conventions (style.md 2.6):

* ``rng`` is the required first argument of every ``draw_*``/``init_*`` function and must be a
  ``numpy.random.Generator``; ``None`` is rejected (a reference library never draws fresh entropy silently);
* independent streams are split with ``rng.spawn(n)`` / ``SeedSequence.spawn``, never re-seeded with
  neighbouring integers;
* redraw policies are pure functions of a step counter (:func:`rng_for_step`).
"""

from .common import (
    check_rng, check_dtype_arg, as_xp, rng_for_step, tree_as_xp, tree_to_numpy,
)
from .layers import (
    init_dense, init_layernorm, init_batchnorm, init_embedding, draw_dropout_mask,
)
from .performer import (
    draw_gaussian, draw_orthogonal,
)
from .spectra import (
    init_gmm, init_gmm_authors, draw_gmm_noise, draw_gmm_antithetic_noise, gmm_as_xp, draw_fastfood,
    fastfood_as_xp,
    draw_generator_noise, init_generator,
)
from .positional import (
    init_s1_params, draw_flt_noise, FLT_NOISE_KINDS,
)

__all__ = [
    "check_rng", "check_dtype_arg", "as_xp", "rng_for_step", "tree_as_xp", "tree_to_numpy", "init_dense",
    "init_layernorm", "init_batchnorm", "init_embedding", "draw_dropout_mask", "draw_gaussian",
    "draw_orthogonal", "init_gmm", "init_gmm_authors",
    "draw_gmm_noise", "draw_gmm_antithetic_noise", "gmm_as_xp",
    "draw_fastfood", "fastfood_as_xp", "draw_generator_noise", "init_generator", "init_s1_params",
    "draw_flt_noise", "FLT_NOISE_KINDS",
]
