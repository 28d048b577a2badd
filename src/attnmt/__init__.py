"""attnmt: attention in sequence models, from Bahdanau (2014) to the Transformer."""

__version__ = "0.1.0"
