"""The golden model: NumPy execution of IR graphs, the oracle for every generated kernel.

int8 graphs run bit exact with TFLM's reference kernels (NUMERICS.md); float32 graphs run in
float32 (accumulating in float64). Batch on axis 0 everywhere.

    outputs = golden.run(graph, x)                       # one array per graph input
    values = golden.execute(graph, {"input": x}, keep_all=True)   # every tensor, by name
    program = golden.prepare(graph); program.run(x)      # build kernels once, run many times
"""

from .executor import Program, execute, prepare, run

__all__ = ["Program", "execute", "prepare", "run"]
