"""Axis `model.norm`: where a block's normalisation layers sit (pre-LN, post-LN, sandwich, none).

A placement (`NORM_PLACEMENTS`) says where a block's norms sit around each sublayer (attention
or MLP): on the branch's input, on its output, or on the sum after the residual add (see
`NormPlacement`); the block itself does the adds. `final_norm` says whether the model must end
with a norm before the head. What each norm computes is the `model.norm_type` axis
(`gptlab.model.norms`). Pre-LN puts its norms at the input positions, named `ln_1`/`ln_2`, so the
baseline's state_dict is nanoGPT's key for key.

Norms per model, with L = n_layer: pre 2L + 1, post 2L, sandwich 4L + 1, none 0.
"""
from __future__ import annotations

from gptlab.registry import Registry

NORM_PLACEMENTS: Registry[type["NormPlacement"]] = Registry("norm", "placement of normalisation around each sublayer")


class NormPlacement:
    """Base class of a placement: which of a block's three norm positions hold a norm.

    Every block computes, for each sublayer f (attention, then MLP),

        x = sum_norm(x + out_norm(f(in_norm(x))))

    and a placement says which of `in_norm`, `out_norm` and `sum_norm` are a norm (from
    `make_norm`) rather than the identity, and whether the model ends with a final norm
    (`final_norm`: needed whenever the residual stream itself is never normalised).
    """

    in_norm: bool = False
    out_norm: bool = False
    sum_norm: bool = False
    final_norm: bool = False


@NORM_PLACEMENTS.register("pre")
class PreNorm(NormPlacement):
    """Pre-LN x + f(LN(x)), final LN before the head (GPT-2; Xiong et al. 2020)."""

    in_norm, final_norm = True, True


@NORM_PLACEMENTS.register("post")
class PostNorm(NormPlacement):
    """Post-LN LN(x + f(x)), no final LN (Vaswani et al. 2017; GPT-1).

    The last block already ends in a LN, so a final one would normalise twice.
    """

    sum_norm = True


@NORM_PLACEMENTS.register("sandwich")
class SandwichNorm(NormPlacement):
    """Sandwich-LN x + LN2(f(LN1(x))), final LN before the head (Ding et al. 2021, CogView).

    The extra LN on each branch's output bounds what a sublayer can add to the residual stream
    (CogView's cure for fp16 divergence). The stream itself is still a growing sum that no norm
    touches, exactly as in pre-LN, so it keeps pre-LN's final LN.
    """

    in_norm, out_norm, final_norm = True, True, True


@NORM_PLACEMENTS.register("none")
class NoNorm(NormPlacement):
    """No normalisation x + f(x), no final norm: the control showing what norms buy.

    It trains at small depth thanks to GPT-2's 1/sqrt(2 n_layer) init of the residual
    projections, but nothing bounds the residual stream, so expect deep or high-lr runs to
    diverge (Zhang et al. 2019, Fixup, show what it takes to train without norms).
    """
