"""The model families: what each one is, asked by name where only a config is at hand.

    family("transformer").transformer      # True: layers x heads of maps to choose from
    family(cfg.model.name).reads_images    # the image models read pixel tokens

The one list of family names (`MODELS`) and of what the code outside the builder asks of
a family. Code that holds a model asks the model (`uses_attention`, `reads_images` on
`attnmt.models.base.Seq2Seq` and `attnmt.runtime.model.OnnxModel`, kept equal to the
entries here by tests/test_families.py); torch-free code that holds only a config (its
checks, the server's schema, the attention choice of an ONNX export) asks `family(name)`.
Nothing outside this module and `attnmt.models.builder` (which maps the names to classes)
compares a family's name (tests/test_families.py reads every module to say so).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnmt.errors import ConfigError


@dataclass(frozen=True)
class Family:
    """One model family, as the rest of the package asks it.

    Fields:
        name: `model.name` in a config.
        reads_images: reads pixel tokens (`attnmt.data.images`), not subwords: images are
            read whole, decoded into readings, and neither exported to ONNX nor translated.
        uses_attention: a step can return attention weights (the model's own flag).
        transformer: a Transformer: L layers x H heads of cross-attention maps to choose
            from (`--align-layer`/`--align-head`), d_model split into `model.heads`, and
            embeddings `model.tie_embeddings` ties.
        key_width: an attention composed from `model.attention` x `model.scope` x
            `model.mode` (docs/attention.md), over keys this many `hidden_size` wide:
            RNNsearch's bidirectional states [->h_j; <-h_j], Luong's h_s, Show-Attend-Tell's
            CNN annotations as wide as RNNsearch's. None: no such attention (none at all,
            the Transformer's multi-head scaled dot, the glimpses' own policy).
        own_policy: learns where to look by REINFORCE whatever `model.mode` says (Mnih et
            al. 2014's glimpses), so it always has a hard-attention policy to reward.
        uniform_init: `model.init: uniform` applies: no normalisation layers to break.
        align_offset: the decoder step whose weights align target word t is t + offset
            (`--align-offset`'s default). Measured on the dev book of the Greek->English
            gold links (docs/alignment.md, "Which step aligns"): RNNsearch's and the
            Transformer's attention at step t look at the source of target t (k = 0 best
            by 4 points and more). Luong's is not measured there yet; its query h_t has read
            the same inputs as theirs at step t, so it gets the same default.
    """

    name: str
    reads_images: bool = False
    uses_attention: bool = True
    transformer: bool = False
    key_width: int | None = None
    own_policy: bool = False
    uniform_init: bool = False
    align_offset: int = 0

    @property
    def composed_attention(self) -> bool:
        """Whether its attention is built from the config's score, scope and mode (and
        takes hard mode, a context gate, the doubly stochastic penalty)."""
        return self.key_width is not None


# The families `attnmt.models.build_model` builds, in the order messages list them.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("rnnencdec", uses_attention=False, uniform_init=True),  # Cho et al. 2014
        Family("rnnsearch", key_width=2, uniform_init=True),  # Bahdanau et al. 2015
        Family("luong", key_width=1, uniform_init=True),  # Luong et al. 2015
        Family("transformer", transformer=True),  # Vaswani et al. 2017
        Family("show-attend-tell", reads_images=True, key_width=2),  # Xu et al. 2015
        Family("show-tell", reads_images=True, uses_attention=False),  # its baseline
        Family("glimpses", reads_images=True, own_policy=True),  # Mnih et al. 2014
    )
}
MODELS = tuple(FAMILIES)


def family(name: str) -> Family:
    """The family a config's `model.name` names; `ConfigError` listing them for another."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; valid: {', '.join(MODELS)}") from None


def names(question: str) -> tuple[str, ...]:
    """The families for which the `Family` field or property `question` is true, in
    `MODELS` order: for messages that list them ("works with rnnsearch and luong")."""
    return tuple(n for n, f in FAMILIES.items() if getattr(f, question))


# The lists messages and tests name (never compared against: ask `family(name)`).
KEY_WIDTHS = {n: f.key_width for n, f in FAMILIES.items() if f.key_width is not None}
ATTENTIONAL_RNNS = names("composed_attention")
IMAGE_MODELS = names("reads_images")
TEXT_MODELS = tuple(n for n, f in FAMILIES.items() if not f.reads_images)
UNIFORM_INIT_MODELS = names("uniform_init")
