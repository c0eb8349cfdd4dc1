"""Records for the templates: every name, number and C expression of a generated project.

The templates only loop over these records and print their fields; all decisions (which pool a
tensor lives in, its offset macro, the C expression of each kernel argument, the literals of
every constant) are made here, from the lowered program (memory plans + kernel call records).

Storage of a tensor, as a kernel argument:

- **parameter pool** (trainable tensors and optimizer state of the training plan): RAM,
  ``<P>_PARAMS_AT(<P>_PARAM_OFF_X)``; ``<p>_init()`` fills it from flash images;
- **arena** (activations, gradients, masks, graph inputs): ``<P>_ARENA_AT(<P>_<FN>_OFF_X)``
  with one offset table per function (``pe_infer`` and ``pe_train_step`` are planned apart and
  share the arena, whose size is the larger plan);
- **constant** (frozen weights, biases, tables, QAS factors): a ``const`` array ``<p>_w_x`` in
  ``<p>_weights.c``.

Kernel parameter structs and arrays (multipliers, shifts, dims) become ``static const``
objects in ``<p>_model.c``, deduplicated by content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backends import (
    C_TYPES,
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
)
from ..errors import ModelError
from ..ir import Graph, Op
from ..memplan import MemoryPlan
from ..partial import export_name, runs
from ..schedule import align_up
from .literals import array_rows, c_float, c_float_decimal, c_int
from .names import Namer, comment_text, sanitize

ALIGNMENT = 16
# phase of a training-graph op -> the runtime's phase number (runtime_c/runtime/pe_profile.h)
PROFILE_PHASES = {"forward": "PE_PROF_FORWARD", "loss": "PE_PROF_LOSS",
                  "backward": "PE_PROF_BACKWARD", "update": "PE_PROF_UPDATE"}
_ELEMENT_CTYPES = {**C_TYPES, "bit": "uint8_t"}


@dataclass(frozen=True, eq=False)
class LoweredGraph:
    """A graph with its memory plan and one kernel call per scheduled op (schedule order)."""

    graph: Graph
    plan: MemoryPlan
    calls: tuple[KernelCall, ...]
    lowering: Any = None              # the backends.Lowering the calls were chosen by
    stream: Any = None                # what the stream stage streamed (pipeline.plan_project)


@dataclass(frozen=True, eq=False)
class Lowered:
    """What the code generator renders: the inference graph and, with a training spec, the
    training graph, lowered along one chain of backends (``backend``: what was asked for,
    e.g. ``auto``; ``chain``: the backends it resolved to, in order of preference)."""

    infer: LoweredGraph
    train: LoweredGraph | None
    backend: str = "ref"
    chain: tuple[str, ...] = ("ref",)

    def all_calls(self) -> list[KernelCall]:
        return [*self.infer.calls, *(self.train.calls if self.train is not None else ())]


@dataclass(frozen=True)
class SourceInfo:
    """Where the project came from (printed in every banner)."""

    model_name: str
    model_sha256: str
    spec: str | None = None
    calib_sha256: str | None = None
    board: str = "host"


# -- small helpers ------------------------------------------------------------------------------
def op_phase(op: Op) -> str:
    """forward | loss | backward | update (ReLU masks are computed with the forward pass)."""
    from ..train.report import phase  # lazy: --help imports this module

    ph = phase(op)
    return "forward" if ph == "mask" else ph


def _shape(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _elem_ctype(dtype: str, what: str) -> str:
    ct = _ELEMENT_CTYPES.get(dtype)
    if ct is None:
        raise ModelError(f"tensor {what!r}: dtype {dtype} has no C element type")
    return ct


def _pointee(ptr_ctype: str) -> tuple[bool, str]:
    """('const int8_t *') -> (True, 'int8_t')."""
    s = ptr_ctype.strip()
    if not s.endswith("*"):
        raise ValueError(f"not a pointer type: {ptr_ctype!r}")
    base = s[:-1].strip()
    const = base.startswith("const ")
    return const, base[len("const "):].strip() if const else base


class _KernelConstants:
    """static const kernel parameters (structs, arrays), deduplicated by content."""

    def __init__(self, prefix: str, macros: Mapping[str, str]):
        self.p = prefix
        self.inf = macros["inf"]
        self.arrays: list[dict[str, Any]] = []
        self.structs: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str, str], str] = {}

    def array(self, arr: ConstArray) -> str:
        if arr.values.size == 0:
            return "NULL"
        rows = array_rows(arr.values, arr.ctype, self.inf)
        key = ("a", arr.ctype, "\n".join(rows))
        hit = self._index.get(key)
        if hit is None:
            hit = f"{self.p}_a{len(self.arrays)}_{_hint(arr.name)}"
            self.arrays.append({"name": hit, "ctype": arr.ctype, "size": int(arr.values.size),
                                "rows": rows})
            self._index[key] = hit
        return hit

    def struct_init(self, s: Struct) -> str:
        parts = []
        for fname, ctype, v in s.items():
            if isinstance(v, Struct):
                parts.append(f".{fname} = {self.struct_init(v)}")
            elif isinstance(v, ConstArray):
                parts.append(f".{fname} = {self.array(v)}")
            elif ctype == "float":
                parts.append(f".{fname} = {c_float(v, self.inf)}")
            else:
                parts.append(f".{fname} = {c_int(v, ctype)}")
        return "{" + ", ".join(parts) + "}"

    def struct(self, s: Struct, init: str | None = None, qualifier: str = "const") -> str:
        """The name of a static struct holding ``s`` (or ``init``); ``qualifier``: "const",
        or the macro that is "const" unless the build binds arena addresses at run time."""
        text = self.struct_init(s) if init is None else init
        return self._struct(s.ctype, text, qualifier, "")

    def struct_array(self, arr: StructArrayArg) -> str:
        """The name of a static const array holding the structs of ``arr``."""
        text = "{" + ", ".join(self.struct_init(v) for v in arr.values) + "}"
        return self._struct(arr.struct, text, "const", f"[{len(arr.values)}]")

    def _struct(self, ctype: str, text: str, qualifier: str, dims: str) -> str:
        key = ("s", ctype + dims, text)
        hit = self._index.get(key)
        if hit is None:
            hit = f"{self.p}_s{len(self.structs)}_{_hint(ctype.removeprefix('pe_'))}"
            self.structs.append({"name": hit, "ctype": ctype, "init": text,
                                 "qualifier": qualifier, "dims": dims})
            self._index[key] = hit
        return hit


def _hint(text: str) -> str:
    return sanitize(text).lower()[:24]


# -- the builder ----------------------------------------------------------------------------------
@dataclass
class _Slot:
    name: str
    pool: str            # arena | parameters
    offset: int
    nbytes: int
    macro: str


class RecordBuilder:
    """Builds the template context of one project (``build``) and lists every global
    identifier it defines (``identifiers``, for the clash check)."""

    def __init__(self, lowered: Lowered, prefix: str):
        self.lowered = lowered
        self.p = prefix
        self.P = prefix.upper()
        self.tensor_names = Namer()
        self.macros = {"inf": f"{self.P}_INF", "arena_at": f"{self.P}_ARENA_AT",
                       "params_at": f"{self.P}_PARAMS_AT", "aligned": f"{self.P}_ALIGNED",
                       "profile": f"{self.P}_PROFILE", "profile_ops": f"{self.P}_PROFILE_OPS",
                       "phase_begin": f"{self.P}_PHASE_BEGIN",
                       "phase_end": f"{self.P}_PHASE_END",
                       "op_begin": f"{self.P}_OP_BEGIN", "op_end": f"{self.P}_OP_END",
                       # user-placed arena (model.h: <P>_USER_ARENA, <P>_ARENA_SECTION)
                       "arena_ptr": f"{self.P}_ARENA_PTR", "arena_const": f"{self.P}_ARENA_CONST",
                       "user_arena_on": f"{self.P}_USER_ARENA_ON",
                       "arena_place": f"{self.P}_ARENA_PLACE",
                       "params_place": f"{self.P}_PARAMS_PLACE"}
        self.kconst = _KernelConstants(prefix, self.macros)
        train = lowered.train
        self.param_slots: dict[str, _Slot] = {}
        if train is not None:
            for name, pl in sorted(train.plan.pool("parameters").items(),
                                   key=lambda kv: kv[1].offset):
                frag = self.tensor_names(name)
                self.param_slots[name] = _Slot(name, "parameters", pl.offset, pl.nbytes,
                                               f"{self.P}_PARAM_OFF_{frag.upper()}")
        self.constants: dict[str, dict[str, Any]] = {}
        self.identifiers: list[str] = []
        self.uses_no_scratch = False
        # functions the calls pass by address (FunctionArg: a stream_chain's stage function)
        self.functions: list[dict[str, Any]] = []
        # "target = arena address;" statements of <p>_bind_arena(): the arena pointers that
        # static initializers hold (kernel contexts, pointer lists), set at run time in a
        # user-arena build (their initializers then hold NULL)
        self.arena_binds: list[str] = []

    # tensors ------------------------------------------------------------------------------------
    def _constant(self, graph: Graph, name: str) -> dict[str, Any]:
        t = graph.tensors[name]
        hit = self.constants.get(name)
        if hit is not None:
            if not np.array_equal(hit["_data"], t.data):
                raise ValueError(f"constant {name!r} differs between the inference and "
                                 "training graphs")
            return hit
        frag = self.tensor_names(name)
        ctype = _elem_ctype(t.dtype, name)
        rec = {"name": f"{self.p}_w_{frag}", "ctype": ctype, "size": max(1, t.size),
               "rows": array_rows(t.data if t.size else np.zeros(1), ctype, self.macros["inf"]),
               "comment": comment_text(f"{name}: {t.dtype} {_shape(t.shape)}"),
               "_data": t.data}
        self.constants[name] = rec
        return rec

    def _arena_slots(self, lg: LoweredGraph, fn: str) -> dict[str, _Slot]:
        slots: dict[str, _Slot] = {}
        plan = lg.plan
        for b in plan.buffers:
            for name in b.buffer.tensors:
                if name in self.param_slots:
                    continue
                frag = self.tensor_names(name)
                slots[name] = _Slot(name, "arena", b.offset,
                                    lg.graph.tensors[name].nbytes,
                                    f"{self.P}_{fn.upper()}_OFF_{frag.upper()}")
        return slots

    def _pointer(self, name: str, ptr_ctype: str, graph: Graph, arena: Mapping[str, _Slot],
                 where: str, *, static: bool = False) -> str:
        """The C expression of a tensor's address; ``static``: for a static initializer, where
        an arena address is ``<P>_ARENA_PTR(off)`` (NULL in a user-arena build)."""
        const, pointee = _pointee(ptr_ctype)
        cast = f"({ptr_ctype})"
        slot = self.param_slots.get(name) or arena.get(name)
        if slot is not None:
            if slot.pool == "parameters":
                at = self.macros["params_at"]
            else:
                at = self.macros["arena_ptr" if static else "arena_at"]
            return f"{cast}{at}({slot.macro})"
        t = graph.tensors.get(name)
        if t is None or t.data is None:
            raise ValueError(f"{where}: tensor {name!r} has no storage in the memory plan")
        if not const:
            raise ValueError(f"{where}: kernel writes constant tensor {name!r}")
        rec = self._constant(graph, name)
        return rec["name"] if rec["ctype"] == pointee else f"{cast}{rec['name']}"

    # calls ---------------------------------------------------------------------------------------
    def _function(self, lg: LoweredGraph, fn: str) -> dict[str, Any]:
        graph, plan = lg.graph, lg.plan
        arena = self._arena_slots(lg, fn)
        scratch = plan.scratch_offsets()
        ops = {op.name: op for op in graph.ops}
        calls = []
        lists = []
        used: set[str] = set()
        for k, call in enumerate(lg.calls):
            args = self._args(call, graph, arena, scratch, fn, lists, used)
            op = ops[call.op]
            calls.append({"index": k, "kernel": call.kernel, "args": args,
                          "comment": comment_text(f"{op.type} {op.name}"),
                          "before": [], "after": [],
                          "outline": f"{self.p}_{fn}_k{k}" if call.outline else None})
        if fn == "train":
            self._profile_marks(calls, [ops[c.op] for c in lg.calls])
        else:                              # per-op markers only, numbered after the step's
            first = len(self.lowered.train.calls) if self.lowered.train is not None else 0
            for k, call in enumerate(calls):
                call["before"].append(f"{self.macros['op_begin']}({first + k}u);")
                call["after"].append(f"{self.macros['op_end']}({first + k}u);")
        inputs = set(graph.inputs) | set(graph.outputs)
        offsets = [{"macro": s.macro, "offset": s.offset,
                    "comment": comment_text(self._slot_comment(graph, plan, s))}
                   for s in sorted(arena.values(), key=lambda s: (s.offset, s.macro))
                   if s.name in used or s.name in inputs]
        return {"name": fn, "calls": calls, "lists": lists, "offsets": offsets,
                "arena_bytes": plan.arena_bytes, "lower_bound_bytes": plan.lower_bound_bytes,
                "steps": len(lg.calls), "_arena": arena}

    def _args(self, call: KernelCall, graph: Graph, arena: Mapping[str, _Slot],
              scratch: Mapping[str, int], fn: str, lists: list[dict[str, Any]],
              used: set[str]) -> list[str]:
        """The C expressions of a call's arguments (the constants, lists and stage functions
        they need are recorded on the way)."""
        where = f"op {call.op!r}"
        args = []
        for arg_name, arg in call.args:
            if isinstance(arg, ContextArg):
                args.append(self._context(call, scratch, arena, fn))
            elif isinstance(arg, StructArg):
                args.append("&" + self.kconst.struct(arg.value))
            elif isinstance(arg, StructArrayArg):
                args.append(self.kconst.struct_array(arg))
            elif isinstance(arg, TensorArg):
                ptr = self._pointer(arg.tensor, arg.ctype, graph, arena, where)
                args.append(f"({ptr} + {arg.offset})" if arg.offset else ptr)
                used.add(arg.tensor)
            elif isinstance(arg, TensorListArg):
                elem = arg.ctype.strip()[:-1].strip()           # 'const int8_t *const'
                ptr = elem.removesuffix("const").strip()        # 'const int8_t *'
                lname = f"{self.p}_{fn}_list{len(lists)}"
                pointers = [self._pointer(t, ptr, graph, arena, where, static=True)
                            for t in arg.tensors]
                binds = [f"{lname}[{i}] = {self._pointer(t, ptr, graph, arena, where)};"
                         for i, t in enumerate(arg.tensors)
                         if t not in self.param_slots and t in arena]
                self.arena_binds += binds
                if binds and elem.endswith("const"):   # assigned by <p>_bind_arena()
                    elem = f"{elem.removesuffix('const').rstrip()}{self.macros['arena_const']}"
                lists.append({"name": lname, "elem": elem, "size": len(arg.tensors),
                              "pointers": pointers})
                used.update(arg.tensors)
                args.append(lname)
            elif isinstance(arg, ArrayArg):
                args.append(self.kconst.array(arg.value))
            elif isinstance(arg, ScalarArg):
                args.append(c_float(arg.value, self.macros["inf"]) if arg.ctype == "float"
                            else str(int(arg.value)))
            elif isinstance(arg, NullArg):
                args.append("NULL")
            elif isinstance(arg, ExprArg):
                args.append(arg.expr)
            elif isinstance(arg, FunctionArg):
                name = f"{self.p}_{fn}_fn{len(self.functions)}"
                record = {"name": name, "params": arg.params, "select": arg.select,
                          "comment": comment_text(f"stage function of {call.op}"),
                          "cases": []}
                self.functions.append(record)
                record["cases"] = [
                    {"index": i, "kernel": c.kernel,
                     "args": self._args(c, graph, arena, scratch, fn, lists, used)}
                    for i, c in enumerate(arg.cases)]
                args.append(name)
            else:                                              # pragma: no cover
                raise TypeError(f"{where}: unknown argument {arg_name!r}: {arg!r}")
        return args

    def _profile_marks(self, calls: list[dict[str, Any]], ops: Sequence[Op]) -> None:
        """Instruction-counter markers of the training step: each run of calls of one phase
        (forward, loss, backward, update; a ReLU mask is forward work) is bracketed by
        ``<P>_PHASE_BEGIN/END(PE_PROF_<PHASE>)`` and each call by ``<P>_OP_BEGIN/END(k)``.
        The macros vanish unless a device build defines ``<P>_PROFILE`` (``<P>_PROFILE_OPS``
        for the per-op markers); see model.c.j2."""
        phases = [op_phase(op) for op in ops]
        m = self.macros
        for k, (call, ph) in enumerate(zip(calls, phases, strict=True)):
            call["phase"] = ph
            if k == 0 or phases[k - 1] != ph:
                call["before"].append(f"{m['phase_begin']}({PROFILE_PHASES[ph]});")
            call["before"].append(f"{m['op_begin']}({k}u);")
            call["after"].append(f"{m['op_end']}({k}u);")
            if k == len(calls) - 1 or phases[k + 1] != ph:
                call["after"].append(f"{m['phase_end']}({PROFILE_PHASES[ph]});")

    def _slot_comment(self, graph: Graph, plan: MemoryPlan, s: _Slot) -> str:
        t = graph.tensors[s.name]
        first, last = plan.schedule.lifetimes.get(s.name, (0, 0))
        return f"{s.name}: {t.dtype} {_shape(t.shape)}, {t.nbytes} B, steps {first}..{last}"

    def _context(self, call: KernelCall, scratch: Mapping[str, int],
                 arena: Mapping[str, _Slot], fn: str) -> str:
        if call.scratch_bytes <= 0:
            self.uses_no_scratch = True
            return f"&{self.p}_no_scratch"
        off = scratch.get(call.op)
        if off is None:
            raise ValueError(f"op {call.op!r}: the kernel needs {call.scratch_bytes} B of "
                             "scratch the memory plan did not reserve")
        init = f"{{{self.macros['arena_ptr']}({off}u), {c_int(call.scratch_bytes)}}}"
        known = len(self.kconst.structs)
        name = self.kconst.struct(Struct("pe_context", {"buf": 0, "size": 0}), init,
                                  qualifier=self.macros["arena_const"])
        if len(self.kconst.structs) > known:                 # a new context: bind it
            self.arena_binds.append(f"{name}.buf = {self.macros['arena_at']}({off}u);")
        return "&" + name

    # the whole project -------------------------------------------------------------------------
    def build(self, source: SourceInfo, generator: str) -> dict[str, Any]:
        lo = self.lowered
        g = lo.infer.graph
        infer = self._function(lo.infer, "infer")
        io_in = self._io(g, g.inputs, "input", infer["_arena"])
        io_out = self._io(g, g.outputs, "output", infer["_arena"])
        train = None
        if lo.train is not None:
            train = self._function(lo.train, "train")
            train.update(self._train_io(lo.train, train["_arena"], io_in, io_out))
        for f in (infer, train):
            if f is not None:
                f.pop("_arena")
        arena_bytes = max(lo.infer.plan.arena_bytes,
                          lo.train.plan.arena_bytes if lo.train else 0, ALIGNMENT)
        params = self._params()
        constants = [{k: v for k, v in c.items() if not k.startswith("_")}
                     for c in self.constants.values()]
        banner = self._banner(source, generator)
        ctx: dict[str, Any] = {
            "p": self.p, "P": self.P, "m": self.macros, "banner": banner,
            "generator": generator, "alignment": ALIGNMENT,
            "arena_bytes": arena_bytes, "params_bytes": params["pool_bytes"],
            "input": io_in, "output": io_out, "infer": infer, "train": train,
            "params": params, "constants": constants,
            "kernel_arrays": self.kconst.arrays, "kernel_structs": self.kconst.structs,
            "kernel_functions": self.functions,
            "kernels": sorted({c["kernel"] for f in (infer, train) if f for c in f["calls"]}),
            "uses_no_scratch": self.uses_no_scratch, "arena_binds": list(self.arena_binds),
            "constant_bytes": sum(align_up(c["_data"].nbytes, ALIGNMENT)
                                  for c in self.constants.values()),
            "image_bytes": sum(align_up(i["bytes"], ALIGNMENT) for i in params["images"]),
        }
        self.identifiers = self._globals(ctx)
        return ctx

    def _io(self, graph: Graph, names: Sequence[str], what: str,
            arena: Mapping[str, _Slot]) -> dict[str, Any]:
        if len(names) != 1:
            raise ModelError(f"{graph.name}: the generated API takes one {what} tensor, the "
                             f"model has {len(names)} ({', '.join(names)})")
        t = graph.tensors[names[0]]
        if t.dtype != "int8":
            raise ModelError(f"{graph.name}: {what} {t.name!r} is {t.dtype}; the generated API "
                             "is int8 in, int8 out (quantize the model first)")
        q = t.quant
        return {"tensor": comment_text(t.name), "macro": arena[t.name].macro,
                "bytes": t.nbytes, "shape": list(t.shape), "shape_text": _shape(t.shape),
                # a macro of the user's header: decimal, valid C and C++ (no hex floats)
                "scale": c_float_decimal(q.s) if q is not None else "1.0f",
                "zero_point": q.zp if q is not None else 0}

    def _train_io(self, lg: LoweredGraph, arena: Mapping[str, _Slot],
                  io_in: Mapping[str, Any], io_out: Mapping[str, Any]) -> dict[str, Any]:
        g = lg.graph
        meta = g.metadata["training"]
        model_inputs = list(meta["inputs"]["model"])
        if len(model_inputs) != 1:
            raise ModelError(f"{g.name}: training takes one model input, the model has "
                             f"{len(model_inputs)}")
        x = g.tensors[model_inputs[0]]
        if x.nbytes != io_in["bytes"]:
            raise ValueError("training and inference inputs differ in size")
        loss = meta["outputs"]["loss"]
        label = meta["inputs"].get("label")
        target = meta["inputs"].get("target")
        logits = g.tensors[meta["loss_input"]]
        out: dict[str, Any] = {
            "loss_kind": meta["loss"], "mode": meta["mode"],
            "optimizer": comment_text(meta["optimizer"]["name"]),
            "input_macro": arena[x.name].macro, "loss_macro": arena[loss].macro,
            "label": None, "target": None,
        }
        if label is not None:
            out["label"] = {"macro": arena[label].macro, "classes": int(logits.shape[-1])}
        else:
            tt = g.tensors[target]
            out["target"] = {"macro": arena[target].macro, "bytes": tt.nbytes}
        return out

    def _params(self) -> dict[str, Any]:
        lg = self.lowered.train
        if lg is None:
            return {"pool_bytes": 0, "slots": [], "images": [], "export": [],
                    "export_bytes": 0, "has_le32": False, "has_bytes": False, "counters": [],
                    "masters": []}
        g = lg.graph
        slots, images = [], []
        for s in self.param_slots.values():
            t = g.tensors[s.name]
            slots.append({"macro": s.macro, "offset": s.offset,
                          "comment": comment_text(f"{s.name}: {t.dtype} {_shape(t.shape)}, "
                                                  f"{t.nbytes} B")})
            if t.data is not None and np.any(t.data):
                ctype = _elem_ctype(t.dtype, s.name)
                frag = self.tensor_names(s.name)
                images.append({"name": f"{self.p}_init_{frag}", "ctype": ctype,
                               "size": t.size, "bytes": t.nbytes, "macro": s.macro,
                               "rows": array_rows(t.data, ctype, self.macros["inf"]),
                               "comment": comment_text(f"initial {s.name}: {t.dtype} "
                                                       f"{_shape(t.shape)}")})

        export = []
        at = 0
        for entry in g.metadata["training"]["parameters"]:
            name = entry["tensor"] if isinstance(entry, Mapping) else str(entry)
            t = g.tensors[name]
            kind = {"int8": "bytes", "uint8": "bytes", "int32": "le32"}.get(t.dtype)
            if kind is None:
                raise ModelError(f"trainable tensor {name!r} is {t.dtype}; export supports "
                                 "int8 and int32 parameters")
            part = entry.get("partial") if isinstance(entry, Mapping) else None
            shape = tuple(part["shape"]) if part else t.shape
            e = {"macro": self.param_slots[name].macro, "kind": kind,
                 "count": int(np.prod(shape, dtype=np.int64)) if part else t.size,
                 "bytes": int(np.prod(shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
                 if part else t.nbytes,
                 "segments": self._segments(g, name, part, at) if part else None,
                 "comment": comment_text(f"{export_name(entry)}: {t.dtype} {_shape(shape)}"
                                         + (f", {len(part['channels'])} trained channels in "
                                            f"RAM ({name}), the others in flash"
                                            if part else ""))}
            export.append(e)
            at += e["bytes"]
        # lazy: --help imports this module
        from ..golden.training import master_copies, saturation_counters

        counters = [{"macro": self.param_slots[n].macro, "comment": comment_text(n)}
                    for n in saturation_counters(g)]
        masters = [self._master_import(g, c) for c in master_copies(g)]
        return {"pool_bytes": lg.plan.params_bytes, "slots": slots, "images": images,
                "export": export, "export_bytes": sum(e["bytes"] for e in export),
                "has_le32": any(e["kind"] == "le32" for e in export),
                "has_bytes": any(e["kind"] == "bytes" for e in export), "counters": counters,
                "masters": masters, "has_partial": any(e["segments"] for e in export)}

    def _segments(self, g: Graph, name: str, part: Mapping[str, Any], base_at: int
                  ) -> list[dict[str, Any]]:
        """The pieces of a partial trainable tensor's export (codegen.partial): runs of rows
        from its trained part (the parameter ``name``) and its frozen part (a constant), in
        channel order; ``at`` is the offset in the tensor's export bytes, ``blob_at`` in the
        whole export (the tensor's starts at ``base_at``), ``src`` the C address of the piece
        (``dst``: writable, trained pieces only)."""
        t = g.tensors[name]
        row = int(np.prod(t.shape[1:], dtype=np.int64)) * np.dtype(t.dtype).itemsize
        frozen = self._constant(g, part["frozen"])["name"]
        param = f"{self.macros['params_at']}({self.param_slots[name].macro})"
        out, at, off = [], 0, [0, 0]
        for r, n in enumerate(runs(tuple(part["channels"]), int(part["shape"][0]))):
            if n:
                k = r & 1
                base = f"(const uint8_t *){frozen}" if k else f"(const uint8_t *){param}"
                out.append({"frozen": bool(k), "at": at, "blob_at": base_at + at,
                            "bytes": n * row,
                            "src": f"{base} + {off[k]}u",
                            "dst": None if k else f"(uint8_t *){param} + {off[k]}u"})
                at += n * row
                off[k] += n * row
        return out

    def _master_import(self, g: Graph, c: Any) -> dict[str, Any]:
        """The record of one block of ``<p>_params_import`` that makes master copy ``c``
        (``golden.training.MasterCopy``) follow its imported parameter, by the rules of
        ``golden.train_optim.master_init``: ``rule`` ``convert`` (float32 of the trained
        entries), ``scale`` (an int8 weight's ``w_q << F``, as a product by ``scale``: shifting
        a negative value is undefined in C) or ``zero`` (an int32 bias's remainder); over the
        trained ``channels`` (None: every entry in order) gathered along the channel axis,
        the parameter seen as (outer, total, inner) and the master as (outer, n, inner)."""
        param, master = g.tensors[c.param], g.tensors[c.master]
        shape = param.shape
        outer = int(np.prod(shape[:c.axis], dtype=np.int64))
        total = int(shape[c.axis])
        inner = int(np.prod(shape[c.axis + 1:], dtype=np.int64))
        scale = None
        if master.dtype == "float32":
            rule, what = "convert", f"float32 of {param.dtype} {c.param}"
        elif master.dtype == "int32" and c.kind == "weight" and param.dtype == "int8":
            rule, what, scale = "scale", f"{c.param} << {c.frac_bits}", 1 << c.frac_bits
        elif master.dtype == "int32" and c.kind == "bias":
            rule, what = "zero", "0 (the sub-quantum remainder)"
        else:
            raise ModelError(f"master {c.master!r}: no import rule for a {master.dtype} master "
                             f"of a {param.dtype} {c.kind}")
        n = total if c.channels is None else len(c.channels)
        if int(master.size) != outer * n * inner:
            raise ValueError(f"master {c.master!r}: {master.size} values, expected "
                             f"{outer} x {n} x {inner}")
        channels = None
        if c.channels is not None and rule != "zero":
            ctype = "uint16_t" if max(c.channels) < 2 ** 16 else "uint32_t"
            values = [f"{int(ch)}u" for ch in c.channels]
            channels = {"ctype": ctype, "rows": [", ".join(values[k:k + 12])
                                                 for k in range(0, n, 12)]}
        where = "all channels" if c.channels is None else \
            f"{n} of {total} channels on axis {c.axis}"
        return {"comment": comment_text(f"{c.master} = {what}; {where}"), "rule": rule,
                "scale": None if scale is None else c_int(scale),
                "ptype": _elem_ctype(param.dtype, c.param),
                "mtype": _elem_ctype(master.dtype, c.master),
                "param_macro": self.param_slots[c.param].macro,
                "master_macro": self.param_slots[c.master].macro,
                "size": int(master.size), "outer": outer, "n": n, "total": total,
                "inner": inner, "channels": channels}

    def _banner(self, source: SourceInfo, generator: str) -> list[str]:
        lines = [f"Generated by {generator} -- do not edit.",
                 f"model: {source.model_name} (sha256 {source.model_sha256})"]
        if source.calib_sha256:
            lines.append(f"quantized here; calibration data sha256 {source.calib_sha256}")
        lines.append(f"training: {source.spec}" if source.spec else "training: none")
        lines.append(f"backend: {self.lowered.backend} ({', '.join(self.lowered.chain)}), "
                     f"board: {source.board}")
        return [comment_text(s) for s in lines]

    def _globals(self, ctx: Mapping[str, Any]) -> list[str]:
        """Every identifier the project defines at file scope or as a macro."""
        p, P = self.p, self.P
        names = [f"{p}_{f}" for f in ("init", "init_with_arena", "bind_arena", "infer",
                                       "train_step", "train_step_target",
                                       "params_export", "params_import", "params_stream",
                                       "state_read", "state_write", "saturation_count",
                                       "stream_bytes", "stream_le32", "sat_add")]
        names += [f"{P}_{m}" for m in API_MACROS]
        names += list(self.macros.values())
        names += [f"{p}_arena", f"{p}_params", f"{p}_ready", f"{p}_no_scratch", f"{p}_copy",
                  f"{p}_put_le32", f"{p}_get_le32", f"{p}_train_run"]
        names += [c["name"] for c in ctx["constants"]]
        names += [i["name"] for i in ctx["params"]["images"]]
        names += [s["macro"] for s in ctx["params"]["slots"]]
        names += [a["name"] for a in ctx["kernel_arrays"]]
        names += [s["name"] for s in ctx["kernel_structs"]]
        names += [f["name"] for f in ctx["kernel_functions"]]
        for f in (ctx["infer"], ctx["train"]):
            if f is not None:
                names += [o["macro"] for o in f["offsets"]]
                names += [li["name"] for li in f["lists"]]
        return names


# Macros of the public header (after the upper-case prefix and "_").
API_MACROS = ("MODEL_H", "WEIGHTS_H", "OK", "ERR_NOT_INITIALIZED", "ERR_ARGUMENT",
              "ERR_UNSUPPORTED", "ERR_LABEL", "ERR_SIZE", "ARENA_BYTES", "PARAMS_BYTES",
              "EXPORT_BYTES", "INPUT_BYTES", "OUTPUT_BYTES", "TARGET_BYTES", "NUM_CLASSES",
              "INPUT_SCALE", "INPUT_ZERO_POINT", "OUTPUT_SCALE", "OUTPUT_ZERO_POINT",
              "HAS_TRAINING", "LOSS_CROSS_ENTROPY", "LOSS_MSE", "GENERATOR",
              "ERR_ALIGNMENT", "ARENA_ALIGNMENT", "USER_ARENA", "ARENA_SECTION",
              "PARAMS_SECTION")
