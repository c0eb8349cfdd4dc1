"""The CMSIS-NN backend (Cortex-M with DSP or MVE): forward int8 kernels of Arm's CMSIS-NN.

CMSIS-NN enters the project only as the git submodule ``third_party/CMSIS-NN`` (v7.0.0); a user
with a checkout of their own points ``POCKENGINE_CMSIS_NN`` at it (or passes ``CMSIS_NN=...`` to
the generated Makefile). Without a checkout the backend is unavailable: ``--backend cmsis-nn``
is a one-line error and ``auto`` falls back to ref.

The records call thin wrappers in ``runtime_c/kernels/cmsis_nn`` that keep the ref kernels'
signatures (``pe_<op>_s8_cmsis``) and translate to CMSIS-NN's structs; a builder declines
(returns None) every configuration where CMSIS-NN is not bit-exact with TFLM's reference
kernels, and the next backend of the chain (ref) takes it.
"""

from __future__ import annotations

from .base import Backend, Builder, ThirdParty

CMSIS_NN_SOURCES = ThirdParty(
    name="CMSIS-NN", make_var="CMSIS_NN", env="POCKENGINE_CMSIS_NN",
    default="third_party/CMSIS-NN", marker="Include/arm_nnfunctions.h",
    include_dirs=("Include",), source_dirs=("Source",))

BUILDERS: dict[str, Builder] = {}

CMSIS_NN = Backend(
    name="cmsis-nn",
    summary="Arm CMSIS-NN v7.0.0 forward int8 kernels (Cortex-M with DSP or MVE)",
    builders=BUILDERS, kernel_dir="cmsis_nn", archs=("cortex-m", "host"),
    needs=("dsp", "mve"), third_party=CMSIS_NN_SOURCES)
