"""Training specs: the YAML file (or a short form) that says what trains and how.

```yaml
loss: cross_entropy            # or mse
trainable:
  - {layers: last 4, params: bias}
  - {layers: [conv_12, fc], params: weight, channels: 0.25}
optimizer: {name: sgd, lr: 0.01, momentum: 0.9}   # sgd | adam (beta1, beta2, eps)
schedule: {name: step, step_size: 100, gamma: 0.5} # constant | step | warmup | cosine
backward: fp32                 # or int8
master_weights: none           # none | fp32 (backward fp32) | int32 (backward int8)
accumulate: 1                  # gradient accumulation steps
```

Short forms (``--train``): ``bias:last4``, ``weight:last2``, ``weight:last2@0.25`` (channel
ratio), ``bias:all``, ``all``, ``bias:3..7`` (an index range), ``bias:conv.last2`` /
``weight:dwconv.all`` (a kind, then the selection among the layers of that kind); join several
with ``+`` and add options after commas:
``bias:all+weight:last2,opt=momentum,lr=0.05,backward=int8``, with a schedule
``...,schedule=cosine,total_steps=1000,warmup_steps=50,min_lr=0.0001`` (``step_size``,
``gamma`` for ``step``). docs/training.md ("Training
specs") is the user's reference of both forms.

Layers are the parametric ops (conv2d, depthwise_conv2d, fully_connected) in execution order; a
spec names them by op name, by index (negative counts from the end), by inclusive index range
``A..B`` (either end may be left out or negative), ``last N``, ``first N`` or ``all``. A rule
with a ``kind`` (conv: conv2d with one group, dwconv: depthwise_conv2d, fc: fully_connected,
gconv: grouped conv2d) selects among the layers of that kind only: ``last 2`` of kind conv are
the model's last two conv layers. What a rule selects is resolved here into the list of
``LayerUpdate`` s, which is all that the training graph and the C code see.

Channel selection for ``channels: r < 1``: the ``ceil(r * C)`` output channels with the largest
L1 norm of their int8 weights (ties broken by index), the criterion of tiny-training's
channel-sparse update; the choice is made at compile time and recorded in the training graph.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpecError, brief
from ..ir import PARAMETRIC_OPS, Graph, Op, weight_axis
from .loss import find_loss_site

LOSSES = ("cross_entropy", "mse")
OPTIMIZERS = ("sgd", "adam")
BACKWARD_MODES = ("fp32", "int8")
MASTER_WEIGHTS = ("none", "fp32", "int32")
SCHEDULES = ("constant", "step", "warmup", "cosine")
PARAMS = ("bias", "weight", "both")
# layer kinds a rule may select by (``kind:`` in YAML, ``KIND.`` in a short form), what each is
KINDS = {"conv": "conv2d with one group", "dwconv": "depthwise_conv2d",
         "fc": "fully_connected", "gconv": "conv2d with several groups"}


@dataclass(frozen=True)
class Optimizer:
    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0


@dataclass(frozen=True)
class Schedule:
    name: str = "constant"
    step_size: int = 0        # step: multiply lr by gamma every step_size steps
    gamma: float = 1.0
    warmup_steps: int = 0     # warmup: lr ramps linearly from lr/warmup_steps to lr
                              # (cosine: optional, the same ramp first)
    total_steps: int = 0      # cosine: updates over which lr decays (warmup included)
    min_lr: float = 0.0       # cosine: lr at and after total_steps


@dataclass(frozen=True)
class TrainableRule:
    layers: Any               # "last N" | "first N" | "all" | "A..B" | name | int | list of
                              # names, indices and ranges
    params: str = "bias"      # bias | weight | both
    channels: float = 1.0     # ratio of output channels whose weights train
    kind: str | None = None   # select among the layers of this kind (KINDS) only


@dataclass(frozen=True)
class TrainSpec:
    loss: str = "cross_entropy"
    trainable: tuple[TrainableRule, ...] = ()
    optimizer: Optimizer = field(default_factory=Optimizer)
    schedule: Schedule = field(default_factory=Schedule)
    backward: str = "fp32"
    master_weights: str = "none"
    accumulate: int = 1
    source: str = "<spec>"
    backward_given: bool = True   # False: the spec did not say (a board's default may apply)
    kernels: tuple[tuple[str, str], ...] = ()   # (op name, backend) pins of single layers

    def with_default_backward(self, mode: str) -> TrainSpec:
        """This spec with backward ``mode`` (a board's default) if the spec did not choose one.
        Master weights the spec asked for follow the mode (fp32 <-> int32); ``self`` when the
        spec chose its mode or already has this one."""
        if self.backward_given or mode == self.backward:
            return self
        if mode not in BACKWARD_MODES:
            raise SpecError(f"{self.source}: backward must be fp32 or int8, got {brief(mode)}")
        master = self.master_weights
        if master != "none":
            master = "fp32" if mode == "fp32" else "int32"
        return replace(self, backward=mode, master_weights=master, backward_given=True)


@dataclass(frozen=True)
class LayerUpdate:
    """What trains in one parametric layer (after resolving a spec against a graph)."""

    op: str                            # op name
    index: int                         # position among the parametric layers
    bias: bool
    weight: bool
    channels: tuple[int, ...] | None   # output channels whose weights train; None = all


def _err(source: str, msg: str) -> SpecError:
    return SpecError(f"{source}: {msg}")


_OPTIMIZER_KEYS = {f for f in Optimizer.__dataclass_fields__}
_SCHEDULE_KEYS = {f for f in Schedule.__dataclass_fields__}
_TOP_KEYS = {"loss", "trainable", "optimizer", "schedule", "backward", "master_weights",
             "accumulate", "kernels"}


INT32_MAX = 2**31 - 1                      # counts (steps, accumulation) are int32 in C
FLOAT32_MAX = float(np.finfo(np.float32).max)  # hyper-parameters are float32 in C


def _number(source: str, key: str, v: Any, lo: float | None = None, integer: bool = False):
    """A finite number >= ``lo``: an int32 with ``integer``, else a float32-representable
    float. Checked here so that every verb (plan, compile, fit, golden) agrees."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _err(source, f"{key} must be a number, got {brief(v)}")
    hi = INT32_MAX if integer else FLOAT32_MAX
    if isinstance(v, float) and not math.isfinite(v) or not -hi <= v <= hi \
            or (lo is not None and v < lo):
        raise _err(source, f"{key} = {brief(v)} is out of range"
                   + (f" (at most {hi})" if integer and isinstance(v, int) and v > hi else ""))
    if integer and int(v) != v:
        raise _err(source, f"{key} must be an integer, got {brief(v)}")
    return int(v) if integer else float(v)


def _key_list(keys: Any) -> str:
    """Unknown keys as a short list (keys of any type, at most 10 shown)."""
    names = sorted(brief(k, 40) for k in keys)
    return "[" + ", ".join(names[:10]) + (", ..." if len(names) > 10 else "") + "]"


def _digits(text: str) -> int | None:
    """An ASCII decimal integer (optional '-'); None if ``text`` is not one or has more than
    4,000 digits (Python refuses to convert those)."""
    body = text.removeprefix("-")
    if not (body.isascii() and body.isdigit()) or len(body) > 4000:
        return None
    return -int(body) if text.startswith("-") else int(body)


def _named(source: str, what: str, d: Any, keys: set[str]) -> dict:
    """A mapping with a ``name`` and only ``keys`` (a plain string: just its name)."""
    if isinstance(d, str):
        d = {"name": d}
    if not isinstance(d, dict):
        raise _err(source, f"{what} must be a mapping, got {brief(d)}")
    unknown = set(d) - keys
    if unknown:
        raise _err(source, f"unknown {what} key(s) {_key_list(unknown)}")
    return d


def _choice(source: str, what: str, name: Any, choices: tuple[str, ...]) -> None:
    """``name`` is one of ``choices``."""
    if name not in choices:
        raise _err(source, f"unknown {what} {brief(name)} (choose from {', '.join(choices)})")


def _optimizer(source: str, d: Any) -> Optimizer:
    d = _named(source, "optimizer", d, _OPTIMIZER_KEYS)
    name = d.get("name", "sgd")
    if name == "momentum":
        name, d = "sgd", {**d, "momentum": d.get("momentum", 0.9)}
    _choice(source, "optimizer", name, OPTIMIZERS)
    kw = {k: _number(source, k, v, 0.0) for k, v in d.items() if k != "name"}
    if np.float32(kw.get("lr", 0.01)) <= 0:
        raise _err(source, f"lr must be > 0 (as a float32), got {kw['lr']}")
    for k in ("momentum", "beta1", "beta2"):
        if kw.get(k, 0.0) >= 1.0:
            raise _err(source, f"{k} must be in [0, 1), got {kw[k]}")
    return Optimizer(name=name, **kw)


def _schedule(source: str, d: Any) -> Schedule:
    d = _named(source, "schedule", d, _SCHEDULE_KEYS)
    name = d.get("name", "constant")
    _choice(source, "schedule", name, SCHEDULES)
    kw: dict[str, Any] = {}
    for k in ("step_size", "warmup_steps", "total_steps"):
        if k in d:
            kw[k] = _number(source, k, d[k], 0, integer=True)
    for k in ("gamma", "min_lr"):
        if k in d:
            kw[k] = _number(source, k, d[k], 0.0)
    s = Schedule(name=name, **kw)
    if s.name == "step" and s.step_size < 1:
        raise _err(source, "schedule 'step' needs step_size >= 1")
    if s.name == "warmup" and s.warmup_steps < 1:
        raise _err(source, "schedule 'warmup' needs warmup_steps >= 1")
    if s.name == "cosine" and s.total_steps < 1:
        raise _err(source, "schedule 'cosine' needs total_steps >= 1")
    if s.name == "cosine" and s.warmup_steps >= s.total_steps:
        raise _err(source, f"schedule 'cosine' needs warmup_steps < total_steps (got "
                           f"{s.warmup_steps} >= {s.total_steps})")
    return s


def _rule(source: str, d: Any) -> TrainableRule:
    if not isinstance(d, dict):
        raise _err(source, f"each trainable entry must be a mapping, got {brief(d)}")
    unknown = set(d) - {"layers", "params", "channels", "kind"}
    if unknown:
        raise _err(source, f"unknown trainable key(s) {_key_list(unknown)}")
    kind = d.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise _err(source, f"kind must be one of {', '.join(KINDS)}, got {brief(kind)}")
    if "layers" not in d and kind is None:
        raise _err(source, f"trainable entry {brief(d)} has no 'layers'")
    params = d.get("params", "bias")
    if params == "weights":
        params = "weight"
    if params == "all":
        params = "both"
    if params not in PARAMS:
        raise _err(source, f"params must be bias, weight or both, got {brief(params)}")
    ch = d.get("channels", 1.0)
    if isinstance(ch, bool) or not isinstance(ch, (int, float)) or not 0.0 < ch <= 1.0:
        raise _err(source, f"channel ratio must be in (0, 1], got {brief(ch)}")
    layers = d.get("layers", "all")            # a kind alone: all layers of that kind
    items = layers if isinstance(layers, list) else [layers]
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise _err(source, f"layers must be 'all', 'last N', 'first N', a layer name, "
                               f"index or range A..B, or a list of names, indices and ranges, "
                               f"got {brief(layers)}")
    if isinstance(layers, list):
        layers = tuple(layers)
    return TrainableRule(layers=layers, params=params, channels=float(ch), kind=kind)


def spec_from_dict(d: Any, source: str = "<spec>") -> TrainSpec:
    if not isinstance(d, dict):
        raise _err(source, "a training spec must be a YAML mapping")
    unknown = set(d) - _TOP_KEYS
    if unknown:
        raise _err(source, f"unknown key(s) {_key_list(unknown)} (known: {sorted(_TOP_KEYS)})")
    loss = d.get("loss", "cross_entropy")
    _choice(source, "loss", loss, LOSSES)
    tr = d.get("trainable")
    if tr is None or tr == [] or tr == {}:
        raise _err(source, "the trainable set is empty")
    if isinstance(tr, dict):
        tr = [tr]
    if not isinstance(tr, list):
        raise _err(source, f"trainable must be a list of entries, got {brief(tr)}")
    backward = d.get("backward", "fp32")
    if backward not in BACKWARD_MODES:
        raise _err(source, f"backward must be fp32 or int8, got {brief(backward)}")
    master = d.get("master_weights", "none")
    if master in (None, False):
        master = "none"
    if master not in MASTER_WEIGHTS:
        raise _err(source, f"master_weights must be none, fp32 or int32, got {brief(master)}")
    acc = _number(source, "accumulate", d.get("accumulate", 1), 1, integer=True)
    pins = d.get("kernels") or {}
    if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in pins.items()):
        raise _err(source, "kernels must map op names to backends, e.g. {conv_12: ref}")
    rules = tuple(_rule(source, r) for r in tr)
    optimizer = _optimizer(source, d.get("optimizer", {}))
    schedule = _schedule(source, d.get("schedule", {}))
    if schedule.name == "cosine" and np.float32(schedule.min_lr) > np.float32(optimizer.lr):
        raise _err(source, f"schedule 'cosine' needs min_lr <= the optimizer's lr (got min_lr "
                           f"{schedule.min_lr} > lr {optimizer.lr})")
    return TrainSpec(kernels=tuple(sorted(pins.items())),loss=loss, trainable=rules,
                     optimizer=optimizer, schedule=schedule,
                     backward=backward, master_weights=master, accumulate=acc, source=source,
                     backward_given="backward" in d)


