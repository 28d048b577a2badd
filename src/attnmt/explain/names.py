"""The explanation methods' names and how a heatmap shades each one: what the command
line and the server's schema need without loading the methods (and torch)."""

from __future__ import annotations

METHODS = (
    "attention",
    "attention-norm",
    "rollout",
    "grad-input",
    "integrated-gradients",
    "occlusion",
)
GRADIENT_METHODS = ("grad-input", "integrated-gradients")
ATTENTION_METHODS = ("attention", "attention-norm", "rollout")
SIGNED = ("grad-input", "integrated-gradients", "occlusion")  # may be negative


def scale_of(method: str | None) -> str:
    """How a heatmap shades the method's matrix (`attnmt.plotting.SCALES`): attention on
    its fixed 0..1 scale, other scores per row, signed ones in two colours."""
    if method in (None, "attention"):
        return "weights"
    return "signed" if method in SIGNED else "row"
