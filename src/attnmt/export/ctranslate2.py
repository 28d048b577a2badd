"""Exporting a trained Transformer run to CTranslate2, a C++ inference engine for
Transformer translation models (int8/fp16 kernels, batched beam search on CPU and GPU).

    loaded = load_run("runs/transformer")
    export_ctranslate2(loaded, "exports/transformer-ct2", quantization="int8")

The model is described with CTranslate2's own specification (`TransformerSpec`) and saved
by its `Converter`; every weight of our `Transformer` is mapped by hand (`RunConverter`):

    ours (attnmt.models.transformer)          CTranslate2 spec
    src_embed / tgt_embed (× √D on use)       encoder.embeddings[0] / decoder.embeddings,
                                              scale_embeddings = True (it multiplies by √D)
    sinusoidal_positions (sin/cos interleaved) position_encodings.encodings: our table,
                                              stored (its built-in one puts all sines first)
    self_attn q_proj, k_proj, v_proj          self_attention.linear[0]: rows [Q; K; V]
    cross_attn q_proj / k_proj, v_proj        attention.linear[0] / linear[1]: rows [K; V]
    *.out_proj                                *.linear[-1]
    Residual norms (pre- or post-norm)        the layer_norm of the sub-layer they wrap
    encoder_norm / decoder_norm (pre-norm)    encoder.layer_norm / decoder.layer_norm
    ff.w_1, ff.w_2                            ffn.linear_0, ffn.linear_1
    generator (tied or not, no bias)          decoder.projection

Vocabularies keep our ids: line i of CTranslate2's vocabulary is our piece i, so PAD UNK
BOS EOS (0-3) are `<pad> <unk> <s> </s>` there too. The source EOS our encoder reads is
added by CTranslate2 itself (`add_source_eos`). Beside the model go our vocabulary files
(`vocab/`, as a run keeps them) and `attnmt.json`, which says how to tokenise.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from ctranslate2.converters import Converter
from ctranslate2.specs import TransformerSpec, common_spec
from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

from attnmt.data.images import CanvasVocab
from attnmt.data.synthetic import SymbolVocab
from attnmt.data.vocab import BOS, EOS, PAD, UNK
from attnmt.decoding.runs import LoadedRun
from attnmt.errors import UserError
from attnmt.export.directory import building, provenance, vocab_info
from attnmt.models.transformer import Transformer, sinusoidal_positions
from attnmt.rundir import EXPORT_INFO

FORMATS = ("ctranslate2",)
QUANTIZATIONS = tuple(ACCEPTED_MODEL_TYPES)  # float32, int8, int8_float16, float16, ...
INFO_FILE = EXPORT_INFO
# Positions in the stored table: the longest source we translate (MAX_SOURCE_TOKENS = 400
# subwords + EOS) decoded at --max-len-ratio 2 needs 2 × 401 + 5 = 807; 1,024 leaves room.
MAX_POSITIONS = 1024


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to(device="cpu", dtype=torch.float32).numpy()


def vocabulary_tokens(side) -> list[str]:
    """Our id -> token list of one vocabulary side: entry i is the piece with id i."""
    if isinstance(side, SymbolVocab):
        return list(side.itos)
    if isinstance(side, CanvasVocab):
        raise UserError("an image vocabulary cannot be exported: CTranslate2 reads text")
    return [side.processor.id_to_piece(i) for i in range(side.size)]


def _check_tokens(tokens: list[str], side: str) -> None:
    specials = {PAD: "<pad>", UNK: "<unk>", BOS: "<s>", EOS: "</s>"}
    wrong = {i: tokens[i] for i, name in specials.items() if tokens[i] != name}
    if wrong or len(set(tokens)) != len(tokens):
        raise UserError(
            f"the {side} vocabulary cannot be exported: CTranslate2 needs distinct tokens "
            f"with <pad> <unk> <s> </s> at ids 0-3, this one has {wrong or 'duplicates'}"
        )


class RunConverter(Converter):
    """CTranslate2's converter for one loaded attnmt Transformer run: `_load` fills a
    `TransformerSpec` with the run's weights (the table in the module docstring)."""

    def __init__(self, loaded: LoadedRun, *, max_positions: int = MAX_POSITIONS) -> None:
        name = loaded.cfg.model.name
        if not isinstance(loaded.model, Transformer):
            raise UserError(
                f"only Transformer runs can be exported to CTranslate2, and "
                f"'{loaded.run_dir}' holds a {name} model; export it with --format onnx "
                "(any text model), or train a Transformer (configs/transformer.yaml)"
            )
        self.loaded = loaded
        self.max_positions = max_positions

    def _load(self) -> TransformerSpec:
        model: Transformer = self.loaded.model
        pre_norm = model.encoder_layers[0].attn_residual.pre_norm
        spec = TransformerSpec.from_config(
            (len(model.encoder_layers), len(model.decoder_layers)),
            model.heads,
            pre_norm=pre_norm,
            activation=common_spec.Activation.RELU,
        )
        src_tokens = vocabulary_tokens(self.loaded.vocab.src)
        tgt_tokens = vocabulary_tokens(self.loaded.vocab.tgt)
        _check_tokens(src_tokens, "source")
        _check_tokens(tgt_tokens, "target")
        spec.register_source_vocabulary(src_tokens)
        spec.register_target_vocabulary(tgt_tokens)
        config = spec.config
        config.unk_token, config.bos_token = tgt_tokens[UNK], tgt_tokens[BOS]
        config.eos_token, config.decoder_start_token = tgt_tokens[EOS], tgt_tokens[BOS]
        config.add_source_eos = True  # our encoder reads every source with EOS appended
        config.layer_norm_epsilon = model.encoder_layers[0].attn_residual.norm.eps

        cpu = torch.device("cpu")
        positions = sinusoidal_positions(
            0, self.max_positions, model.d_model, device=cpu, dtype=torch.float32
        )  # (max_positions, D)
        encoder, decoder = spec.encoder, spec.decoder
        encoder.scale_embeddings = decoder.scale_embeddings = True  # _embed: E x × √D
        encoder.embeddings[0].weight = _array(model.src_embed.weight)
        decoder.embeddings.weight = _array(model.tgt_embed.weight)
        encoder.position_encodings.encodings = _array(positions)
        decoder.position_encodings.encodings = _array(positions)
        if pre_norm:
            _norm(encoder.layer_norm, model.encoder_norm)
            _norm(decoder.layer_norm, model.decoder_norm)
        for layer_spec, layer in zip(encoder.layer, model.encoder_layers, strict=True):
            _self_attention(layer_spec.self_attention, layer.self_attn)
            _norm(layer_spec.self_attention.layer_norm, layer.attn_residual.norm)
            _feed_forward(layer_spec.ffn, layer.ff, layer.ff_residual.norm)
        for layer_spec, layer in zip(decoder.layer, model.decoder_layers, strict=True):
            _self_attention(layer_spec.self_attention, layer.self_attn)
            _norm(layer_spec.self_attention.layer_norm, layer.self_residual.norm)
            _cross_attention(layer_spec.attention, layer.cross_attn)
            _norm(layer_spec.attention.layer_norm, layer.cross_residual.norm)
            _feed_forward(layer_spec.ffn, layer.ff, layer.ff_residual.norm)
        _linear(decoder.projection, model.generator)
        return spec


