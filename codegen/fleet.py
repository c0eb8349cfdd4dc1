"""`pockengine fleet`: federated sparse fine-tuning of many devices on Flower.

The server is Flower's: a ``ServerApp`` running ``FleetAvg``, a subclass of Flower's FedAvg
strategy, and the clients are Flower ``ClientApp``s that fine-tune with one of pockengine's
engines. What pockengine adds is the exact arithmetic of a sparse int8 fleet:

- only the trained tensors travel (the export layout of ``<p>_params_export``): the global
  values down, each client's **deltas** up (per tensor the narrowest of int8 / int32 / int64
  that holds every difference: int8 weights' deltas mostly travel as int8), with the CRC-32 of
  the delta bytes and the model hash of the client's model;
- the server averages the deltas weighted by samples in integers (sum of n_i * d_i over the sum
  of n_i, rounded half away from zero) and applies them with the device's saturation (int8
  weights in [-127, 127], int32 biases in their forward-safe range), so the global state is
  the same bits on any machine and a client that imports it holds exactly the server's copy;
- every round a client starts from the global state as if the model had been compiled with
  it: parameters imported, master copies following them (``<p>_params_import``), momentum and
  counters fresh (``<p>_init``, or RESET factory on a device over serial);
- an update that does not check out (model hash, CRC, names, shapes, dtypes, sample count) is
  refused and reported; a client that does not answer within the round's timeout is dropped
  for that round and gets the current global state in the next one.

Runtimes: ``simulation`` is Flower's simulation engine (Ray; golden and host clients, for
fleets much larger than the machine's cores); ``local`` runs the client apps in threads of
this process behind a ``flwr.serverapp.Grid`` (devices over serial, small fleets, tests).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.task_identity import TaskIdentity

from .board import list_boards, load_board
from .data import data_arrays, fit_input
from .errors import PockError
from .fit import evaluate, fit_model, prepare_model, targets_for
from .golden.numerics import rounding_divide_by_pot
from .golden.train_optim import param_limits
from .golden.training import (
    TrainState,
    fit,
    import_params,
    params_from_bytes,
    params_to_bytes,
    predict,
)
from .ir import Graph
from .ir.ops import UPDATE_OPS
from .model_store import graph_digest
from .pipeline import build_project, compile_model, resolve_spec, run_host_fit
from .train import build_training_graph

RUNTIMES = ("local", "simulation")
SPLITS = "iid | dirichlet:ALPHA | shards:K"
DEFAULT_TIMEOUT = 600.0


class UpdateRejected(PockError):
    """A client's update the server does not take (the message says why)."""


# ---------------------------------------------------------------------------------------------
# The trained tensors: layout, deltas, exact aggregation


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    lo: int
    hi: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Layout:
    """The trained tensors in export order, with the saturation bounds their updates use."""

    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, tg: Graph) -> Layout:
        limits: dict[str, int | None] = {}
        for op in tg.ops:
            if op.type in UPDATE_OPS:
                limits[op.inputs[0]] = op.attrs.get("bias_limit")
        entries = []
        for e in tg.metadata["training"]["parameters"]:
            name = e["tensor"] if isinstance(e, Mapping) else str(e)
            t = tg.tensors[name]
            lo, hi = param_limits(t.dtype, limits.get(name))
            entries.append(Entry(name, t.dtype, tuple(t.shape), lo, hi))
        return cls(tuple(entries))

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.entries)



