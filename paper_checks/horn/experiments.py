"""horn.shift-robustness (slow): Horn et al. Sec. 3 / Figure 1 at laptop scale (paper_checks.experiments)."""

from __future__ import annotations

from .._claims import HORN, Context, Result, claim
from ..experiments import _harness as H
from ..experiments import shifted_digits as E


@claim("horn.shift-robustness", paper=HORN, section="Sec. 3, Figure 1 (and Table 1)",
       statement="'the Performer relying purely on absolute positional encodings degrades in performance after "
                 "shifting the images only a few pixels to the left or to the right ... In both scenarios the model "
                 "with translational equivariance is much more robust to these shifts.' Pre-registered criterion: "
                 + E.CRITERION,
       expected="holds",
       derivation="S1 and S2 make the attention logits depend on positions only through differences, so with a "
                   "zero background and mean pooling a horizontal shift moves the content tokens without changing "
                   "their relative geometry: only the border tokens see a different neighbourhood and the random "
                   "features add noise, so accuracy should stay close to the centred value. The absolute model "
                   "sees content at positions whose learned embeddings were trained on background only, so its "
                   "accuracy should fall. Scale (digits 8x8 on a 8x16 canvas at small size, 2 seeds, 300 steps) is "
                   "far below the paper's (32x32 MNIST, depth 6): the verdict is about this scale.",
       slow=True)
def shift_robustness(ctx: Context) -> Result:
    sz = E.SIZES[ctx.size]
    note = (f"digits on {sz['canvas'][0]}x{sz['canvas'][1]} canvas, {sz['seeds']} seed(s), {sz['steps']} steps, "
            f"width {sz['d_model']}, {sz['n_layers']} layer(s)")
    return H.claim_result(ctx, E.NAME, E.run, E.decide, scale_note=note)
