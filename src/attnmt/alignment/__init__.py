"""Attention as word alignment: `links` (subwords merged to words, links read off a
weight matrix, symmetrised, scored against gold links: AER, precision, recall) and
`aligners` (eflomal, the statistical aligner attention is measured against).

Below decoding: a decoded sentence's record carries its word links."""
