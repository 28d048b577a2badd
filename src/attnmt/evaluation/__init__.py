"""Evaluating a trained model: `splits` (decode a split and score it: BLEU, chrF, exact
match, BLEU by length, speed, and attention against gold links) and `vision` (what
attention over images is scored and drawn with: digit accuracy, localisation, pictures).

`attnmt.report.evaluate_split` builds the one evaluation record from these for
`attnmt evaluate` and `attnmt.evaluate`."""
