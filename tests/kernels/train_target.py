"""Run kernel cases on emulated Cortex-M cores (QEMU, semihosting) and compare the results
with the golden model byte for byte: the training kernels here, forward kernels of other
backends through the same renderer (tests/backends/test_cmsis_nn_targets.py).

:func:`render_cases` turns single-op cases (kernel call records + input values) into one
freestanding C file: every tensor a static array (floats as exact hex literals), every
parameter struct a constant, each case's call followed by a 32-bit FNV-1a hash of the bytes it
wrote (outputs; for update ops every slot), printed through semihosting. No C library: the
image is the kernels, this file and the compiler's runtime (libgcc: soft float on a
Cortex-M3). :func:`expected_hashes` computes the same hashes from the golden kernels.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from codegen.backends import (
    ArrayArg,
    ConstArray,
    ContextArg,
    ExprArg,
    FunctionArg,
    KernelCall,
    NullArg,
    ScalarArg,
    Struct,
    StructArg,
    StructArrayArg,
    TensorArg,
    TensorListArg,
    kernel_call,
)
from codegen.golden.train_kernels import build_train_kernel
from codegen.ir import Graph
from codegen.targets import run_on_emulator

from .c_runner import INCLUDES, KERNELS_DIR, STRICT_FLAGS
from .train_runner import c_array

TARGETS = {
    # name: (start-up, emulator command, compiler flags)
    "cortex-m4f": ("arm", ["qemu-system-arm", "-M", "mps2-an386"],
                   ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]),
    "cortex-m3": ("arm", ["qemu-system-arm", "-M", "mps2-an385"],
                  ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"]),
    "hexagon-v67": ("hexagon", ["qemu-hexagon"], ["--target=hexagon", "-mv67"]),
}
TOOLS = {"arm": ("arm-none-eabi-gcc", "qemu-system-arm"), "hexagon": ("clang", "qemu-hexagon")}
# Without compiler-rt, Hexagon code needs the runtime's division helpers (IEEE float division
# included): the project's own, from the Hexagon start-up code.
HEXAGON_BUILTINS = KERNELS_DIR.parent / "startup" / "hexagon" / "pe_builtins_hexagon.c"

_CTYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t",
           np.dtype(np.int16): "int16_t", np.dtype(np.int32): "int32_t",
           np.dtype(np.float32): "float"}

_ARM_ENTRY = r"""
/* Minimal Cortex-M start-up: vector table, FPU on, main, semihosting output and exit. */
extern uint32_t __stack_top;
int main(void);

static void pe_semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}

static void pe_puts(const char *s)
{
    pe_semihost(0x04, s);                             /* SYS_WRITE0 */
}

void pe_reset(void)
{
    static uint32_t block[2];
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;  /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n\tisb");
#endif
    block[0] = 0x20026u;                              /* ADP_Stopped_ApplicationExit */
    block[1] = (uint32_t)main();
    pe_semihost(0x20, block);                         /* SYS_EXIT_EXTENDED */
    for (;;) {
    }
}

__attribute__((section(".vectors"), used)) const void *const pe_vectors[2] = {
    &__stack_top, (const void *)pe_reset};
"""

_HEXAGON_ENTRY = r"""
/* Minimal Hexagon start-up under qemu-hexagon (Linux user mode: the loader maps the image and
 * sets up the stack): Linux write / exit through trap0. */
int main(void);

