"""`build_model`: a `ModelConfig` and two vocabulary sizes -> a model.

Every config mistake (an unknown model, score, scope or mode; a score that cannot work
with the model's widths; widths that do not divide into heads) is a `ConfigError` that
names the key and the valid options, raised before any tensor is allocated. The checks
are `attnmt.config.check_model`, the ones a config gets when it loads, so a bad model
config fails before any data is prepared; `build_model` runs them again for configs built
in code.
"""

from __future__ import annotations

from attnmt import attention
from attnmt.config import KEY_WIDTHS, MODELS, ModelConfig, attention_options, check_model
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.glimpses import Glimpses
from attnmt.models.layers import init_uniform
from attnmt.models.luong import LuongNMT
from attnmt.models.rnn import RNNEncDec
from attnmt.models.rnnsearch import RNNSearch
from attnmt.models.transformer import Transformer
from attnmt.models.vision import ShowAttendTell, ShowTell


def model_names() -> list[str]:
    """The model names `build_model` accepts."""
    return list(MODELS)


def _attention(cfg: ModelConfig, query_dim: int, key_dim: int) -> attention.Attention:
    try:
        return attention.build(**attention_options(cfg, query_dim, key_dim))
    except ValueError as err:
        raise ConfigError(
            f"model.attention={cfg.attention!r} cannot be used with model.name={cfg.name!r}: {err}"
        ) from None


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """Build the model `cfg.name` for the given vocabularies.

    - rnnencdec: `RNNEncDec` (Cho et al. 2014), no attention; attention keys ignored.
    - rnnsearch: `RNNSearch` (Bahdanau et al. 2015); attention query s_{i-1} (width
      hidden_size), keys [→h_j; ←h_j] (2 · hidden_size), so `dot`/`scaled_dot` cannot be
      used (they need equal widths).
    - luong: `LuongNMT` (Luong et al. 2015), any score, scope and mode.
    - transformer: `Transformer` (Vaswani et al. 2017), d_model = hidden_size.
    - show-attend-tell: `ShowAttendTell` (Xu et al. 2015) over images of height
      `image_height`; keys are CNN annotations of width 2 · hidden_size, as RNNsearch's.
    - show-tell: `ShowTell`, the same CNN and a decoder without attention.
    - glimpses: `Glimpses` (Mnih et al. 2014), `glimpses` glimpses per image.

    `model.init: uniform` then draws every parameter from U(-0.1, 0.1) instead of the
    paper's initialisation (`init_uniform`: the PAD embedding rows stay zero and the
    documented starts such as cosine's beta are kept).

    Raises:
        ConfigError: an unknown name or an impossible combination (message names the key
            and the valid options).
    """
    model = _build(cfg, src_vocab_size, tgt_vocab_size)
    if cfg.init == "uniform":  # instead of the paper's start (model.init)
        init_uniform(model)
    return model


def _build(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    for label, size in (("src_vocab_size", src_vocab_size), ("tgt_vocab_size", tgt_vocab_size)):
        if size < 4:
            raise ValueError(f"{label} must hold at least the 4 special tokens, got {size}")
    check_model(cfg)
    D, E = cfg.hidden_size, cfg.embed_size
    common = {"embed_size": E, "hidden_size": D, "layers": cfg.layers, "dropout": cfg.dropout}
    # The attentional RNNs' options from Xu et al. 2015 (and how hard attention evaluates).
    xu = {
        "hard_eval": cfg.hard_eval,
        "context_gate": cfg.context_gate,
        "hard_expectation": cfg.hard_expectation,
    }
    if cfg.name == "rnnencdec":
        return RNNEncDec(src_vocab_size, tgt_vocab_size, **common)
    if cfg.name == "rnnsearch":
        # query s_{i-1}, keys h_j = [->h_j; <-h_j]
        attn = _attention(cfg, query_dim=D, key_dim=KEY_WIDTHS["rnnsearch"] * D)
        return RNNSearch(src_vocab_size, tgt_vocab_size, attention=attn, **common, **xu)
    if cfg.name == "luong":
        attn = _attention(cfg, query_dim=D, key_dim=KEY_WIDTHS["luong"] * D)  # h_t, h̄_s
        return LuongNMT(
            src_vocab_size,
            tgt_vocab_size,
            attention=attn,
            input_feeding=cfg.input_feeding,
            **common,
            **xu,
        )
    if cfg.name == "show-attend-tell":
        attn = _attention(cfg, query_dim=D, key_dim=KEY_WIDTHS["show-attend-tell"] * D)
        return ShowAttendTell(
            src_vocab_size,
            tgt_vocab_size,
            attention=attn,
            image_height=cfg.image_height,
            **common,
            **xu,
        )
    if cfg.name == "show-tell":
        return ShowTell(src_vocab_size, tgt_vocab_size, image_height=cfg.image_height, **common)
    if cfg.name == "glimpses":
        return Glimpses(
            src_vocab_size,
            tgt_vocab_size,
            image_height=cfg.image_height,
            hidden_size=D,
            glimpses=cfg.glimpses,
            patch=cfg.glimpse_patch,
            scales=cfg.glimpse_scales,
            location_std=cfg.location_std,
            dropout=cfg.dropout,
            context=cfg.glimpse_context,
        )
    if cfg.share_embeddings and src_vocab_size != tgt_vocab_size:
        raise ConfigError(
            "model.share_embeddings needs one joint vocabulary (data.joint_vocab: true), got "
            f"source size {src_vocab_size} and target size {tgt_vocab_size}"
        )
    return Transformer(
        src_vocab_size,
        tgt_vocab_size,
        d_model=D,
        heads=cfg.heads,
        ff_size=cfg.ff_size,
        layers=cfg.layers,
        dropout=cfg.dropout,
        pre_norm=cfg.pre_norm,
        tie_embeddings=cfg.tie_embeddings,
        share_embeddings=cfg.share_embeddings,
    )