# a short form's selection after an optional KIND. prefix: all, lastN, firstN, or indices and
# ranges joined with '/'
_SHORT_ITEM = r"(-?\d+|-?\d*\.\.-?\d*)"
_SHORT_SELECTION = re.compile(rf"all|last\d+|first\d+|{_SHORT_ITEM}(/{_SHORT_ITEM})*", re.ASCII)
_SHORT_KIND = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\.(.+)", re.ASCII)


def _short_rule(source: str, token: str) -> dict[str, Any]:
    if token == "all":
        return {"layers": "all", "params": "both"}
    if ":" not in token:
        raise _err(source, f"cannot read trainable set {brief(token)} (e.g. bias:last4, "
                           "weight:last2@0.25, bias:conv.last2, bias:3..7, all)")
    params, layers = token.split(":", 1)
    ratio = 1.0
    if "@" in layers:
        layers, r = layers.split("@", 1)
        try:
            ratio = float(r)
        except ValueError:
            raise _err(source, f"channel ratio {brief(r)} is not a number") from None
    rule: dict[str, Any] = {"params": params, "channels": ratio}
    m = _SHORT_KIND.fullmatch(layers)
    if m and _SHORT_SELECTION.fullmatch(m.group(2)):     # KIND.SELECTION, e.g. conv.last2
        rule["kind"], layers = m.group(1), m.group(2)
    if layers.startswith("last") and _digits(layers[4:]) is not None:
        layers = f"last {layers[4:]}"
    elif layers.startswith("first") and _digits(layers[5:]) is not None:
        layers = f"first {layers[5:]}"
    elif layers != "all":
        layers = [x if _digits(x) is None else _digits(x) for x in layers.split("/")]
    return rule | {"layers": layers}


