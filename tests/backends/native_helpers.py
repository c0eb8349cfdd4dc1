"""native backend test helpers: the records of its out-of-line form (run-time arguments, the
bodies a generated model inlines) and host libraries of its kernels built for each of its code
paths (what -march=native gives, AVX-512 without VNNI, AVX2, portable), with ref for what
native declines."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

from codegen.backends import kernel_call
from codegen.backends.native import out_of_line
from codegen.ir import Graph, Op
from tests.kernels.c_runner import INCLUDES, KERNELS_DIR, compile_objects

NATIVE_SOURCES = sorted((KERNELS_DIR / "native").glob("*.c"))
NATIVE_INCLUDES = [*INCLUDES, f"-I{KERNELS_DIR / 'native'}"]
# form -> (compiler flags, the paths pe_native_path() may report for it)
FORMS = {"native": (["-march=native"], ("avx512-vnni", "avx512", "avx2", "portable")),
         "native-avx512": (["-march=native", "-mno-avx512vnni"], ("avx512",)),
         "native-avx2": (["-march=native", "-DPE_NV_NO_AVX512"], ("avx2",)),
         "native-portable": (["-DPE_NV_PORTABLE"], ("portable",))}


def native_or_ref(graph: Graph, op: Op, batch: int = 1):
    return out_of_line(graph, op, batch) or kernel_call(graph, op, batch)


def host_objects(out: Path, form: str, flags: list[str]) -> list[Path]:
    """The native kernels compiled for ``form``."""
    return compile_objects("gcc", out / "native", ["-fPIC", *FORMS[form][0], *flags],
                           NATIVE_SOURCES, NATIVE_INCLUDES)


def cpu_lacks(form: str) -> str | None:
    """Why this machine cannot run ``form``'s code (None: it can): -march=native must
    compile, and the AVX2 form needs an AVX2 CPU."""
    flags = FORMS[form][0]
    if "-march=native" in flags:
        probe = subprocess.run(["gcc", "-march=native", "-E", "-x", "c", "/dev/null"],
                               capture_output=True, check=False)
        if probe.returncode != 0:
            return "gcc does not take -march=native here"
    need = {"native-avx2": ("avx2",), "native-avx512": ("avx512f", "avx512bw", "avx512vl")}
    cpu = Path("/proc/cpuinfo")
    flags_line = next((ln for ln in cpu.read_text().splitlines() if ln.startswith("flags")),
                      "") if cpu.is_file() else ""
    missing = [f for f in need.get(form, ()) if f" {f}" not in flags_line]
    if missing:
        return f"this CPU has no {', '.join(missing)}"
    return None


def check_path(lib_path: Path, form: str) -> str:
    """The code path the library was compiled for (asserted to be one ``form`` allows)."""
    lib = ctypes.CDLL(str(lib_path))
    lib.pe_native_path.restype = ctypes.c_char_p
    got = lib.pe_native_path().decode()
    assert got in FORMS[form][1], (form, got)
    return got
