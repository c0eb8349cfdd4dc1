"""Transfer benchmark: fine-tune the digits CNN on a shifted domain, pockengine vs PyTorch.

The source model is the bundled, pretrained digits CNN (``codegen/models/digits_cnn.onnx``, with
its own train/test split in ``digits.npz``): a file, not a model retrained on this machine, so
everything pockengine computes from it is the same on every CPU. It meets a shifted domain
(inverted intensities and a one-pixel shift). Trainable set: all biases + the last two layers'
weights, SGD with momentum, one sample per step, the same sample order everywhere (``seed``
chooses it); pockengine keeps master copies of the trainable weights (float32 in fp32 mode, int32
fixed point in int8 mode). Reported per seed: no fine-tuning, PyTorch float fine-tuning,
`pockengine fit --engine golden` in fp32 and int8 backward modes.

    python -m tests.transfer [--seeds 3] [--epochs 6] [--train-samples N] [--spread]

pockengine's numbers are exact (integer arithmetic and float32 in fixed summation orders): the
same on any machine. PyTorch's are not: its float kernels sum in CPU- and thread-dependent
orders, and batch-1 SGD amplifies the last-bit differences into accuracy points. ``--spread``
measures how far: it reruns the PyTorch fine-tune under perturbations of the kind another CPU
brings (1 and 2 threads, oneDNN on/off, float64) and prints the spread of the accuracy, from
which the acceptance test's margin is derived (tests/test_transfer.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

import codegen.models as bundled

SPEC = "bias:all+weight:last2"
LAYERS = ("conv1", "dw", "pw", "conv2", "fc")       # the parametric layers, in graph order


@dataclass(frozen=True)
class TransferConfig:
    lr: float = 0.0005
    momentum: float = 0.9
    epochs: int = 6
    train_samples: int | None = None    # None: the whole shifted training split
    calib_samples: int = 100
    torch_threads: int = 1              # PyTorch reference: intra-op threads
    torch_dtype: str = "float32"        # or float64
    torch_mkldnn: bool = True


def source_data():
    """(x_train, y_train, x_test, y_test) of the bundled split, NHWC float32 in [0, 1]."""
    x_tr, y_tr = bundled.digits("train")
    x_te, y_te = bundled.digits("test")
    return x_tr, y_tr, x_te, y_te


def torch_model(dtype: str = "float32"):
    """The bundled ONNX model as a PyTorch module (BatchNorm already folded into conv1)."""
    import onnx
    import torch
    from onnx import numpy_helper

    from tests.digits_cnn import build_cnn

    m = onnx.load(str(bundled.path("digits_cnn.onnx")))
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    params = [(init[n.input[1]], init[n.input[2]]) for n in m.graph.node
              if n.op_type in ("Conv", "Gemm")]
    net = build_cnn().eval()
    net.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1, bias=True)
    net.bn1 = torch.nn.Identity()
    with torch.no_grad():
        for name, (w, b) in zip(LAYERS, params, strict=True):
            layer = getattr(net, name)
            layer.weight.copy_(torch.from_numpy(w.copy()))
            layer.bias.copy_(torch.from_numpy(b.copy()))
    return net.to(getattr(torch, dtype))


def sample_order(n: int, epochs: int, seed: int) -> list[np.ndarray]:
    """The per-epoch sample order that every engine uses (same as `pockengine fit --seed`)."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(epochs)]


def nhwc_to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def torch_finetune(x: np.ndarray, y: np.ndarray, cfg: TransferConfig, seed: int):
    """Float fine-tuning with the same trainable set, hyper-parameters and sample order."""
    import torch

    m = torch_model(cfg.torch_dtype)
    for p in m.parameters():
        p.requires_grad_(False)
    params = [getattr(m, n).bias for n in LAYERS] + [m.conv2.weight, m.fc.weight]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    xt = torch.from_numpy(nhwc_to_nchw(x)).to(getattr(torch, cfg.torch_dtype))
    yt = torch.from_numpy(y)
    for order in sample_order(len(y), cfg.epochs, seed):
        for i in order:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xt[i:i + 1]), yt[i:i + 1])
            loss.backward()
            opt.step()
    return m


def torch_acc(model, x: np.ndarray, y: np.ndarray) -> float:
    import torch

    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        xt = torch.from_numpy(nhwc_to_nchw(x)).to(dtype)
        return float((model(xt).argmax(1).numpy() == y).mean())


def shifted(cfg: TransferConfig):
    x_tr, y_tr, x_te, y_te = source_data()
    n = cfg.train_samples or len(y_tr)
    return (bundled.shift_digits(x_tr[:n]), y_tr[:n], bundled.shift_digits(x_te), y_te,
            x_tr[:cfg.calib_samples])