def parse_short(text: str) -> TrainSpec:
    """A short form: RULE[+RULE...][,key=value...] (see the module docstring)."""
    source = f"--train {brief(text, 120)}"
    head, *opts = text.split(",")
    d: dict[str, Any] = {"trainable": [_short_rule(source, t) for t in head.split("+") if t]}
    opt: dict[str, Any] = {}
    sched: dict[str, Any] = {}
    for kv in opts:
        if "=" not in kv:
            raise _err(source, f"option {brief(kv)} is not key=value")
        k, v = kv.split("=", 1)
        if k in ("opt", "optimizer"):
            opt["name"] = v
        elif k in ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay"):
            try:
                opt[k] = float(v)
            except ValueError:
                raise _err(source, f"{k}={brief(v)} is not a number") from None
        elif k == "schedule":
            sched["name"] = v
        elif k in ("step_size", "warmup_steps", "total_steps"):
            sched[k] = v if _digits(v) is None else _digits(v)
        elif k in ("gamma", "min_lr"):
            try:
                sched[k] = float(v)
            except ValueError:
                raise _err(source, f"{k}={brief(v)} is not a number") from None
        elif k in ("loss", "backward", "master_weights"):
            d[k] = v
        elif k == "accumulate":
            d[k] = v if _digits(v) is None else _digits(v)
        else:
            raise _err(source, f"unknown option {brief(k)}")
    d["optimizer"] = opt
    if sched:
        d["schedule"] = sched
    return spec_from_dict(d, source)


