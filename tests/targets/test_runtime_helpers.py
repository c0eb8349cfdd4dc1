"""The helpers the runtime provides instead of a C library / compiler-rt, checked on the
emulators against values computed here:

- Hexagon: __hexagon_{div,mod,udiv,umod}{si,di}3 (C truncation; division by zero as documented
  in pe_builtins_hexagon.c: x/0 = -1 or all ones, x%0 = x; INT_MIN/-1 = INT_MIN),
  __hexagon_divsf3, __hexagon_divdf3, __hexagon_muldf3, __hexagon_sqrtf (IEEE round to nearest
  even, subnormals exact, any NaN result = the Hexagon default NaN, all ones);
- every bare-metal board: memcpy / memmove / memset / memcmp / strlen (runtime_c/runtime/pe_libc.c).
"""

from __future__ import annotations

import numpy as np
import pytest

from codegen.targets import cross_compile, run_on_emulator

from .helpers import FIRMWARE, runnable

F32_NAN = 0xFFFFFFFF
F64_NAN = 0xFFFFFFFFFFFFFFFF


def _signed(u: int, bits: int) -> int:
    return u - (1 << bits) if u >> (bits - 1) else u


def int_expected(a: int, b: int, bits: int) -> tuple[int, int, int, int]:
    """(signed div, signed mod, unsigned div, unsigned mod) of two bit patterns, as patterns."""
    mask = (1 << bits) - 1
    sa, sb = _signed(a, bits), _signed(b, bits)
    if sb == 0:
        sq, sr = -1, sa
    elif sa == -(1 << (bits - 1)) and sb == -1:
        sq, sr = sa, 0
    else:
        sq = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)
        sr = sa - sq * sb
    uq, ur = (mask, a) if b == 0 else (a // b, a % b)
    return sq & mask, sr & mask, uq, ur


def int_operands(rng, bits: int, count: int) -> list[tuple[int, int]]:
    mask = (1 << bits) - 1
    top = 1 << (bits - 1)
    specials = [0, 1, 2, 3, 7, 10, 0xFFFF, 0x10000, 12345678, top - 1, top - 2]
    specials += [(-v) & mask for v in specials if v] + [top, top + 1]
    pairs = [(a, b) for a in specials for b in specials]
    for _ in range(count):
        a = int(rng.integers(0, 1 << int(rng.integers(1, bits + 1)), dtype=np.uint64))
        b = int(rng.integers(0, 1 << int(rng.integers(1, bits + 1)), dtype=np.uint64))
        if rng.random() < 0.5:
            a = (-a) & mask
        if rng.random() < 0.5:
            b = (-b) & mask
        pairs.append((a & mask, b & mask))
    return pairs


def float_operands(rng, dtype, count: int) -> list[tuple[int, int]]:
    """Bit patterns: specials pairwise, random bits, random finite values over the whole
    exponent range, and quotients/products that land among the subnormals."""
    utype = np.uint32 if dtype == np.float32 else np.uint64
    finfo = np.finfo(dtype)
    specials = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, 1 / 3, np.pi, 0.1, finfo.max,
                         -finfo.max, finfo.tiny, -finfo.tiny, finfo.smallest_subnormal,
                         -finfo.smallest_subnormal, finfo.tiny - finfo.smallest_subnormal,
                         finfo.eps, np.inf, -np.inf, np.nan], dtype=dtype).view(utype)
    specials = [int(v) for v in specials]
    bits = 32 if dtype == np.float32 else 64
    specials.append((1 << (bits - 1)) - 1)                     # a NaN with every bit set
    pairs = [(a, b) for a in specials for b in specials]
    raw = rng.integers(0, 1 << bits, size=(count, 2), dtype=np.uint64)
    pairs += [(int(a) & ((1 << bits) - 1), int(b) & ((1 << bits) - 1)) for a, b in raw]
    mant = rng.uniform(1, 2, size=(count, 2)) * rng.choice([-1, 1], size=(count, 2))
    exps = rng.integers(finfo.minexp - finfo.nmant, finfo.maxexp, size=(count, 2))
    vals = np.ldexp(mant, exps).astype(dtype).view(utype)
    pairs += [(int(a), int(b)) for a, b in vals]
    small = np.ldexp(rng.uniform(1, 2, count), rng.integers(finfo.minexp - 8, finfo.minexp + 4,
                                                            count)).astype(dtype)
    scale = np.ldexp(rng.uniform(1, 2, count), rng.integers(-6, 7, count)).astype(dtype)
    pairs += [(int(a), int(b)) for a, b in zip(small.view(utype), scale.view(utype))]
    return pairs


def as_float(u: int, dtype):
    utype = np.uint32 if dtype == np.float32 else np.uint64
    return np.array([u], dtype=utype).view(dtype)[0]


def bits_of(x, dtype, nan: int) -> int:
    if np.isnan(x):
        return nan
    utype = np.uint32 if dtype == np.float32 else np.uint64
    return int(np.array([x], dtype=dtype).view(utype)[0])


