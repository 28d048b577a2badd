"""onnxruntime's session options, set once for every graph the runtime runs."""

from __future__ import annotations

import os
from typing import Any


def session_options(threads: int | None = None) -> Any:
    """onnxruntime options for a shared machine: `threads` (default: the cores this process
    may use) for one operator, one for running operators side by side (the graphs are
    chains), and no spinning: a waiting thread sleeps instead of holding its core between
    the many small calls of a search (onnxruntime spins by default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options