def load_spec(arg: str | Path) -> TrainSpec:
    """A spec from a YAML file path, or a short form."""
    p = Path(arg)
    try:
        is_file = p.is_file()
    except OSError:                  # e.g. a short form longer than a file name may be
        is_file = False
    if p.suffix in (".yaml", ".yml", ".json") or is_file:
        from ..safe_yaml import load_yaml_file  # yaml: only for a spec file

        return spec_from_dict(load_yaml_file(p, "training spec"), str(p))
    return parse_short(str(arg))


# -- resolving a spec against a model ---------------------------------------------------------

def parametric_layers(graph: Graph) -> list[Op]:
    return [op for op in graph.ops if op.type in PARAMETRIC_OPS]


def layer_kind(graph: Graph, op: Op) -> str:
    """The kind (KINDS) of a parametric layer: fc, dwconv, or for a conv2d conv (one group:
    the weight's input channels are all of the input's) or gconv (several groups)."""
    if op.type == "fully_connected":
        return "fc"
    if op.type == "depthwise_conv2d":
        return "dwconv"
    cin = graph.tensors[op.inputs[0]].shape[-1]
    return "conv" if graph.tensors[op.inputs[1]].shape[-1] == cin else "gconv"


def kind_counts(kinds: list[str]) -> str:
    """``conv 3, dwconv 1, fc 1``: how many layers of each kind, in KINDS order."""
    return ", ".join(f"{k} {kinds.count(k)}" for k in KINDS if k in kinds)