static long pe_trap(long n, long a, long b, long c)
{
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = n;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

static void pe_puts(const char *s)
{
    long n = 0;
    while (s[n] != 0) {
        ++n;
    }
    pe_trap(64, 1, (long)s, n);                       /* write(1, s, n) */
}

/* The helpers' memcpy (no C library); volatile, so it cannot become a call to itself. */
void *memcpy(void *dst, const void *src, __SIZE_TYPE__ n)
{
    volatile uint8_t *d = (volatile uint8_t *)dst;
    const volatile uint8_t *p = (const volatile uint8_t *)src;
    while (n-- != 0) {
        *d++ = *p++;
    }
    return dst;
}

void _start(void)
{
    pe_trap(93, main(), 0, 0);                        /* exit(main()) */
    for (;;) {
    }
}
"""

# One function per case, and under clang not optimised: at -O2 a harness of a few hundred
# cases took clang minutes (the kernels it calls are compiled with the board's flags as
# usual). Calls inlined into small functions of their own also found a GCC 12 scheduling bug
# in the arm backend's Helium columns (pe_arm_conv.h) that one large main did not show.
_CASE = r"""
#if defined(__clang__)
#define PE_CASE __attribute__((optnone, noinline)) static void
#else
#define PE_CASE __attribute__((noinline)) static void
#endif
"""

_COMMON = r"""
static void pe_put_hex(uint32_t v)
{
    static char buf[10];
    int i;
    for (i = 0; i < 8; ++i) {
        buf[i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 15u];
    }
    buf[8] = '\n';
    buf[9] = 0;
    pe_puts(buf);
}

static uint32_t pe_fnv(uint32_t h, const void *data, uint32_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t i;
    for (i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}
"""

LINKER_SCRIPT = """
MEMORY { RAM (rwx) : ORIGIN = 0x00000000, LENGTH = 4M }
SECTIONS {
  .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > RAM
  .data : { *(.data*) } > RAM
  .bss : { *(.bss*) *(COMMON) } > RAM
  . = ALIGN(8);
  . = . + 0x10000;
  __stack_top = .;
}
"""


def fnv1a(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _literal(v, ctype: str) -> str:
    if ctype == "float":
        f = float(np.float32(v))
        if np.isnan(f):
            return "__builtin_nanf(\"\")"
        if np.isinf(f):
            return "__builtin_inff()" if f > 0 else "-__builtin_inff()"
        return f"{f.hex()}f" if f != 0 or not np.signbit(f) else "-0.0f"
    v = int(v)
    if ctype == "int32_t" and v == -2**31:
        return "(-2147483647 - 1)"
    return str(v)


def _array(name: str, arr: np.ndarray, const: bool) -> str:
    ctype = _CTYPES[arr.dtype]
    flat = arr.reshape(-1)
    body = ", ".join(_literal(x, ctype) for x in flat) if flat.size else "0"
    q = "const " if const else ""
    return f"static {q}{ctype} {name}[{max(flat.size, 1)}] __attribute__((aligned(8))) = " \
           f"{{{body}}};"


class _Case:
    def __init__(self, index: int, call: KernelCall, values: dict[str, np.ndarray],
                 written: Sequence[str]):
        self.index, self.call, self.values, self.written = index, call, values, written


def struct_init(s: Struct, arrays: list[str], prefix: str) -> str:
    parts = []
    for fname, ctype, v in s.items():
        if isinstance(v, Struct):
            parts.append(struct_init(v, arrays, f"{prefix}_{fname}"))
        elif isinstance(v, ConstArray) and not v.values.size:  # as the renderer: NULL
            parts.append("0")
        elif isinstance(v, ConstArray):
            name = f"{prefix}_{fname}"
            arrays.append(_array(name, np.asarray(v.values), True))
            parts.append(name)
        else:
            parts.append(_literal(v, ctype))
    return "{" + ", ".join(parts) + "}"


Record = Callable[[Graph, list], KernelCall]
Expected = Callable[[Graph, list], dict[str, np.ndarray]]
# (call, case index) -> (declarations, statements after the call, the values they print)
Probe = Callable[[KernelCall, int], tuple[list[str], list[str], list[int]]]


def training_record(graph: Graph, inputs: list) -> KernelCall:
    return kernel_call(graph, graph.ops[0])


def training_expected(graph: Graph, inputs: list) -> dict[str, np.ndarray]:
    """The bytes a training kernel writes: its outputs, or for an update op every slot."""
    op = graph.ops[0]
    golden = build_train_kernel(graph, op).run(list(inputs))
    vals = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
            for n, v in zip(op.inputs, inputs) if n}
    if op.outputs:
        return {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, v)
                for n, v in zip(op.outputs, golden)}
    return {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape, golden.get(n, vals[n]))
            for n in vals}


def chunk_cases(cases: Sequence[tuple], image_bytes: int, max_cases: int = 0) -> list[list]:
    """Single-op cases (graph, inputs, batch, ...) split into images of at most
    ``image_bytes`` of tensor data (and ``max_cases`` cases, when given), in order."""
    chunks: list[list] = [[]]
    size = 0
    for c in cases:
        n = sum(t.nbytes for t in c[0].tensors.values()) * c[2]
        if chunks[-1] and (size + n > image_bytes or
                           (max_cases and len(chunks[-1]) >= max_cases)):
            chunks.append([])
            size = 0
        chunks[-1].append(c)
        size += n
    return chunks


def _c_args(call: KernelCall, tag: str, scratch: int, tnames: dict[str, str],
            decls: list[str]) -> list[str]:
    """The C arguments of one call (its constants, lists and functions added to ``decls``)."""
    args = []
    for k, (arg_name, arg) in enumerate(call.args):
        if isinstance(arg, ContextArg) and scratch > 0:
            decls.append(f"static uint8_t {tag}_scratch[{scratch}] "
                         "__attribute__((aligned(8)));")
            decls.append(f"static const pe_context {tag}_ctx = {{{tag}_scratch, {scratch}}};")
            args.append(f"&{tag}_ctx")
        elif isinstance(arg, ContextArg | NullArg):
            args.append("0")
        elif isinstance(arg, StructArg):
            sname = f"{tag}_s{k}"
            arrays: list[str] = []
            init = struct_init(arg.value, arrays, sname)
            decls.extend(arrays)
            decls.append(f"static const {arg.value.ctype} {sname} = {init};")
            args.append(f"&{sname}")
        elif isinstance(arg, StructArrayArg):
            sname = f"{tag}_s{k}"
            arrays = []
            inits = [struct_init(v, arrays, f"{sname}_{e}") for e, v in enumerate(arg.values)]
            decls.extend(arrays)
            decls.append(f"static const {arg.struct} {sname}[{len(inits)}] = "
                         f"{{{', '.join(inits)}}};")
            args.append(sname)
        elif isinstance(arg, TensorListArg):
            lname = f"{tag}_l{k}"
            elem = arg.ctype.strip()[:-1].strip()            # 'const int8_t *const'
            decls.append(f"static {elem} {lname}[{len(arg.tensors)}] = "
                         f"{{{', '.join(tnames[t] for t in arg.tensors)}}};")
            args.append(lname)
        elif isinstance(arg, TensorArg):
            args.append(tnames[arg.tensor])
        elif isinstance(arg, ArrayArg):
            aname = f"{tag}_a{k}"
            decls.append(_array(aname, np.asarray(arg.value.values), True))
            args.append(aname)
        elif isinstance(arg, ScalarArg):
            args.append(_literal(arg.value, arg.ctype))
        elif isinstance(arg, ExprArg):
            args.append(arg.expr)
        elif isinstance(arg, FunctionArg):          # defined here, as a generated model does
            fname = f"{tag}_f{k}"
            lines = [f"static void {fname}({arg.params})", "{", f"    switch ({arg.select}) {{"]
            for n, case in enumerate(arg.cases):
                inner = _c_args(case, f"{fname}_{n}", 0, tnames, decls)
                lines += [f"    case {n}:", f"        {case.kernel}({', '.join(inner)});",
                          "        break;"]
            decls.append("\n".join([*lines, "    default:", "        break;", "    }", "}"]))
            args.append(fname)
        else:
            raise TypeError(f"{arg_name}: {arg!r}")
    return args


def render_cases(cases: Sequence[tuple[Graph, list]], record: Record = training_record,
                 expected: Expected = training_expected,
                 headers: Sequence[str] = ("pe_train_kernels.h",), fill: int = 0,
                 probe: Probe | None = None) -> tuple[str, list[int]]:
    """(C source, expected printed values) for single-op cases (graph, input values):
    ``record`` makes each case's call, ``expected`` the bytes it must write (by tensor), which
    start as ``fill``; a call with scratch gets a ``pe_context`` over a static buffer of its
    ``scratch_bytes``; ``probe`` may add statements that print more values per case."""
    decls: list[str] = []
    body: list[str] = []
    printed: list[int] = []
    for i, (graph, inputs) in enumerate(cases):
        op = graph.ops[0]
        call = record(graph, inputs)
        want = expected(graph, inputs)
        vals = {n: c_array(graph.tensors[n].dtype, graph.tensors[n].shape
                           if graph.tensors[n].dtype == "bit" else np.shape(v), v)
                for n, v in zip(op.inputs, inputs) if n}
        tnames: dict[str, str] = {}
        for k, name in enumerate(dict.fromkeys(call.tensors())):
            t = graph.tensors[name]
            arr = (np.full_like(want[name], fill) if name in op.outputs else vals.get(name))
            if arr is None:
                arr = c_array(t.dtype, t.shape, t.data)
            cname = f"c{i}_t{k}"
            writes = name in want
            decls.append(_array(cname, arr, const=not writes))
            tnames[name] = cname
        args = _c_args(call, f"c{i}", call.scratch_bytes, tnames, decls)
        body.append(f"PE_CASE c{i}_run(void)")
        body.append("{")
        body.append("    uint32_t h;")
        body.append(f"    {call.kernel}({', '.join(args)});")
        body.append("    h = 2166136261u;")
        data = b""
        for name in want:
            body.append(f"    h = pe_fnv(h, {tnames[name]}, (uint32_t)sizeof {tnames[name]});")
            arr = want[name]
            data += arr.tobytes() + b"\0" * ((max(arr.size, 1) * arr.itemsize) - arr.nbytes)
        body.append("    pe_put_hex(h);")
        printed.append(fnv1a(data))
        if probe is not None:
            more_decls, stmts, values = probe(call, i)
            decls += more_decls
            body += stmts
            printed += values
        body.append("}")
    src = "\n".join(["#include <stdint.h>", *[f'#include "{h}"' for h in headers], "@ENTRY@",
                     _COMMON, _CASE, *decls, *body, "int main(void)", "{",
                     *[f"    c{i}_run();" for i in range(len(cases))], "    return 0;", "}",
                     ""])
    return src, printed


def run_board_cases(board, elf: Path, want: Sequence[int], timeout: float = 600) -> list[int]:
    """Run a case image built with ``codegen.targets.cross_compile`` on ``board``'s emulator;
    the hashes it printed, one per expected value (asserted)."""
    res = run_on_emulator(board, elf, timeout=timeout)
    assert res.ok, (res.exit_code, res.fault, res.stderr[-2000:])
    got = [int(w, 16) for w in res.stdout.split() if len(w) == 8]
    assert len(got) == len(want), f"{board.name}: {len(got)} of {len(want)} values printed"
    return got


def build_and_run(src: str, out: Path, target: str, sources: Sequence[Path],
                  timeout: float = 300) -> list[int]:
    """Compile the harness and the kernels for ``target``, run it in the emulator; the hashes
    it printed."""
    kind, emulator, flags = TARGETS[target]
    out.mkdir(parents=True, exist_ok=True)
    entry = _ARM_ENTRY if kind == "arm" else _HEXAGON_ENTRY
    (out / "harness.c").write_text(src.replace("@ENTRY@", entry))
    elf = out / "train.elf"
    cc = TOOLS[kind][0]
    freestanding = ["-ffreestanding"] + (["-nostdlibinc"] if kind == "hexagon" else [])
    objs = []
    extra = [HEXAGON_BUILTINS] if kind == "hexagon" else []
    for src_path in [*sources, *extra]:          # the kernels: strict C99
        obj = out / (src_path.stem + ".o")
        subprocess.run([cc, *STRICT_FLAGS, "-O2", *flags, *freestanding, *INCLUDES, "-c",
                        str(src_path), "-o", str(obj)], check=True, capture_output=True,
                       text=True)
        objs.append(str(obj))
    # the harness (not optimised: one huge main): start-up code with inline assembly and a
    # vector table, so no -pedantic
    harness = ["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-O0", *flags,
               *freestanding, "-nostdlib", *INCLUDES, str(out / "harness.c"), *objs]
    if kind == "arm":
        (out / "link.ld").write_text(LINKER_SCRIPT)
        cmd = [cc, *harness, "-T", str(out / "link.ld"), "-lgcc", "-o", str(elf)]
    else:
        cmd = [cc, *harness, "-fuse-ld=lld", "-static", "-o", str(elf)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    run = [*emulator, str(elf)] if kind == "hexagon" else \
        [*emulator, "-nographic", "-semihosting-config", "enable=on,target=native",
         "-monitor", "none", "-serial", "none", "-kernel", str(elf)]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{target}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    text = proc.stdout + proc.stderr              # ARM semihosting writes to the host's stderr
    return [int(w, 16) for w in re.findall(r"^[0-9a-f]{8}$", text, flags=re.MULTILINE)]