def run_torch(cfg: TransferConfig, seed: int) -> float:
    """Accuracy of the PyTorch float fine-tune on the shifted test split."""
    import torch

    x, y, x_te, y_te, _ = shifted(cfg)
    threads, mkldnn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    torch.set_num_threads(cfg.torch_threads)
    torch.backends.mkldnn.enabled = cfg.torch_mkldnn
    try:
        return torch_acc(torch_finetune(x, y, cfg, seed), x_te, y_te)
    finally:
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = mkldnn


def run_pockengine(cfg: TransferConfig, seed: int, mode: str) -> dict[str, float]:
    """`fit --engine golden` in one backward mode: accuracy before and after."""
    from codegen.fit import fit_model

    x, y, x_te, y_te, calib = shifted(cfg)
    master = "fp32" if mode == "fp32" else "int32"
    spec = (f"{SPEC},opt=sgd,lr={cfg.lr},momentum={cfg.momentum},backward={mode},"
            f"master_weights={master}")
    r = fit_model(bundled.path("digits_cnn.onnx"), spec, {"x": x, "y": y},
                  {"x": x_te, "y": y_te}, epochs=cfg.epochs, engine="golden", calib=calib,
                  seed=seed)
    return {"no_finetune": r["accuracy_before"], mode: r["accuracy_after"],
            f"{mode}_sha256": r["params_sha256"]}


def run_seed(seed: int, cfg: TransferConfig) -> dict:
    res: dict = {"pytorch": run_torch(cfg, seed)}
    for mode in ("fp32", "int8"):
        res.update(run_pockengine(cfg, seed, mode))
    return res


def run(seeds: int, cfg: TransferConfig, log=print) -> list[dict]:
    rows = []
    log(f"transfer: bundled digits CNN -> inverted + shifted digits; trainable {SPEC}; SGD "
        f"lr={cfg.lr} momentum={cfg.momentum}; {cfg.epochs} epochs, batch 1; PyTorch "
        f"{cfg.torch_dtype}, {cfg.torch_threads} thread(s)")
    log(f"{'seed':>4} {'no-ft':>8} {'pytorch':>8} {'pe fp32':>8} {'pe int8':>8} {'time':>7}")
    for seed in range(seeds):
        t = time.perf_counter()
        r = run_seed(seed, cfg)
        rows.append(r)
        log(f"{seed:>4} {r['no_finetune']:8.2%} {r['pytorch']:8.2%} {r['fp32']:8.2%} "
            f"{r['int8']:8.2%} {time.perf_counter() - t:6.1f}s")
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("no_finetune", "pytorch", "fp32",
                                                               "int8")}
    log(f"{'mean':>4} {mean['no_finetune']:8.2%} {mean['pytorch']:8.2%} {mean['fp32']:8.2%} "
        f"{mean['int8']:8.2%}")
    return rows


# PyTorch set-ups that sum floats in other orders, as another CPU or BLAS build would.
PERTURBATIONS: tuple[tuple[str, dict], ...] = (
    ("float32, 1 thread", {}),
    ("float32, 2 threads", {"torch_threads": 2}),
    ("float32, oneDNN off", {"torch_mkldnn": False}),
    ("float64, 1 thread", {"torch_dtype": "float64"}),
)


def spread(seeds: int, cfg: TransferConfig, log=print) -> dict[str, float]:
    """PyTorch's accuracy under PERTURBATIONS, per seed: how far another machine may move it."""
    table = {name: [run_torch(replace(cfg, **kw), s) for s in range(seeds)]
             for name, kw in PERTURBATIONS}
    log(f"PyTorch fine-tune accuracy under float-order perturbations ({seeds} seeds)")
    log(f"{'set-up':>22} " + " ".join(f"{'seed ' + str(s):>8}" for s in range(seeds))
        + f" {'mean':>8}")
    for name, accs in table.items():
        log(f"{name:>22} " + " ".join(f"{a:8.2%}" for a in accs) + f" {np.mean(accs):8.2%}")
    acc = np.array(list(table.values()))           # (set-ups, seeds)
    out = {"per_seed_range": float((acc.max(0) - acc.min(0)).max()),
           "mean_range": float(np.ptp(acc.mean(1)))}
    log(f"largest per-seed range {out['per_seed_range']:.2%}, range of the "
        f"{seeds}-seed means {out['mean_range']:.2%}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=TransferConfig.epochs)
    ap.add_argument("--train-samples", type=int)
    ap.add_argument("--lr", type=float, default=TransferConfig.lr)
    ap.add_argument("--spread", action="store_true",
                    help="measure PyTorch's spread under float-order perturbations")
    args = ap.parse_args(argv)
    cfg = TransferConfig(lr=args.lr, epochs=args.epochs, train_samples=args.train_samples)
    run(args.seeds, cfg)
    if args.spread:
        spread(args.seeds, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