def _of_kind(spec: TrainSpec, kinds: list[str], kind: str | None) -> list[int]:
    """Indices of the parametric layers a rule of ``kind`` selects among (all without one);
    a one-line error for a kind that does not exist or that the model lacks."""
    if kind is None:
        return list(range(len(kinds)))
    if kind not in KINDS:
        raise _err(spec.source, f"unknown layer kind {brief(kind)} (kinds: "
                                f"{', '.join(KINDS)}; this model has {kind_counts(kinds)})")
    pool = [i for i, k in enumerate(kinds) if k == kind]
    if not pool:
        raise _err(spec.source, f"the model has no {kind} layers ({KINDS[kind]}); it has "
                                f"{kind_counts(kinds)}")
    return pool


_RANGE = re.compile(r"(-?\d*)\.\.(-?\d*)", re.ASCII)


def _range(spec: TrainSpec, text: str, n: int, what: str) -> list[int] | None:
    """The indices of an inclusive range ``A..B`` (``A..``, ``..B``, ``..``; negative ends
    count from the end), or None if ``text`` is not one."""
    m = _RANGE.fullmatch(text)
    if m is None:
        return None
    ends = [_digits(g) if g else d for g, d in ((m.group(1), 0), (m.group(2), n - 1))]
    if None in ends:
        return None
    for v in ends:
        if not -n <= v < n:
            raise _err(spec.source, f"layer range {brief(text)}: index {brief(v)} out of range "
                                    f"({n} {what}: 0..{n - 1} or -{n}..-1)")
    lo, hi = (v % n for v in ends)
    if lo > hi:
        raise _err(spec.source, f"layer range {brief(text)} is empty ({lo} > {hi}; ranges "
                                "are inclusive and ascending)")
    return list(range(lo, hi + 1))


def _select(spec: TrainSpec, layers: list[Op], sel: Any, what: str = "trainable layers",
            everything: tuple[list[Op], list[str]] | None = None) -> list[int]:
    """Positions in ``layers`` that ``sel`` names. ``what`` names the layers in messages;
    ``everything``: all parametric layers and their kinds when ``layers`` are those of one
    kind (a name of another kind is then told apart from a name the model lacks)."""
    n = len(layers)
    names = {op.name: i for i, op in enumerate(layers)}
    other = {op.name: k for op, k in zip(*everything)} if everything is not None else {}
    if isinstance(sel, str):
        words = sel.split()
        if sel == "all":
            return list(range(n))
        if len(words) == 2 and words[0] in ("last", "first") and _digits(words[1]) is not None:
            k = _digits(words[1])
            if not 1 <= k <= n:
                raise _err(spec.source, f"'{sel}' but the model has {n} {what}")
            return list(range(n - k, n)) if words[0] == "last" else list(range(k))
        sel = (sel,)
    if isinstance(sel, int):
        sel = (sel,)
    out = []
    for s in sel:
        if isinstance(s, bool):
            raise _err(spec.source, f"unknown layer {brief(s)}")
        if isinstance(s, int):
            if not -n <= s < n:
                raise _err(spec.source, f"layer index {s} out of range (model has {n} "
                                        f"{what})")
            out.append(s % n)
        elif isinstance(s, str) and s in names:
            out.append(names[s])
        elif isinstance(s, str) and (span := _range(spec, s, n, what)) is not None:
            out.extend(span)
        elif isinstance(s, str) and s in other:
            raise _err(spec.source, f"layer {brief(s)} is a {other[s]} layer, not one of the "
                                    f"{what}")
        else:
            raise _err(spec.source, _unknown_layer(s, everything[0] if everything else layers))
    return out


