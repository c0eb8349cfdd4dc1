"""Running generated projects: the host binary (``host``); emulators and devices come later."""

from .host import HostRunError, run_host_fit, run_host_infer, sample_order

__all__ = ["HostRunError", "run_host_fit", "run_host_infer", "sample_order"]
