"""Running generated projects: the host binary (``host``); emulators and devices come later."""

from ..data import sample_order
from .host import HostRunError, run_host_fit, run_host_infer

__all__ = ["HostRunError", "run_host_fit", "run_host_infer", "sample_order"]