def _linear(spec, *linears: torch.nn.Linear) -> None:
    """One linear map, or several fused along the output: weight rows (and biases) stacked."""
    spec.weight = np.concatenate([_array(lin.weight) for lin in linears])  # (sum out, in)
    if linears[0].bias is not None:
        spec.bias = np.concatenate([_array(lin.bias) for lin in linears])


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _self_attention(spec, attn) -> None:
    # Heads are contiguous blocks of Dh rows in each of Q, K, V, as our _split_heads views.
    _linear(spec.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)  # (3D, D)
    _linear(spec.linear[1], attn.out_proj)


def _cross_attention(spec, attn) -> None:
    _linear(spec.linear[0], attn.q_proj)  # queries from the decoder
    _linear(spec.linear[1], attn.k_proj, attn.v_proj)  # keys and values from the source
    _linear(spec.linear[2], attn.out_proj)


def _feed_forward(spec, ff, norm: torch.nn.LayerNorm) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, ff.w_1)
    _linear(spec.linear_1, ff.w_2)


def export_info(loaded: LoadedRun, quantization: str, max_positions: int) -> dict:
    """What a loader needs beside the model: where it came from and how to tokenise."""
    vocab = vocab_info(loaded)
    vocab["source_eos"] = "added by CTranslate2 (config.json add_source_eos)"
    return {
        **provenance(loaded, "ctranslate2"),
        "quantization": quantization,
        "max_positions": max_positions,
        "vocab": vocab,
    }


def export_ctranslate2(
    loaded: LoadedRun,
    out: str | Path,
    *,
    quantization: str = "float32",
    force: bool = False,
    max_positions: int = MAX_POSITIONS,
) -> Path:
    """Write `loaded`'s Transformer as a CTranslate2 model directory `out`.

    `out` is built in a temporary folder beside it and renamed into place, so a failure
    leaves nothing half-written; a non-empty `out` is replaced only with `force`.

    Raises:
        UserError: not a Transformer, an unknown quantization, or `out` in the way.
    """
    if quantization not in QUANTIZATIONS:
        raise UserError(
            f"unknown quantization '{quantization}'; choose one of {', '.join(QUANTIZATIONS)}"
        )
    converter = RunConverter(loaded, max_positions=max_positions)
    with building(out, force=force) as tmp:
        converter.convert(str(tmp), quantization=quantization, force=True)
        loaded.vocab.save(tmp / "vocab")
        info = export_info(loaded, quantization, max_positions)
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return Path(out)


def default_out(loaded: LoadedRun, quantization: str) -> Path:
    """RUN/ctranslate2, or RUN/ctranslate2-int8 (etc.) for a quantized export."""
    suffix = "" if quantization == "float32" else f"-{quantization}"
    return loaded.run_dir / f"ctranslate2{suffix}"


__all__ = [
    "FORMATS",
    "INFO_FILE",
    "MAX_POSITIONS",
    "QUANTIZATIONS",
    "RunConverter",
    "default_out",
    "export_ctranslate2",
    "export_info",
    "vocabulary_tokens",
]
