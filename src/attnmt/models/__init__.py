"""Sequence-to-sequence models, chosen by name:

- `rnnencdec`: RNN encoder–decoder without attention (Cho et al. 2014), the bottleneck
  baseline;
- `rnnsearch`: bidirectional GRU encoder, attentional GRU decoder (Bahdanau et al. 2015);
- `luong`: stacked LSTMs with global/local attention and input feeding (Luong et al. 2015);
- `transformer`: multi-head attention throughout (Vaswani et al. 2017).

Hard attention (Xu et al. 2015, `model.mode: hard`) works in both attentional RNNs; its
REINFORCE terms are in `attnmt.training.losses`.

    model = build_model(cfg.model, src_vocab_size, tgt_vocab_size)
    out = model(src, src_mask, tgt_in, need_weights=False)   # ModelOutput
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    logits, state, weights = model.step(prev_tokens, state, memory, need_weights=False)
    memory.select(indices); state.select(indices)            # beam search
"""

from attnmt.models.base import BatchFirst, ModelOutput, Seq2Seq
from attnmt.models.builder import build_model, model_names
from attnmt.models.luong import LuongNMT
from attnmt.models.rnn import RNNEncDec, RNNMemory, RNNState
from attnmt.models.rnnsearch import RNNSearch
from attnmt.models.transformer import Transformer, TransformerMemory, TransformerState

__all__ = [
    "BatchFirst",
    "LuongNMT",
    "ModelOutput",
    "RNNEncDec",
    "RNNMemory",
    "RNNSearch",
    "RNNState",
    "Seq2Seq",
    "Transformer",
    "TransformerMemory",
    "TransformerState",
    "build_model",
    "model_names",
]
