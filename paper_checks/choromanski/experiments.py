"""FLT's image classification on Fashion-MNIST (slow): linear attention without vs with a learned 2-D RPE.

The grid is ``paper_checks.experiments.images`` (No-Pos FAVOR+ runs shared with Horn's claims). The
paper's image models use a learnable feature map phi(x) = Wx; here both arms use FAVOR+ positive random
features (the model's FLT kind), so the comparison isolates the RPE.
"""

from __future__ import annotations

from ..companions import label_swap
from ..experiments import images as E  # noqa: N812 (the experiments' shared name)
from ..experiments import images_rules as R  # noqa: N812 (the rules beside the driver E)
from ..registry import CHOROMANSKI, Context, Result, claim


@claim("flt.image-classification", paper=CHOROMANSKI, section="Sec. 5 (image classification)",
       statement="FLT's learned RPE improves image classification over the same linear-attention model "
                 "without RPE. Pre-registered: " + R.CRITERIA["flt"],
       expected={"tiny": "not-checkable", "full": "holds"},
       derivation="Without an RPE a mean-pooled linear-attention model sees a bag of intensity tokens; the "
                  "FLT mask exp(f(r_i - r_j)) with a learned 2-D spectrum lets attention depend on "
                  "relative positions, which carry the shape. FAVOR+ features in both arms (the paper: "
                  "phi(x) = Wx); 2 layers, width 64, m = 64 at full, far below the paper's scale. Tiny: a "
                  "smoke run.",
       decide=R.decide_flt, slow=True)
def image_classification(ctx: Context) -> Result:
    return E.claim_result(ctx, "flt")


def _swap_flt(ev: dict) -> dict:
    return {**ev, "gain_flt": -float(ev["gain_flt"])}


label_swap("flt.image-classification", "FLT <-> No-Pos (gain negated)", _swap_flt, ("gain_flt",),
           paper_direction=lambda ev: {**ev, "size": "small", "data_stand_in": False,
                                       "min_margin_over_floor": 0.0, "gain_flt": 0.2, "se_gain_flt": 0.03,
                                       "budget_fraction": 1.0})
