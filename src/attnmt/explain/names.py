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


# What an export answers when asked to explain (torch-free: the server of an export says it).
EXPORT_EXPLAINS = (
    "explanations need the run itself: an ONNX export decodes and shows its attention "
    "but has no gradients or masked re-reading; use the run (attnmt translate RUN)"
)

# Integrated gradients' steps from the zero baseline (Sundararajan et al. 2017 use 20-300):
# every face's default (`attnmt.service.Request.ig_steps`, `--ig-steps`, the server's).
IG_STEPS = 32
