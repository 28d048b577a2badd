"""Exporting a trained run for decoding elsewhere: `onnx` (an encoder graph and a
decoder-step graph, decoded by `attnmt.runtime` without torch) over `onnx_graphs`,
`ctranslate2` (a Transformer run for CTranslate2) and `directory` (what every export
directory shares: provenance, vocabulary, the build into a staging directory).

    attnmt export RUN --format onnx [--quantize int8]        # RUN/onnx or RUN/onnx-int8"""