def encode_delta(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """new - old in the narrowest of int8 / int32 / int64 that holds every difference."""
    d = np.asarray(new, np.int64) - np.asarray(old, np.int64)
    for dt in (np.int8, np.int32):
        info = np.iinfo(dt)
        if d.size == 0 or (d.min() >= info.min and d.max() <= info.max):
            return d.astype(dt)
    return d


def delta_crc(deltas: Sequence[np.ndarray]) -> int:
    crc = 0
    for d in deltas:
        crc = zlib.crc32(np.ascontiguousarray(d, d.dtype.newbyteorder("<")).tobytes(), crc)
    return crc


FRAC_BITS = 16      # fractional bits of the server's copy of the global model


def _round_div(num: np.ndarray, den: int) -> np.ndarray:
    """num / den rounded half away from zero, exactly (int64 num, den > 0)."""
    q = (np.abs(num) + den // 2) // den
    return np.where(num < 0, -q, q)


def server_master(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The server's fixed-point copy of the global model (2**-16 quanta), from int values."""
    return [np.asarray(a, np.int64) << FRAC_BITS for a in arrays]


def aggregate(layout: Layout, master: Sequence[np.ndarray],
              updates: Sequence[tuple[Sequence[np.ndarray], int]],
              server_lr: Fraction = Fraction(1), momentum: Fraction = Fraction(0),
              velocity: list[np.ndarray] | None = None
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """FedAvg in integers. The server keeps the global model in fixed point (``master``,
    2**-16 quanta, like a device's int32 master copy): master += server_lr * sum(n_i * d_i) /
    sum(n_i), rounded half away from zero to a 2**-16 quantum and saturated to the
    parameter's range (the device's saturation); the global int values are the master
    rounded half away from zero. A moved sub-quantum therefore is not lost between rounds.
    Returns (new master, new global arrays); the result does not depend on the order of
    ``updates``. ``momentum`` > 0 (FedAvgM): the step is the server's velocity, v = momentum
    * v + step (v in 2**-16 quanta, updated in place in ``velocity``)."""
    total = sum(n for _, n in updates)
    if total <= 0:
        return [np.array(m, copy=True) for m in master], \
            [_to_int(e, m) for e, m in zip(layout.entries, master)]
    lr = Fraction(server_lr)
    new_master, out = [], []
    for k, (e, m) in enumerate(zip(layout.entries, master)):
        num = np.zeros(e.shape, np.int64)
        for deltas, n in updates:
            num += np.asarray(deltas[k], np.int64) * int(n)
        step = _round_div((num << FRAC_BITS) * lr.numerator, total * lr.denominator)
        if momentum and velocity is not None:
            mom = Fraction(momentum)
            step = _round_div(velocity[k] * mom.numerator, mom.denominator) + step
            velocity[k] = step
        nm = np.clip(np.asarray(m, np.int64) + step, e.lo << FRAC_BITS, e.hi << FRAC_BITS)
        new_master.append(nm)
        out.append(_to_int(e, nm))
    return new_master, out


def _to_int(e: Entry, master: np.ndarray) -> np.ndarray:
    return np.clip(rounding_divide_by_pot(master, FRAC_BITS), e.lo, e.hi).astype(e.dtype)


def check_update(layout: Layout, arrays: Sequence[np.ndarray], names: Sequence[str],
                 crc: int, model_hash: str, expected_hash: str, samples: int) -> None:
    """Raise UpdateRejected unless the update is one for this model and arrived intact."""
    if model_hash != expected_hash:
        raise UpdateRejected(f"model hash {model_hash[:12]} is not the fleet's "
                             f"{expected_hash[:12]}")
    if list(names) != [e.name for e in layout.entries]:
        raise UpdateRejected(f"tensors {list(names)[:3]}... are not the trained tensors "
                             f"{[e.name for e in layout.entries][:3]}...")
    for e, d in zip(layout.entries, arrays):
        if tuple(d.shape) != e.shape:
            raise UpdateRejected(f"{e.name}: delta of shape {list(d.shape)}, expected "
                                 f"{list(e.shape)}")
        if d.dtype not in (np.int8, np.int32, np.int64):
            raise UpdateRejected(f"{e.name}: delta of dtype {d.dtype}")
    got = delta_crc(arrays)
    if got != crc:
        raise UpdateRejected(f"CRC-32 {got:08x} of the deltas, the client "
                             f"sent {crc:08x}")
    if samples <= 0:
        raise UpdateRejected(f"{samples} samples")


# ---------------------------------------------------------------------------------------------
# Splits


def partition(labels: np.ndarray, clients: int, split: str, seed: int = 0) -> list[np.ndarray]:
    """Sample indices of each client: ``iid`` (a shuffled even split), ``dirichlet:ALPHA``
    (each class spread over the clients in Dirichlet(ALPHA) proportions: label skew, smaller
    ALPHA is more skewed) or ``shards:K`` (sorted by label, cut into clients*K shards, K per
    client). Every client gets at least one sample; the split depends only on ``seed``."""
    labels = np.asarray(labels).reshape(-1)
    n = len(labels)
    if clients < 1:
        raise PockError(f"--clients must be >= 1, got {clients}")
    if n < clients:
        raise PockError(f"{n} training samples cannot be split over {clients} clients")
    rng = np.random.default_rng(seed)
    kind, _, arg = split.partition(":")
    if kind == "iid" and not arg:
        return [np.sort(p) for p in np.array_split(rng.permutation(n), clients)]
    if kind == "shards":
        k = _number(arg, int, split)
        if k < 1 or clients * k > n:
            raise PockError(f"--split {split}: {clients} clients x {k} shards needs 1 <= K and "
                            f"at least {clients * k} samples (have {n})")
        order = np.argsort(labels, kind="stable")
        shards = np.array_split(order, clients * k)
        pick = rng.permutation(clients * k)
        return [np.sort(np.concatenate([shards[s] for s in pick[c * k:(c + 1) * k]]))
                for c in range(clients)]
    if kind == "dirichlet":
        alpha = _number(arg, float, split)
        if not alpha > 0:
            raise PockError(f"--split {split}: ALPHA must be > 0")
        parts: list[list[int]] = [[] for _ in range(clients)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(np.full(clients, alpha))
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(int(i) for i in chunk)
        # nobody empty: the largest client lends one sample to each empty one
        for k in range(clients):
            if not parts[k]:
                big = max(range(clients), key=lambda j: len(parts[j]))
                parts[k].append(parts[big].pop())
        return [np.sort(np.asarray(p, np.int64)) for p in parts]
    raise PockError(f"--split {split!r}: expected {SPLITS}")


def _number(text: str, kind: type, split: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise PockError(f"--split {split!r}: expected {SPLITS}") from None


# ---------------------------------------------------------------------------------------------
# The model of a fleet and its clients' engines


@dataclass
class FleetModel:
    """What every client and the server agree on: the quantized graph, the training graph,
    the trained tensors' layout, the initial parameters and the fleet's model hash."""

    graph: Graph
    spec: Any
    tg: Graph
    layout: Layout
    initial: list[np.ndarray]
    model_hash: str

    @classmethod
    def build(cls, model: str | Path | Graph, spec: Any, calib_x: np.ndarray,
              board: str | None = None) -> FleetModel:
        defaults = load_board(board) if board is not None else None
        spec = resolve_spec(spec, defaults)
        graph = prepare_model(model, None, calib_x)
        tg = build_training_graph(graph, spec)
        layout = Layout.of(tg)
        state = TrainState.from_graph(tg)
        initial = [np.array(state[e.name], copy=True) for e in layout.entries]
        h = hashlib.sha256()
        h.update(graph_digest(graph).encode())
        h.update(str(spec.source or spec).encode())
        for e in layout.entries:
            h.update(f"{e.name}:{e.dtype}:{e.shape}:{e.lo}:{e.hi};".encode())
        return cls(graph, spec, tg, layout, initial, h.hexdigest())

    def split(self, blob: bytes) -> list[np.ndarray]:
        """An export blob as the trained tensors' arrays, in export order."""
        return list(params_from_bytes(self.tg, blob).values())

    @staticmethod
    def join(arrays: Sequence[np.ndarray]) -> bytes:
        """The trained tensors' arrays as an export blob."""
        return params_to_bytes(arrays)

    def state(self, arrays: Sequence[np.ndarray]) -> TrainState:
        """A fresh training state holding ``arrays`` (the masters follow them)."""
        state = TrainState.from_graph(self.tg)
        import_params(self.tg, state, self.join(arrays))
        return state


class Engine:
    """Fine-tunes from a global state on a client's samples; returns the new parameters."""

    name = "engine"

    restarts = 0          # times the client's device was restarted (power cuts)

    def train(self, global_blob: bytes, x: np.ndarray, t: np.ndarray, epochs: int,
              seed: int) -> bytes:
        raise NotImplementedError

    def power_cut(self) -> bool:
        """Cut the device's power (``--fault reboot``); False where there is no device."""
        return False

    def close(self) -> None:
        pass


class GoldenEngine(Engine):
    name = "golden"

    def __init__(self, fm: FleetModel):
        self.tg = fm.tg

    def train(self, global_blob, x, t, epochs, seed):
        state = TrainState.from_graph(self.tg)
        import_params(self.tg, state, global_blob)
        fit(self.tg, state, x, t, epochs=epochs, shuffle=True, seed=seed)
        return state.params_bytes()


class HostEngine(Engine):
    """The generated C built for this machine; one build serves every client."""

    name = "host"

    def __init__(self, fm: FleetModel, build_dir: Path, backend: str = "auto"):
        self.build = build_project(compile_model(fm.graph, spec=fm.spec, out_dir=build_dir,
                                                 backend=backend))

    def train(self, global_blob, x, t, epochs, seed):
        return run_host_fit(self.build, x, t, order=seed, epochs=epochs,
                            params=global_blob)["params"]


class SerialEngine(Engine):
    """A device speaking the serial protocol (a board on a port, or a QEMU board's UART):
    RESET factory (fresh optimizer state), SET_PARAMS (the global state; the masters follow),
    the samples streamed one TRAIN each in the round's order, GET_PARAMS."""

    name = "serial"

    def __init__(self, device: Any, fm: FleetModel, expected: Mapping[str, Any],
                 owner: Any = None, restart: Callable[[], Any] | None = None):
        self.dev, self.owner, self.restart = device, owner, restart
        desc = _identity(device.describe())
        # the model this device trains, as the server knows it: the fleet's hash only when
        # the device describes the fleet's model (name, input and output quantization, the
        # training spec as compiled, the trained tensors); else a hash of what it describes
        self.model_hash = fm.model_hash if desc == _identity(expected) else \
            hashlib.sha256(repr(desc).encode()).hexdigest()

    def train(self, global_blob, x, t, epochs, seed):
        from .serial.session import train_over_serial

        if self.owner is not None and not self.owner.alive() and self.restart is not None:
            # the emulated board lost power: boot it again on the same UART port; the link
            # reconnects and the round starts from the global state like any other
            self.owner = self.restart()
            self.restarts += 1
        self.dev.reset(factory=True)
        self.dev.set_params(global_blob)
        r = train_over_serial(self.dev, (x, t), epochs=epochs, seed=seed, predict=False,
                              checkpoint_every=1 << 30)
        return r["_params"]

    def power_cut(self) -> bool:
        if self.owner is None:
            return False
        self.owner.kill()
        return True

    def close(self) -> None:
        self.dev.close()
        if self.owner is not None:
            self.owner.kill()


def _identity(desc: Mapping[str, Any] | None) -> dict[str, Any]:
    """What must agree between a device's DESCRIBE and the fleet's model (not the generator
    version, the board or the prefix)."""
    d = dict(desc or {})
    return json.loads(json.dumps({k: d.get(k) for k in ("model", "input", "output",
                                                         "training")}, sort_keys=True))


def serial_engines(fm: FleetModel, ports: Sequence[str], work: Path, *,
                   baud: int | None = None, timeout: float = 2.0,
                   reconnect: float = 30.0) -> dict[int, Engine]:
    """One engine per device port (``--port``, repeated); a link that drops (a device
    resetting, a cable replugged) is reopened for up to ``reconnect`` seconds. The devices'
    DESCRIBE is checked against the fleet's model compiled here."""
    from .render.serial_harness import describe
    from .serial.client import Device

    expected = describe(compile_model(fm.graph, spec=fm.spec, out_dir=work / "reference")
                        .manifest)
    engines: dict[int, Engine] = {}
    try:
        for k, port in enumerate(ports):
            kw = {"baudrate": baud} if baud else {}
            engines[k] = SerialEngine(Device(port, timeout=timeout, reconnect=reconnect, **kw),
                                      fm, expected)
    except BaseException:
        for e in engines.values():
            e.close()
        raise
    return engines


def qemu_engines(fm: FleetModel, board: str, clients: int, work: Path,
                 log: Callable[[str], None]) -> dict[int, Engine]:
    """``clients`` emulated boards: the fleet's model compiled for ``board`` with the serial
    harness, each copy under its own QEMU with the UART on a local TCP port."""
    from .render.serial_harness import describe
    from .serial.client import Device
    from .serial.firmware import build_serial_firmware, start_serial_firmware
    from .serial.transport import free_tcp_port

    proj = compile_model(fm.graph, board=board, spec=fm.spec, out_dir=work / board)
    fw = build_serial_firmware(proj.dir)
    expected = describe(proj.manifest)
    log(f"built the serial firmware for {board}: {fw.elf}")
    engines: dict[int, Engine] = {}
    try:
        for k in range(clients):
            uart, cwd = f"tcp:127.0.0.1:{free_tcp_port()}", work / f"client-{k}"
            run = start_serial_firmware(fw, uart, cwd)
            engines[k] = SerialEngine(Device(run.url, timeout=2.0, reconnect=30.0), fm,
                                      expected, owner=run, restart=lambda u=uart, c=cwd:
                                      start_serial_firmware(fw, u, c))
    except BaseException:
        for e in engines.values():
            e.close()
        raise
    return engines


def client_seed(seed: int, server_round: int, client: int) -> int:
    """The sample-order seed of a client in a round (the same on every engine)."""
    return int(np.random.SeedSequence([seed, server_round, client]).generate_state(1)[0])


# ---------------------------------------------------------------------------------------------
# Flower: the client app, the strategy, the in-process grid


FAULTS = ("drop", "corrupt", "shape", "model", "reboot")


@dataclass
class ClientSetup:
    """Everything a client app needs, picklable for Flower's simulation engine."""

    fm: FleetModel
    x: np.ndarray
    t: np.ndarray
    parts: list[np.ndarray]
    engine: str
    build_dir: str | None
    backend: str = "auto"
    faults: dict[tuple[int, int], str] = field(default_factory=dict)
    engines: dict[int, Engine] = field(default_factory=dict)  # local runtime: device clients

    def engine_for(self, client: int) -> Engine:
        hit = self.engines.get(client)
        if hit is not None:
            return hit
        key = (self.fm.model_hash, self.engine, self.backend, str(self.build_dir))
        cached = _ENGINE_CACHE.get(key)
        if cached is None:
            if self.engine == "golden":
                cached = GoldenEngine(self.fm)
            else:
                assert self.build_dir is not None
                cached = HostEngine(self.fm, Path(self.build_dir) / f"host-{uuid.uuid4().hex}",
                                    self.backend)
            _ENGINE_CACHE[key] = cached
        return cached


_ENGINE_CACHE: dict[tuple[str, str, str, str], Engine] = {}
_ENGINE_LOCK = threading.Lock()


class ClientDropped(PockError):
    """A client that vanished in the middle of a round (injected: ``drop``)."""


def client_train(setup: ClientSetup, client: int, arrays: list[np.ndarray],
                 config: Mapping[str, Any]) -> tuple[list[np.ndarray], list[str], dict]:
    """One client's round: check the model, train from the global arrays, return deltas,
    their names and the reply's config (samples, crc32, model-hash, seconds)."""
    fm = setup.fm
    server_round = int(config["server-round"])
    fault = setup.faults.get((client, server_round))
    if fault == "drop":
        raise ClientDropped(f"client {client} dropped out in round {server_round}")
    engine_hash = None
    if client in setup.engines:
        engine_hash = getattr(setup.engines[client], "model_hash", None)
    if config["model-hash"] != fm.model_hash:
        raise PockError(f"client {client}: the server's model {str(config['model-hash'])[:12]} "
                        f"is not this client's {fm.model_hash[:12]}")
    idx = setup.parts[client]
    t0 = time.perf_counter()
    with _ENGINE_LOCK:
        engine = setup.engine_for(client)
    if engine_hash is not None and engine_hash != fm.model_hash:
        # a device of another model: it does not train; the server refuses its (empty)
        # update by the hash and says so
        return [], [], {"samples": len(idx), "crc32": 0, "model-hash": engine_hash,
                        "seconds": 0.0, "restarts": 0}
    if fault == "reboot" and not engine.power_cut():
        raise PockError(f"fault reboot@{client}:{server_round}: client {client} has no device "
                        "to reboot (QEMU boards only)")
    restarts = engine.restarts
    blob = engine.train(fm.join(arrays), setup.x[idx], setup.t[idx],
                        int(config["local-epochs"]),
                        client_seed(int(config["seed"]), server_round, client))
    new = fm.split(blob)
    deltas = [encode_delta(n, g) for n, g in zip(new, arrays)]
    names = [e.name for e in fm.layout.entries]
    crc = delta_crc(deltas)
    model_hash = engine_hash or fm.model_hash
    if fault == "corrupt":           # a flipped bit on the way: the CRC no longer matches
        d = deltas[0].copy()
        d.reshape(-1).view(np.uint8)[0] ^= 0x10
        deltas[0] = d
    elif fault == "shape":
        deltas[-1] = deltas[-1].reshape(-1)[:-1]
    elif fault == "model":
        model_hash = hashlib.sha256(b"another model" + model_hash.encode()).hexdigest()
    return deltas, names, {"samples": len(idx), "crc32": crc, "model-hash": model_hash,
                           "seconds": time.perf_counter() - t0,
                           "restarts": engine.restarts - restarts}


def make_client_app(setup: ClientSetup) -> ClientApp:
    """The Flower client app: a train message carries the global arrays and the round's
    config; the reply carries the deltas, the sample count and the checks."""
    app = ClientApp()

    @app.train()
    def _train(msg: Message, context: Any) -> Message:
        client = int(context.node_config["partition-id"])
        arrays = [np.asarray(a) for a in msg.content["arrays"].to_numpy_ndarrays()]
        config = dict(msg.content["config"])
        deltas, names, info = client_train(setup, client, arrays, config)
        record = ArrayRecord()
        for name, d in zip(names, deltas):
            record[name] = _array(d)
        reply = RecordDict({
            "arrays": record,
            "metrics": MetricRecord({"num-examples": info["samples"],
                                     "seconds": float(info["seconds"]),
                                     "restarts": int(info["restarts"])}),
            "config": ConfigRecord({"client": client, "crc32": int(info["crc32"]),
                                    "model-hash": info["model-hash"]}),
        })
        return Message(reply, reply_to=msg)

    return app


def _array(a: np.ndarray) -> Array:
    return Array(np.ascontiguousarray(a))


@dataclass
class ClientReport:
    client: int
    status: str                        # ok | dropped | rejected
    samples: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    reason: str | None = None
    seconds: float | None = None
    restarts: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"client": self.client, "status": self.status, "samples": self.samples,
                "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
                "reason": self.reason, "seconds": self.seconds, "restarts": self.restarts}


class FleetAvg(FedAvg):
    """Flower's FedAvg with pockengine's aggregation: deltas checked (``check_update``) and
    averaged exactly in integers (``aggregate``); a report per client and round."""

    def __init__(self, fm: FleetModel, clients: int, reports: dict[int, list[ClientReport]],
                 node_clients: dict[int, int], log: Callable[[str], None],
                 server_lr: Fraction = Fraction(1), server_momentum: Fraction = Fraction(0)):
        super().__init__(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=clients,
                         min_available_nodes=clients)
        self.fm, self.reports, self.node_clients, self.log = fm, reports, node_clients, log
        self.server_lr, self.server_momentum = server_lr, server_momentum
        self.global_arrays = [np.array(a, copy=True) for a in fm.initial]
        self.master = server_master(fm.initial)
        self.velocity = [np.zeros(e.shape, np.int64) for e in fm.layout.entries]
        self.down = fm.layout.nbytes
        self.sent: list[int] = []

    def configure_train(self, server_round, arrays, config, grid):
        messages = list(super().configure_train(server_round, arrays, config, grid))
        self.sent = [m.metadata.dst_node_id for m in messages]
        return messages

    def _client(self, node: int) -> int:
        return self.node_clients.get(node, node)

    def _take(self, msg: Message) -> tuple[ClientReport, tuple[list[np.ndarray], int] | None]:
        """A reply's report, and its (deltas, samples) if the update is taken."""
        node = msg.metadata.src_node_id
        if msg.has_error():
            reason = (msg.error.reason or "error").strip().splitlines()[-1]
            return ClientReport(self._client(node), "dropped", bytes_down=self.down,
                                reason=reason), None
        content = msg.content
        cfg = content["config"]
        self.node_clients[node] = int(cfg["client"])
        client = self._client(node)
        names = list(content["arrays"].keys())
        deltas = [np.asarray(a.numpy()) for a in content["arrays"].values()]
        samples = int(content["metrics"]["num-examples"])
        up = sum(d.nbytes for d in deltas)
        try:
            check_update(self.fm.layout, deltas, names, int(cfg["crc32"]),
                         str(cfg["model-hash"]), self.fm.model_hash, samples)
        except UpdateRejected as e:
            return ClientReport(client, "rejected", samples, up, self.down, str(e)), None
        return ClientReport(client, "ok", samples, up, self.down,
                            seconds=float(content["metrics"]["seconds"]),
                            restarts=int(content["metrics"]["restarts"])), (deltas, samples)

    def aggregate_train(self, server_round, replies):
        by_client: dict[int, ClientReport] = {}
        updates = []
        for msg in replies:
            report, update = self._take(msg)
            by_client[report.client] = report
            if update is not None:
                updates.append(update)
        for node in self.sent:
            client = self._client(node)
            if client not in by_client:
                by_client[client] = ClientReport(client, "dropped", bytes_down=self.down,
                                                 reason="no reply before the timeout")
        self.reports[server_round] = [by_client[c] for c in sorted(by_client)]
        for r in self.reports[server_round]:
            if r.status != "ok":
                self.log(f"  round {server_round}: client {r.client} {r.status}: {r.reason}")
        if not updates:
            return None, None
        self.master, self.global_arrays = aggregate(
            self.fm.layout, self.master, updates, self.server_lr, self.server_momentum,
            self.velocity)
        record = ArrayRecord()
        for e, arr in zip(self.fm.layout.entries, self.global_arrays):
            record[e.name] = _array(arr)
        return record, MetricRecord({"updates": len(updates)})


class LocalGrid(Grid):
    """A Flower ``Grid`` in this process: each node runs the client app in a thread; replies
    not back within the timeout are dropped for the round (the late thread's result is
    ignored)."""

    def __init__(self, app: ClientApp, clients: int, max_workers: int):
        # this process is the server's task (as Flower's own in-process ServerApp runner)
        TaskIdentity.task_id, TaskIdentity.run_id = 1, 1
        TaskIdentity.node_id = SUPERLINK_NODE_ID
        self.app = app
        self.nodes = {1000 + k: k for k in range(clients)}
        self.contexts = {node: Context(run_id=1, node_id=node,
                                       node_config={"partition-id": k,
                                                    "num-partitions": clients},
                                       state=RecordDict(), run_config={})
                         for node, k in self.nodes.items()}
        self.pool = ThreadPoolExecutor(max_workers=max_workers,
                                       thread_name_prefix="pockengine-fleet")
        self.futures: dict[str, Any] = {}
        self._run: Any = None

    def set_run(self, run: Any) -> None:
        self._run = run

    @property
    def run(self) -> Any:
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        ids = []
        for msg in messages:
            mid = str(uuid.uuid4())
            msg.metadata.__dict__["_message_id"] = mid
            ctx = self.contexts[msg.metadata.dst_node_id]
            self.futures[mid] = self.pool.submit(self._call, msg, ctx)
            ids.append(mid)
        return ids

    def _call(self, msg: Message, ctx: Context) -> Message:
        try:
            return self.app(msg, ctx)
        except Exception as e:                       # noqa: BLE001 - a client's failure
            return Message(Error(code=1, reason=f"{type(e).__name__}: {e}"), reply_to=msg)

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        out = []
        for mid in list(message_ids):
            fut = self.futures.get(mid)
            if fut is not None and fut.done():
                out.append(fut.result())
                del self.futures[mid]
        return out

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> list[Message]:
        pending = set(self.push_messages(messages))
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while pending:
            got = self.pull_messages(pending)
            for r in got:
                pending.discard(r.metadata.reply_to_message_id)
            replies.extend(got)
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(0.01)
        for mid in pending:                           # late: the round goes on without them
            self.futures.pop(mid, None)
        return replies

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# The fleet run


@dataclass
class FleetResult:
    """The ``fleet --json`` summary; the quantized graph and a training state holding the
    final global parameters (``fit.tuned_graph(r.graph, r.state)`` is the fine-tuned model)."""

    summary: dict[str, Any]
    graph: Graph
    state: TrainState


def run_fleet(model: str | Path | Graph, spec: Any, train: Any, evals: Any, *,
              clients: int, rounds: int, local_epochs: int = 1, split: str = "iid",
              engine: str = "golden", runtime: str | None = None, seed: int = 0,
              timeout: float = DEFAULT_TIMEOUT, jobs: int = 2, board: str | None = None,
              faults: Mapping[tuple[int, int], str] | None = None,
              centralized: bool = False, engines: Mapping[int, Engine] | None = None,
              server_lr: float | str | Fraction = 1,
              server_momentum: float | str | Fraction = 0,
              ports: Sequence[str] | None = None, baud: int | None = None,
              calib: np.ndarray | None = None,
              log: Callable[[str], None] = lambda s: None) -> FleetResult:
    """Run a federated fine-tune; returns the ``fleet --json`` summary, the quantized graph
    and a state holding the final global parameters. ``engine``: golden, host or a device
    board (its serial firmware under QEMU, one per client); ``ports``: devices running the
    serial firmware, one client each; ``engines``: per-client engines of one's own (the
    others use ``engine``). ``calib``: calibration inputs of a float model (default: the
    first 100 training samples, as ``fit``)."""
    if rounds < 1 or local_epochs < 0:
        raise PockError(f"--rounds must be >= 1 and --local-epochs >= 0, got {rounds}, "
                        f"{local_epochs}")
    device_board = None
    if ports:
        if engine not in ("golden", "host", "serial") and engine is not None:
            raise PockError("--port and --engine BOARD are two kinds of devices: give one")
        clients = len(ports)
    elif engine not in ("golden", "host"):
        device_board = _device_board(engine)
        board = board or device_board
    lr_server = _fraction(server_lr, "--server-lr")
    mom_server = _fraction(server_momentum, "--server-momentum", zero=True)
    faults = dict(faults or {})
    for (c, r), what in faults.items():
        if what not in FAULTS or not 0 <= c < clients:
            raise PockError(f"fault {what}@{c}:{r}: faults are {', '.join(FAULTS)} of clients "
                            f"0..{clients - 1}")
    if device_board is None and not engines:
        for (c, r), what in faults.items():
            if what == "reboot":
                raise PockError(f"fault reboot@{c}:{r}: client {c} has no device to reboot "
                                "(QEMU boards only: --engine BOARD)")
    devices = bool(ports) or device_board is not None or bool(engines)
    if runtime is None:
        runtime = "local" if devices or clients <= 16 else "simulation"
    if runtime not in RUNTIMES:
        raise PockError(f"--runtime {runtime!r}: choose {' or '.join(RUNTIMES)}")
    if runtime == "simulation" and devices:
        raise PockError("devices (--port, a board) run with --runtime local")
    t0 = time.perf_counter()
    x_raw, y_raw = data_arrays(train, "training data")
    fm = FleetModel.build(model, spec, x_raw if calib is None else calib, board)
    x = fit_input(fm.graph, x_raw, "training data x")
    t = targets_for(fm.graph, fm.spec.loss, x, y_raw, "training data")
    if fm.spec.loss == "cross_entropy":
        parts = partition(t, clients, split, seed)
    else:                             # no classes to skew: every split is iid
        partition(np.zeros(len(x), np.int64), clients, split, seed)      # (checks the split)
        parts = partition(np.zeros(len(x), np.int64), clients, "iid", seed)
    ev = None
    if evals is not None:
        xe_raw, ye_raw = data_arrays(evals, "evaluation data")
        xe = fit_input(fm.graph, xe_raw, "evaluation data x")
        ev = (xe, targets_for(fm.graph, fm.spec.loss, xe, ye_raw, "evaluation data"))

    def accuracy(arrays: Sequence[np.ndarray]) -> dict:
        if ev is None:
            return {}
        return evaluate(fm.graph, predict(fm.tg, fm.state(arrays), ev[0]), ev[1],
                        fm.spec.loss)

    before = accuracy(fm.initial)
    log(f"fleet: {clients} clients ({split}, samples per client "
        f"{min(len(p) for p in parts)}..{max(len(p) for p in parts)}), {rounds} rounds x "
        f"{local_epochs} local epochs on {engine if not ports else 'serial ports'} "
        f"({runtime}); {fm.layout.nbytes} B of trained tensors; accuracy before "
        f"{_pct(before.get('accuracy'))}")
    reports: dict[int, list[ClientReport]] = {}
    history: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pockengine-fleet-") as tmp, ExitStack() as stack:
        own = dict(engines or {})
        if ports:
            own = serial_engines(fm, ports, Path(tmp), baud=baud)
        elif device_board is not None:
            own = qemu_engines(fm, device_board, clients, Path(tmp), log)
        for e in own.values():
            stack.callback(e.close)
        setup = ClientSetup(fm, x, t, parts, "golden" if devices else engine, tmp,
                            faults=faults, engines=own)
        stack.callback(lambda: [_ENGINE_CACHE.pop(k) for k in list(_ENGINE_CACHE)
                                if k[3] == tmp])
        final = _serve(setup, clients, rounds, local_epochs, seed, timeout, runtime, jobs,
                       reports, history, accuracy, log, lr_server, mom_server)
    after = accuracy(final)
    rounds_json = []
    for r in range(1, rounds + 1):
        rep = reports.get(r, [])
        acc = next((h["accuracy"] for h in history if h["round"] == r), None)
        rounds_json.append({"round": r, "accuracy": acc,
                            "bytes_up": sum(c.bytes_up for c in rep),
                            "bytes_down": sum(c.bytes_down for c in rep),
                            "clients": [c.to_json() for c in rep],
                            "seconds": next((h["seconds"] for h in history
                                             if h["round"] == r), None)})
    summary: dict[str, Any] = {
        "clients": clients, "rounds": rounds_json, "split": split, "engine": engine
        if not ports else "serial", "runtime": runtime, "local_epochs": local_epochs,
        "samples": [len(p) for p in parts], "trained_bytes": fm.layout.nbytes,
        "accuracy_before": before.get("accuracy"), "accuracy_after": after.get("accuracy"),
        "params_sha256": hashlib.sha256(fm.join(final)).hexdigest(),
        "model_hash": fm.model_hash,
    }
    if centralized:
        c = fit_model(fm.graph, fm.spec, {"x": x, "y": t}, None if ev is None else
                      {"x": ev[0], "y": ev[1]}, epochs=rounds * local_epochs,
                      engine=engine if engine in ("golden", "host") else "golden", seed=seed)
        summary["accuracy_centralized"] = c["accuracy_after"]
        log(f"centralized fine-tune, same samples, {rounds * local_epochs} epochs: "
            f"{_pct(c['accuracy_after'])}")
    summary["seconds"] = time.perf_counter() - t0
    return FleetResult(summary, fm.graph, fm.state(final))


def parse_fault(text: str) -> tuple[tuple[int, int], str]:
    """``WHAT@CLIENT:ROUND`` (``--fault``): rehearse a fleet's failures."""
    what, _, where = text.partition("@")
    client, _, rnd = where.partition(":")
    try:
        return (int(client), int(rnd)), what
    except ValueError:
        raise PockError(f"--fault {text!r}: expected WHAT@CLIENT:ROUND with WHAT one of "
                        f"{', '.join(FAULTS)}") from None


def _serve(setup: ClientSetup, clients: int, rounds: int, local_epochs: int, seed: int,
           timeout: float, runtime: str, jobs: int, reports: dict[int, list[ClientReport]],
           history: list[dict[str, Any]], accuracy: Callable, log: Callable[[str], None],
           server_lr: Fraction, server_momentum: Fraction) -> list[np.ndarray]:
    fm = setup.fm
    node_clients: dict[int, int] = {}
    result: dict[str, Any] = {}
    t_round = [time.perf_counter()]

    def evaluate_fn(server_round: int, arrays: Any) -> Any:
        if server_round == 0:
            return None
        vals = [np.asarray(a) for a in arrays.to_numpy_ndarrays()]
        acc = accuracy(vals).get("accuracy")
        now = time.perf_counter()
        history.append({"round": server_round, "accuracy": acc,
                        "seconds": now - t_round[0]})
        t_round[0] = now
        rep = reports.get(server_round, [])
        ok = sum(r.status == "ok" for r in rep)
        log(f"round {server_round}: {ok}/{len(rep)} updates, accuracy {_pct(acc)}, "
            f"{sum(r.bytes_up for r in rep):,} B up, {sum(r.bytes_down for r in rep):,} B "
            f"down")
        return MetricRecord({"accuracy": float(acc) if acc is not None else -1.0})

    initial = ArrayRecord()
    for e, a in zip(fm.layout.entries, fm.initial):
        initial[e.name] = _array(a)
    config = ConfigRecord({"model-hash": fm.model_hash, "local-epochs": local_epochs,
                           "seed": seed})

    def main(grid: Any, context: Any) -> None:
        strategy = FleetAvg(fm, clients, reports, node_clients, log, server_lr,
                            server_momentum)
        strategy.start(grid=grid, initial_arrays=initial, num_rounds=rounds,
                             timeout=timeout, train_config=config, evaluate_fn=evaluate_fn)
        result["arrays"] = strategy.global_arrays

    _quiet_flower()
    if runtime == "local":
        lg = LocalGrid(make_client_app(setup), clients,
                       max_workers=clients if setup.engines else max(1, jobs))
        node_clients.update(lg.nodes)
        try:
            main(lg, None)
        finally:
            lg.close()
    else:
        with _ray_leaves_no_trace():
            from flwr.simulation import run_simulation

            server = ServerApp()
            server.main()(main)
            run_simulation(server, make_client_app(setup), num_supernodes=clients,
                           backend_config={"client_resources": {"num_cpus": 1},
                                           "init_args": {"num_cpus": max(1, jobs),
                                                         "logging_level": "ERROR",
                                                         "log_to_driver": False}})
        if "arrays" not in result:
            raise PockError("Flower's simulation ended without a result (see its log above)")
    return result["arrays"]


def _fraction(v: Any, what: str, zero: bool = False) -> Fraction:
    """An exact rational from a number or 'a/b' (the server's arithmetic stays integer)."""
    try:
        f = Fraction(str(v)).limit_denominator(1 << 16)
    except (ValueError, ZeroDivisionError):
        raise PockError(f"{what} {v!r}: expected a number like 1, 0.9 or 8/3") from None
    if zero:
        if not 0 <= f < 1:
            raise PockError(f"{what} {v}: must lie in [0, 1)")
    elif not 0 < f <= 1024:
        raise PockError(f"{what} {v}: must lie in (0, 1024]")
    return f


def _device_board(name: str) -> str:
    """The device board an ``--engine`` names (PockError naming the choices otherwise)."""
    try:
        b = load_board(name)
    except PockError:
        b = None
    if b is None or b.arch == "host":
        names = [x.name for x in list_boards() if x.arch != "host"]
        raise PockError(f"fleet engine {name!r}: choose golden, host or a board "
                        f"({', '.join(names)})")
    return name


@contextmanager
def _ray_leaves_no_trace() -> Iterator[None]:
    """Flower's simulation engine starts Ray, which rewrites this process's environment
    (PYTHONPATH, PYTHONBREAKPOINT, RAY_* ...) and ``sys.path`` and keeps running: stop it and
    put both back, so that programs this process starts later (a compiler, pip) see the
    environment they were given."""
    env, path = dict(os.environ), list(sys.path)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")   # no GPUs here
    try:
        yield
    finally:
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        finally:
            os.environ.clear()
            os.environ.update(env)
            sys.path[:] = path


def _quiet_flower() -> None:
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2%}"


__all__ = ["Engine", "FleetModel", "FleetResult", "Layout", "UpdateRejected", "aggregate",
           "check_update", "client_seed", "delta_crc", "encode_delta", "partition",
           "run_fleet"]
