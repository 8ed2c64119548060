"""The optimizer of a population: AdamW over stacked parameters with per-member lr, and per-member clipping.

A population stacks K members' parameters along a new first dimension (`torch.func.stack_module_state`).
One `torch.optim.AdamW` over those stacked tensors would give every member the same learning rate, and a
member-scaled loss is no substitute (functorch#782): Adam divides the scale out of its update. So the
update is written here for stacked tensors, with every member's lr and weight decay a (K,) tensor, in the
order of operations of torch's fused AdamW (the lone run's optimizer, `trainer.make_optimizer`), so a
member's update equals its lone run's to float rounding. A `mask` leaves members untouched (parameters,
moments and step count): a member that went non-finite is frozen while the others train on.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s: coef = max_norm / (norm + 1e-6)


def member_view(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A (K,) tensor shaped to broadcast over a stacked (K, ...) tensor."""
    return values.view((-1,) + (1,) * (like.dim() - 1))


@torch.no_grad()
def clip_per_member(grads: Sequence[torch.Tensor], max_norm: torch.Tensor) -> torch.Tensor:
    """Clip each member's global gradient norm to its `max_norm` (K,) in place (inf: no clipping); return the norms (K,).

    The lone run's `clip_grad_norm_` per member: the 2-norm of the per-tensor 2-norms, and the grads scaled
    by min(1, max_norm / (norm + 1e-6)). A member's non-finite norm touches only its own gradients.
    """
    per_tensor = torch.stack([torch.linalg.vector_norm(g.flatten(1), 2, dim=1) for g in grads])  # (P, K)
    norms = torch.linalg.vector_norm(per_tensor, 2, dim=0)  # (K,)
    coef = torch.clamp(max_norm / (norms + CLIP_EPS), max=1.0)
    for g in grads:
        g.mul_(member_view(coef, g))
    return norms


class StackedAdamW:
    """AdamW (Loshchilov & Hutter) for K stacked members: per-member lr and weight decay, shared betas and eps.

    `decay[i]` says whether stacked tensor i is decayed; the lone run decays its matrices (>= 2 dims per
    member) and not its biases and norm gains, so a population passes the same groups.
    """

    def __init__(self, params: Sequence[torch.Tensor], decay: Sequence[bool], weight_decay: torch.Tensor,
                 betas: tuple[float, float] = (0.9, 0.99), eps: float = 1e-8) -> None:
        if len(params) != len(decay):
            raise ValueError(f"{len(params)} parameter tensors but {len(decay)} decay flags")
        self.params, self.decay = list(params), list(decay)
        self.weight_decay = weight_decay
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = torch.zeros(len(weight_decay), dtype=torch.float32, device=weight_decay.device)

    @torch.no_grad()
    def step(self, lr: torch.Tensor, mask: torch.Tensor) -> None:
        """One update with each member's `lr` (K,) where `mask` (K,) is true; the masked-out members stay as they are."""
        self.steps += mask.to(self.steps.dtype)
        steps = self.steps.clamp(min=1.0)  # a frozen member's step count may be 0: its update is discarded anyway
        bias1 = 1.0 - torch.pow(self.beta1, steps)
        bias2_sqrt = torch.sqrt(1.0 - torch.pow(self.beta2, steps))
        step_size = lr / bias1
        shrink = 1.0 - lr * self.weight_decay
        for p, grad, exp_avg, exp_avg_sq, decay in zip(self.params, self._grads(), self.exp_avg, self.exp_avg_sq,
                                                      self.decay):
            keep = member_view(mask, p)
            new_p = p * member_view(shrink, p) if decay else p.clone()
            new_avg = exp_avg.lerp(grad, 1.0 - self.beta1)
            new_sq = exp_avg_sq * self.beta2 + (1.0 - self.beta2) * grad * grad
            denom = new_sq.sqrt() / member_view(bias2_sqrt, p) + self.eps
            new_p -= member_view(step_size, p) * (new_avg / denom)
            p.copy_(torch.where(keep, new_p, p))
            exp_avg.copy_(torch.where(keep, new_avg, exp_avg))
            exp_avg_sq.copy_(torch.where(keep, new_sq, exp_avg_sq))

    def _grads(self) -> list[torch.Tensor]:
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def member_state(self, k: int) -> dict[str, list[torch.Tensor] | float]:
        """Member k's moments and step count (copies), e.g. to hand it to a lone run's optimizer."""
        return {"exp_avg": [m[k].clone() for m in self.exp_avg], "exp_avg_sq": [v[k].clone() for v in self.exp_avg_sq],
                "step": float(self.steps[k])}

    def state_dict(self) -> dict[str, object]:
        return {"exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq, "steps": self.steps}

    def load_state_dict(self, state: dict[str, object]) -> None:
        for mine, theirs in ((self.exp_avg, state["exp_avg"]), (self.exp_avg_sq, state["exp_avg_sq"])):
            for m, t in zip(mine, theirs):  # type: ignore[call-overload]
                m.copy_(t)
        self.steps.copy_(state["steps"])  # type: ignore[arg-type]


def max_norms(grad_clips: Sequence[float], device: torch.device) -> torch.Tensor:
    """Each member's clipping threshold (K,): its `train.grad_clip`, or inf where it is 0 (no clipping)."""
    return torch.tensor([c if c > 0 else math.inf for c in grad_clips], dtype=torch.float32, device=device)
