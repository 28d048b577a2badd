"""The special symbols every vocabulary shares, defined once.

Sentencepiece models are trained with these ids and synthetic vocabularies use them too,
so models, decoders and batches agree:

    PAD = 0   padding (never attended to, ignored by the loss)
    UNK = 1   unknown piece
    BOS = 2   begin of sentence (the first decoder input)
    EOS = 3   end of sentence (appended to every source and target)
"""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIAL_IDS = (PAD, UNK, BOS, EOS)