def _unknown_layer(sel: Any, layers: list[Op], most: int = 5) -> str:
    """One line for a layer name the model lacks: at most ``most`` layers whose names come
    close (a whole name or any ';'- or '/'-separated piece of it, as TFLite names join
    several), by index and the tail of their name, and where to see them all."""
    key = str(sel).lower()
    pieces: dict[str, list[int]] = {}
    for i, op in enumerate(layers):
        for piece in {op.name, *re.split(r"[;/]", op.name)}:
            if piece:
                pieces.setdefault(piece.lower(), []).append(i)
    near = [i for i, op in enumerate(layers) if len(key) > 1 and key in op.name.lower()]
    for piece in difflib.get_close_matches(key, list(pieces), n=len(pieces), cutoff=0.6):
        near += pieces[piece]
    near = list(dict.fromkeys(near))[:most]

    def tail(name: str, limit: int = 48) -> str:
        return repr(name if len(name) <= limit else "…" + name[-(limit - 1):])

    n = len(layers)
    where = (f"{n} trainable layers: give 0..{n - 1}, -{n}..-1, a range A..B, last N, first N "
             "or all; `pockengine inspect MODEL` lists them")
    if not near:
        return f"unknown layer {brief(sel)}, no similar name ({where})"
    listed = ", ".join(f"{i} {tail(layers[i].name)}" for i in near)
    return f"unknown layer {brief(sel)}; similar (index name): {listed} ({where})"


def select_channels(weight: np.ndarray, ratio: float, axis: int) -> tuple[int, ...] | None:
    """Output channels (on ``axis``, the layer's ``ir.weight_axis``) with the largest L1
    norms."""
    if ratio >= 1.0:
        return None
    w = np.asarray(weight, dtype=np.int64)
    c = w.shape[axis]
    norms = np.abs(w).sum(axis=tuple(a for a in range(w.ndim) if a != axis))
    k = max(1, math.ceil(ratio * c - 1e-9))
    order = sorted(range(c), key=lambda i: (-int(norms[i]), i))
    return tuple(sorted(order[:k]))


def resolve(spec: TrainSpec, graph: Graph) -> list[LayerUpdate]:
    """Which layers train which parameters; raises SpecError for a spec that does not fit."""
    layers = parametric_layers(graph)
    if not layers:
        raise _err(spec.source, "the model has no layer with parameters")
    kinds = [layer_kind(graph, op) for op in layers]
    bias = [False] * len(layers)
    weight = [False] * len(layers)
    ratio: list[float | None] = [None] * len(layers)
    for rule in spec.trainable:
        pool = _of_kind(spec, kinds, rule.kind)
        chosen = _select(spec, [layers[i] for i in pool], rule.layers,
                         *((f"{rule.kind} layers", (layers, kinds)) if rule.kind else ()))
        for i in (pool[j] for j in chosen):
            if rule.params in ("bias", "both"):
                bias[i] = True
            if rule.params in ("weight", "both"):
                weight[i] = True
                ratio[i] = max(ratio[i] or 0.0, rule.channels)
    out = []
    for i, op in enumerate(layers):
        has_bias = len(op.inputs) > 2 and bool(op.inputs[2])
        if bias[i] and not has_bias and not weight[i]:
            continue  # a layer without bias cannot train its bias; weights may still train
        if not (bias[i] and has_bias) and not weight[i]:
            continue
        ch = None
        if weight[i]:
            w = graph.tensors[op.inputs[1]]
            if w.data is None:
                raise _err(spec.source, f"layer {op.name!r} has no constant weight to train")
            ch = select_channels(w.data, ratio[i] or 1.0, weight_axis(op.type))
        out.append(LayerUpdate(op=op.name, index=i, bias=bias[i] and has_bias,
                               weight=weight[i], channels=ch))
    if not out:
        raise _err(spec.source, "the trainable set is empty for this model (the selected "
                                "layers have no bias)")
    find_loss_site(graph, spec, require_int8=False)  # the loss must fit the model output
    return out
