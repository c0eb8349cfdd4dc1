"""Training: specs, the training-graph builder (autodiff, sparse backward, optimizer, QAS).

``build_training_graph(graph, spec)`` turns an int8 forward graph into one IR graph that runs a
whole training step; docs/training.md is the contract for its ops and numerics.
"""

from .build import build_training_graph, check_spec_mode
from .report import format_training_graph, saved_activations, training_summary
from .rules import GRAD_RULES
from .spec import LayerUpdate, TrainSpec, load_spec, parse_short, resolve, spec_from_dict

__all__ = ["GRAD_RULES", "LayerUpdate", "TrainSpec", "build_training_graph", "check_spec_mode",
           "format_training_graph", "load_spec", "parse_short", "resolve", "saved_activations",
           "spec_from_dict", "training_summary"]
