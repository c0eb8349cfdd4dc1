"""Boards as data: one YAML file per board in boards/, validated against a strict schema.

A board says what it *is* (CPU, features, memory map with explicit units, the budget a real part
of that class has), how to *build* for it (toolchain, flags) and how to *run* it (emulator). The
serial port attached to a real board is never in the file (it is a CLI flag).

Sizes are strings with units (``256 KiB``, ``1 MiB``, ``512 B``); addresses are integers
(YAML ``0x20000000``). Unknown keys, bare numbers for sizes and values outside an enumeration
are errors (``SpecError``, one line naming the file and the key).

Memory map: the regions *as the board's emulator models them* (checked by running code on it,
tests/targets); ``flash`` (code, constants, the .data load image) and ``sram`` (stack, .data,
.bss) are required on every device board, further regions (``ccm``, ``dtcm``...) are free for
placement. ``budget`` is what a real part of the class has; ``pockengine build`` checks a
firmware against it, and it may not exceed the emulated regions (what fits the budget runs).

Console: ``semihosting`` (Arm, through the debugger / QEMU), ``uart`` (a UART peripheral, with
its base address: Renode boards and detached hardware), ``trap0`` (Hexagon Linux user mode),
``stdio`` (host). ``uart`` describes the board's serial peripheral (for the serial protocol,
and for a UART console).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SpecError, brief
from .resources import data_dir

ARCHS = ("cortex-m", "hexagon", "host")
TOOLCHAINS = ("arm-none-eabi-gcc", "clang-hexagon", "host-cc")
EMULATORS = ("qemu-system-arm", "qemu-hexagon", "renode", "native")
CONSOLES = ("semihosting", "uart", "trap0", "stdio")
UART_TYPES = ("cmsdk-apb-uart", "stm32-usart", "stm32-usart-v2", "nrf-uarte")
FEATURES = ("dsp", "fpu_sp", "fpu_dp", "mve", "mve_fp", "hvx", "trustzone", "simd")
BACKWARD = ("fp32", "int8")
BACKENDS = ("ref", "arm", "cmsis-nn", "hvx", "native")

# which toolchain, console and emulators go with which architecture
_ARCH_TOOLCHAIN = {"cortex-m": "arm-none-eabi-gcc", "hexagon": "clang-hexagon", "host": "host-cc"}
_ARCH_CONSOLES = {"cortex-m": ("semihosting", "uart"), "hexagon": ("trap0",), "host": ("stdio",)}
_ARCH_EMULATORS = {"cortex-m": ("qemu-system-arm", "renode"), "hexagon": ("qemu-hexagon",),
                   "host": ("native",)}

@dataclass(frozen=True)
class _Int:
    """An integer in [lo, hi]."""
    lo: int
    hi: int


@dataclass(frozen=True)
class _Text:
    """A string matching ``pattern`` (``re.fullmatch``, ASCII) — board files are data: what
    reaches a command line, a Makefile or a generated script is one word of a known shape."""
    pattern: str
    shape: str                  # what it looks like, for the error message


_U32 = _Int(0, 2**32 - 1)
_WORD = _Text(r"[a-z0-9][a-z0-9._+-]{0,63}", "a lower-case word such as cortex-m4")
_NAME = _Text(r"[a-z0-9][a-z0-9._-]{0,63}", "lower-case letters, digits, '.', '_' and '-'")
# One line of printable text (no control characters): summaries and notes.
_LINE = _Text(r"[^\x00-\x1f\x7f]{0,300}", "one line of printable text (at most 300 characters)")
_NOTES = _Text(r"[^\x00-\x1f\x7f]{0,2000}", "one line of printable text (at most 2000 "
               "characters)")
# Compiler and linker flags as real boards have them: -m..., -f..., -D/-U macros, -O, -g,
# --target=, -l libraries and -Wl, linker options; values are words (no paths, no shell or make
# syntax). Plugins (code loaded into the compiler) are refused by name.
_FLAG_VALUE = r"[A-Za-z0-9_.+-]+"
_CFLAG = _Text(r"(?!-f(no-)?plugin)(-m[a-z0-9][a-z0-9_.+-]*|-f[a-z][a-z0-9_.+-]*)"
               rf"(={_FLAG_VALUE})?|-D[A-Za-z_][A-Za-z0-9_]*(={_FLAG_VALUE})?"
               r"|-U[A-Za-z_][A-Za-z0-9_]*|-O[0-3sgz]?|-g[0-3]?|--target=[a-z0-9][a-z0-9_.-]*",
               "a -m/-f/-D/-U/-O/-g/--target= flag whose value is a plain word")
_LDFLAG = _Text(rf"{_CFLAG.pattern}|-l[A-Za-z0-9_+-]+"
                r"|(?!.*plugin)-Wl,-{1,2}[a-z][a-z0-9_-]*(=[A-Za-z0-9_.+-]+)?(,[A-Za-z0-9_.+=-]+)*",
                "a compiler flag, -lLIB or a -Wl, option whose values are plain words")
# extra emulator arguments: machine configuration options only, values without paths
_EMULATOR_ARG = _Text(r"-(m|smp|icount|rtc|global|accel)|[A-Za-z0-9_][A-Za-z0-9_.,=:+-]*",
                      "one of -m, -smp, -icount, -rtc, -global, -accel or a value without "
                      "paths")
_PLATFORM = _Text(r"[A-Za-z0-9_.+-][A-Za-z0-9_./+-]*\.repl", "a .repl path without spaces")
_PERIPHERAL = _Text(r"[A-Za-z_][A-Za-z0-9_.]{0,63}", "a Renode peripheral name such as "
                    "sysbus.uart0")

# schema: key -> (required, type or nested schema); "size" = a size with explicit units
_MEMORY_REGION = {"origin": (True, _U32), "size": (True, "size")}
_UART = {
    "type": (True, UART_TYPES),
    "base": (True, _U32),
    "irq": (False, _Int(0, 1023)),
    "clock_hz": (False, _U32),
    "tx_pin": (False, _Int(0, 255)),     # nRF: the TX / RX pin numbers (PSEL.TXD / PSEL.RXD)
    "rx_pin": (False, _Int(0, 255)),
    "qemu_serial": (False, _Int(0, 3)),  # QEMU: which -serial port (serial_hd index) it is
    "renode_name": (False, _PERIPHERAL),  # Renode: the peripheral's name (sysbus.usart1)
}
_CONSOLE = {"kind": (True, CONSOLES), "base": (False, _U32), "type": (False, UART_TYPES)}
_SCHEMA: dict[str, tuple[bool, Any]] = {
    "name": (True, _NAME),
    "summary": (True, _LINE),
    "arch": (True, ARCHS),
    "cpu": (True, _WORD),
    "features": (False, [FEATURES]),
    "toolchain": (True, TOOLCHAINS),
    "cflags": (False, [_CFLAG]),
    "ldflags": (False, [_LDFLAG]),
    "memory": (False, {"*": _MEMORY_REGION}),
    "budget": (True, {"sram": (True, "size"), "flash": (True, "size")}),
    "stack": (False, "size"),
    "console": (True, "console"),
    "uart": (False, _UART),
    "run": (True, {"emulator": (True, EMULATORS), "machine": (False, _WORD),
                   "cpu": (False, _WORD), "args": (False, [_EMULATOR_ARG]),
                   "platform": (False, _PLATFORM)}),
    "defaults": (False, {"backward": (False, BACKWARD), "backend": (False, BACKENDS)}),
    "notes": (False, _NOTES),
}

DEFAULT_STACK_BYTES = 8 * 1024

_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "kB": 1000, "MB": 1000 ** 2}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|kB|MB)\s*", re.ASCII)
MAX_SIZE = 1 << 40              # bytes; no board has more (and the numbers stay exact)
_REGION_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


def parse_size(text: Any, where: str) -> int:
    """'256 KiB' -> 262144. Bare numbers are refused: units must be explicit."""
    from fractions import Fraction  # lazy: --help imports this module

    m = _SIZE.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise SpecError(f"{where}: size {brief(text)} needs explicit units (e.g. '256 KiB', "
                        "'1 MiB', '512 B')")
    digits = m.group(1).lstrip("0")
    value = Fraction(m.group(1)) * _UNITS[m.group(2)] if len(digits) <= 30 else None
    if value is None or value > MAX_SIZE:
        raise SpecError(f"{where}: size {brief(text)} is more than {format_size(MAX_SIZE)}")
    if value.denominator != 1:
        raise SpecError(f"{where}: size {brief(text)} is not a whole number of bytes")
    return int(value)


def format_size(n: int) -> str:
    """262144 -> '256 KiB' (the largest binary unit that divides n exactly)."""
    for unit, factor in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def _check(value: Any, schema: Any, where: str) -> Any:
    if schema == "size":
        return parse_size(value, where)
    if schema == "console":                   # 'semihosting' or {kind: uart, base: ...}
        if isinstance(value, str):
            value = {"kind": value}
        return _check(value, _CONSOLE, where)
    if isinstance(schema, _Int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {brief(value)}")
        if not schema.lo <= value <= schema.hi:
            raise SpecError(f"{where}: {brief(value)} is outside {schema.lo}..{schema.hi:#x}"
                            if schema.hi > 4096 else
                            f"{where}: {brief(value)} is outside {schema.lo}..{schema.hi}")
        return value
    if isinstance(schema, _Text):
        if not isinstance(value, str):
            raise SpecError(f"{where}: expected a string, got {brief(value)}")
        if not re.fullmatch(schema.pattern, value, re.ASCII):
            raise SpecError(f"{where}: {brief(value)} is not {schema.shape}")
        return value
    if isinstance(schema, tuple):             # enumeration
        if not isinstance(value, str) or value not in schema:
            raise SpecError(f"{where}: {brief(value)} is not one of {', '.join(schema)}")
        return value
    if isinstance(schema, list):              # list of one element type
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {brief(value)}")
        return [_check(v, schema[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {brief(value)}")
        if "*" in schema:                     # free keys, one value schema
            for k in value:
                if not isinstance(k, str) or not _REGION_NAME.fullmatch(k):
                    raise SpecError(f"{where}.{brief(k, quote=False)}: region names are "
                                    "lower-case identifiers")
            return {k: _check(v, schema["*"], f"{where}.{k}") for k, v in value.items()}
        unknown = sorted(brief(k, 40, quote=False) for k in value if k not in schema)
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)} "
                            f"(allowed: {', '.join(schema)})")
        out = {}
        for key, (required, sub) in schema.items():
            if key not in value:
                if required:
                    raise SpecError(f"{where}: missing required key {key!r}")
                continue
            out[key] = _check(value[key], sub, f"{where}.{key}")
        return out
    raise TypeError(schema)


@dataclass(frozen=True)
class Board:
    name: str
    summary: str
    arch: str
    cpu: str
    toolchain: str
    budget: dict[str, int]
    console: dict[str, Any]
    run: dict[str, Any]
    memory: dict[str, dict[str, int]] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    stack: int = DEFAULT_STACK_BYTES
    uart: dict[str, Any] | None = None
    defaults: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    path: str = ""

    @property
    def sram_budget(self) -> int:
        return self.budget["sram"]

    @property
    def flash_budget(self) -> int:
        return self.budget["flash"]

    @property
    def has_fpu(self) -> bool:
        return "fpu_sp" in self.features or self.arch in ("host", "hexagon")

    @property
    def default_backward(self) -> str:
        return self.defaults.get("backward", "fp32" if self.has_fpu else "int8")

    @property
    def emulator(self) -> str:
        return self.run["emulator"]

    @property
    def console_kind(self) -> str:
        return self.console["kind"]


def _check_consistency(v: dict[str, Any], where: str) -> None:
    arch = v["arch"]
    if v["toolchain"] != _ARCH_TOOLCHAIN[arch]:
        raise SpecError(f"{where}.toolchain: {v['toolchain']!r} does not build for arch "
                        f"{arch!r} (use {_ARCH_TOOLCHAIN[arch]!r})")
    kind = v["console"]["kind"]
    if kind not in _ARCH_CONSOLES[arch]:
        raise SpecError(f"{where}.console: {kind!r} is not available on arch {arch!r} "
                        f"(one of {', '.join(_ARCH_CONSOLES[arch])})")
    emulator = v["run"]["emulator"]
    if emulator not in _ARCH_EMULATORS[arch]:
        raise SpecError(f"{where}.run.emulator: {emulator!r} does not run arch {arch!r}")
    if emulator == "qemu-system-arm" and "machine" not in v["run"]:
        raise SpecError(f"{where}.run: qemu-system-arm needs 'machine'")
    if emulator == "renode" and "platform" not in v["run"]:
        raise SpecError(f"{where}.run: renode needs 'platform' (a .repl file)")
    if kind == "uart":
        console = v["console"]
        if "base" not in console:
            raise SpecError(f"{where}.console: a uart console needs 'base'")
        if "type" not in console:
            uart = v.get("uart")
            if uart is None or uart["base"] != console["base"]:
                raise SpecError(f"{where}.console: a uart console needs 'type' (or a 'uart' "
                                f"section with the same base)")
            console["type"] = uart["type"]
    elif "base" in v["console"] or "type" in v["console"]:
        raise SpecError(f"{where}.console: 'base' and 'type' belong to a uart console only")

    memory = v.get("memory", {})
    if arch != "host":
        for region in ("flash", "sram"):
            if region not in memory:
                raise SpecError(f"{where}.memory: missing region {region!r}")
    spans = []
    for name, region in memory.items():
        lo, size = region["origin"], region["size"]
        if lo < 0 or size <= 0 or lo + size > 1 << 32:
            raise SpecError(f"{where}.memory.{name}: origin {lo:#x} + size {size} is outside "
                            "the 32-bit address space")
        spans.append((lo, lo + size, name))
    spans.sort()
    for (_, hi_a, a), (lo_b, _, b) in itertools.pairwise(spans):
        if lo_b < hi_a:
            raise SpecError(f"{where}.memory: regions {a!r} and {b!r} overlap")
    if arch != "host":
        for key in ("sram", "flash"):
            if v["budget"][key] > memory[key]["size"]:
                raise SpecError(
                    f"{where}.budget.{key}: {format_size(v['budget'][key])} is more than the "
                    f"emulated region ({format_size(memory[key]['size'])})")
    features = v.get("features", [])
    hard_float = any(f in ("-mfloat-abi=hard", "-mfloat-abi=softfp") for f in v.get("cflags", []))
    if arch == "cortex-m" and hard_float and "fpu_sp" not in features:
        raise SpecError(f"{where}.cflags: a hardware float ABI needs feature 'fpu_sp'")
    if arch == "cortex-m" and "fpu_sp" in features and not hard_float:
        raise SpecError(f"{where}.cflags: feature 'fpu_sp' needs -mfloat-abi=hard (or softfp)")


def board_from_dict(d: Any, where: str) -> Board:
    v = _check(d, _SCHEMA, where)
    _check_consistency(v, where)
    for list_key in ("features", "cflags", "ldflags"):
        if list_key in v:
            v[list_key] = tuple(v[list_key])
    return Board(**v, path=where)


def boards_dir() -> Path:
    return data_dir("boards")


def load_board_file(path: Path) -> Board:
    from .safe_yaml import load_yaml_file  # lazy: yaml; --help imports this module

    board = board_from_dict(load_yaml_file(path, "board file"), str(path.name))
    if board.name != path.stem:
        raise SpecError(f"{path.name}: board name {board.name!r} differs from the file name")
    return board


def list_boards() -> list[Board]:
    return [load_board_file(p) for p in sorted(boards_dir().glob("*.yaml"))]


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:                  # a name too long for the file system
        return False


def is_board_path(name_or_path: str) -> bool:
    """Whether ``--board`` names a YAML file (a board of one's own) rather than a catalogue
    board."""
    return Path(name_or_path).suffix in (".yaml", ".yml")


def load_board(name_or_path: str) -> Board:
    """A board by catalogue name (boards/NAME.yaml) or by path to a YAML file."""
    p = Path(name_or_path)
    if is_board_path(name_or_path):
        if not _is_file(p):
            raise SpecError(f"{brief(str(p), 200, quote=False)}: no such board file")
        return load_board_file(p)
    f = boards_dir() / f"{name_or_path}.yaml"
    if not _is_file(f):
        names = ", ".join(b.stem for b in sorted(boards_dir().glob("*.yaml")))
        raise SpecError(f"unknown board {brief(name_or_path)} (boards: {names})")
    return load_board_file(f)


def format_boards(boards: list[Board] | None = None) -> str:
    """The catalogue as a table (``pockengine boards``)."""
    boards = list_boards() if boards is None else boards
    rows = [("board", "cpu", "features", "sram", "flash", "backward", "runs on", "console")]
    for b in boards:
        runs_on = b.run.get("machine") or b.emulator
        if b.emulator == "renode":
            runs_on = "renode"
        elif b.emulator == "qemu-system-arm":
            runs_on = f"qemu {b.run['machine']}"
        rows.append((b.name, b.cpu, ",".join(b.features) or "-", format_size(b.sram_budget),
                     format_size(b.flash_budget), b.default_backward, runs_on, b.console_kind))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.extend(f"{b.name}: {b.summary}" for b in boards)
    return "\n".join(lines) + "\n"
