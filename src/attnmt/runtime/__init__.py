"""Decoding an ONNX export without torch: onnxruntime runs the graphs, numpy holds the
arrays, sentencepiece tokenises, and the search is attnmt's own (`attnmt.decoding.search`
over numpy arrays). Importing it never imports torch.

    from attnmt.runtime import load_export
    from attnmt.decoding.translator import Translator
    export = load_export("runs/quickstart/onnx")         # attnmt export RUN --format onnx
    (sentence,) = Translator(export, beam=5).translate(["In the beginning was the Word."])

`model.OnnxModel` is the step interface over the two graphs, `runs.load_export` the
export as a loaded run, `arrays.NUMPY` the search's operations over numpy.
"""

from attnmt.runtime.model import OnnxModel, is_export, read_info
from attnmt.runtime.runs import ExportRun, load_export

__all__ = ["ExportRun", "OnnxModel", "is_export", "load_export", "read_info"]
