"""stream_chain: the golden kernels of the ops it stands for, run one after the other.

The op computes exactly what its chain computes (that is its contract, ``ir.stream``), so its
golden kernel is the chain's: each stage's own kernel (conv2d, depthwise_conv2d, add: the
TFLM arithmetic of those ops, built from the same tensors and attributes) on whole tensors.
How the C kernels cut the work into row bands is theirs to get right against this.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.stream import chain_graph
from .common import Kernel, OpView


def build_stream_chain(view: OpView, build: Callable[[OpView], Kernel]) -> Kernel:
    """The chain's kernels composed; ``build`` prepares one op's kernel (the package's
    ``KERNEL_BUILDERS`` dispatch)."""
    chain = chain_graph(view.graph, view.op)
    if view.x().dtype != "int8":
        raise view.unsupported_dtype(view.x().dtype)
    steps = [(op, build(OpView(chain, op))) for op in chain.ops]

    def stream_chain(x: np.ndarray, *_) -> np.ndarray:
        env = {chain.inputs[0]: x}
        for op, kernel in steps:
            env[op.outputs[0]] = kernel(*[env.get(n, chain.tensors[n].data) if n else None
                                          for n in op.inputs])
        return env[chain.outputs[0]]
    return stream_chain