def write_vectors(path, rng) -> dict[str, int]:
    int32 = [(a, b, *int_expected(a, b, 32)) for a, b in int_operands(rng, 32, 2000)]
    int64 = [(a, b, *int_expected(a, b, 64)) for a, b in int_operands(rng, 64, 2000)]
    with np.errstate(all="ignore"):
        divsf = []
        for a, b in float_operands(rng, np.float32, 1000):
            q = as_float(a, np.float32) / as_float(b, np.float32)
            divsf.append((a, b, bits_of(q, np.float32, F32_NAN)))
        f64 = []
        for a, b in float_operands(rng, np.float64, 1000):
            fa, fb = as_float(a, np.float64), as_float(b, np.float64)
            f64.append((a, b, bits_of(fa / fb, np.float64, F64_NAN),
                        bits_of(fa * fb, np.float64, F64_NAN)))
        sqrt_in = [a for a, _ in float_operands(rng, np.float32, 1500)]
        sqrt_in += [int(v) for v in rng.integers(0, 0x7F800001, 1000)]      # all positives
        sqrtf = [(a, bits_of(np.sqrt(as_float(a, np.float32)), np.float32, F32_NAN))
                 for a in sqrt_in]

    def table(name, ctype, suffix, rows):
        body = ",\n".join("    {" + ", ".join(f"0x{v:x}{suffix}" for v in r) + "}"
                          for r in rows)
        return f"static const {ctype} {name}[][{len(rows[0])}] = {{\n{body}\n}};\n"

    text = ["/* generated by tests/targets/test_runtime_helpers.py */\n#include <stdint.h>\n"]
    for macro, name, ctype, suffix, rows in (
            ("N_INT32", "int32_cases", "uint32_t", "u", int32),
            ("N_INT64", "int64_cases", "uint64_t", "ull", int64),
            ("N_DIVSF", "divsf_cases", "uint32_t", "u", divsf),
            ("N_SQRTF", "sqrtf_cases", "uint32_t", "u", sqrtf),
            ("N_F64", "f64_cases", "uint64_t", "ull", f64)):
        text.append(f"#define {macro} {len(rows)}u\n" + table(name, ctype, suffix, rows))
    path.write_text("\n".join(text))
    return {"int32": len(int32), "int64": len(int64), "divsf": len(divsf),
            "sqrtf": len(sqrtf), "f64": len(f64)}


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("hexagon-v67", "hexagon-v66"))
def test_hexagon_builtins_are_exact(name, tmp_path):
    board = runnable(name)
    counts = write_vectors(tmp_path / "builtins_vectors.h", np.random.default_rng(1234))
    elf = cross_compile(board, [FIRMWARE / "builtins_check.c"], [tmp_path], tmp_path,
                        ["-Werror"])
    result = run_on_emulator(board, elf, timeout=120, profile=False)
    lines = [ln.split() for ln in result.stdout.splitlines() if not ln.startswith(" ")]
    report = {f[0]: (int(f[1]), int(f[2])) for f in lines}
    expected_cases = {
        "__hexagon_divsi3": counts["int32"], "__hexagon_modsi3": counts["int32"],
        "__hexagon_udivsi3": counts["int32"], "__hexagon_umodsi3": counts["int32"],
        "__hexagon_divdi3": counts["int64"], "__hexagon_moddi3": counts["int64"],
        "__hexagon_udivdi3": counts["int64"], "__hexagon_umoddi3": counts["int64"],
        "__hexagon_divsf3": counts["divsf"], "__hexagon_sqrtf": counts["sqrtf"],
        "__hexagon_divdf3": counts["f64"], "__hexagon_muldf3": counts["f64"]}
    assert {k: v[0] for k, v in report.items()} == expected_cases
    mismatches = {k: v[1] for k, v in report.items() if v[1]}
    assert not mismatches, result.stdout
    assert result.exit_code == 0


def test_expected_integer_semantics():
    m32 = (1 << 32) - 1
    assert int_expected(7, 0, 32) == (m32, 7, m32, 7)                  # x / 0, x % 0
    assert int_expected((-7) & m32, 2, 32) == ((-3) & m32, (-1) & m32, 0x7FFFFFFC, 1)
    assert int_expected(1 << 31, m32, 32) == (1 << 31, 0, 0, 1 << 31)  # INT_MIN / -1


@pytest.mark.emulator
@pytest.mark.parametrize("name", ("hexagon-v67", "mps2-an385", "mps2-an386", "mps3-an547"))
def test_libc_subset(name, tmp_path):
    board = runnable(name)
    elf = cross_compile(board, [FIRMWARE / "libc_check.c"], [], tmp_path, ["-Werror"])
    result = run_on_emulator(board, elf, timeout=60, profile=False)
    assert result.stdout == f"libc {71 * 64 * 5 + 71} 0\n"
    assert result.ok
