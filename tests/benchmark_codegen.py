"""Code-generation benchmark: memory plan and host training speed per model and spec.

Prints, per model and training spec: the multiply-accumulates of a step (int8 forward, fp32
backward), the schedule's lower bound, the planned arena, the parameter pool, the constant
pool, compile time (training graph + schedule + plan + render), and host steps/second of the
generated C (`fit --engine host`: the host board's chain, the native backend before ref; with
--ref also the portable ref kernels alone) next to PyTorch eager CPU training the same float
model with the same trainable set (batch 1, SGD, one thread), and their ratio (issue 11's
target: 10x).

    python -m tests.benchmark_codegen [--steps 1000] [--models digits,kws,vww] [--ref]

Each speed is the median of --repeat runs (default 3): wall-clock time on a shared machine
varies from run to run. Wall-clock numbers belong here, never in tests;
tests/test_benchmarks.py runs a tiny budget.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
SPEC = "bias:all+weight:last2,opt=sgd,lr=0.001"


def _models() -> dict[str, tuple[str, object]]:
    import codegen.models as bundled

    return {"digits": ("digits CNN (ONNX, PTQ)", bundled.path("digits_cnn.onnx")),
            "kws": ("KWS DS-CNN", MODELS / "kws_ref_model.tflite"),
            "ic": ("IC ResNet-8", MODELS / "pretrainedResnet_quant.tflite"),
            "vww": ("VWW MobileNet-0.25", MODELS / "vww_96_int8.tflite"),
            "ad": ("AD autoencoder", MODELS / "ad01_int8.tflite")}


def _graph(path):
    import codegen.models as bundled
    from codegen.fit import prepare_model

    calib = bundled.digits("train")[0][:100] if str(path).endswith(".onnx") else None
    return prepare_model(path, calib, None)


def _data(graph, n: int, rng):
    t = graph.tensors[graph.inputs[0]]
    x = rng.integers(-128, 128, size=(n, *t.shape[1:]), dtype=np.int8)
    out = graph.tensors[graph.outputs[0]]
    if out.shape[-1] >= 2 and len(out.shape) == 2 and out.shape[-1] < 100:
        return x, rng.integers(0, out.shape[-1], size=n)
    return x, x.reshape(n, *out.shape[1:])          # autoencoder: reconstruct the input


def _median_rate(run, steps: int, repeat: int) -> float:
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        rates.append(steps / (time.perf_counter() - t0))
    return float(np.median(rates))


def measure(key: str, spec: str, steps: int, work: Path, repeat: int = 1,
            ref: bool = False) -> dict:
    import torch

    from codegen.memplan import plan_memory
    from codegen.pipeline import compile_model
    from codegen.run.host import run_host_fit
    from codegen.toolchain.host import build_project
    from codegen.train import build_training_graph
    from codegen.train.spec import load_spec
    from tests.torch_mirror import TorchMirror, deq

    _, path = _models()[key]
    graph = _graph(path)
    s = load_spec(spec if key != "ad" else spec + ",loss=mse")
    t0 = time.perf_counter()
    tg = build_training_graph(graph, s)
    plan = plan_memory(tg)
    proj = compile_model(graph, board="host", spec=s, out_dir=work / key, force=True)
    t_compile = time.perf_counter() - t0
    built = build_project(proj.dir if hasattr(proj, "dir") else work / key)
    rng = np.random.default_rng(0)
    x, y = _data(graph, min(steps, 64), rng)
    order = np.resize(np.arange(len(x)), steps)[None]
    host_sps = _median_rate(lambda: run_host_fit(built, x, y, order=order, epochs=1), steps,
                            repeat)
    ref_sps = None
    if ref:
        proj_ref = compile_model(graph, board="host", spec=s, out_dir=work / f"{key}_ref",
                                 force=True, backend="ref")
        built_ref = build_project(work / f"{key}_ref")
        ref_steps = max(1, steps // 10)
        ref_order = order[:, :ref_steps]
        ref_sps = _median_rate(lambda: run_host_fit(built_ref, x, y, order=ref_order,
                                                    epochs=1), ref_steps, 1)
        del proj_ref

    trainable = {p["tensor"] if isinstance(p, dict) else p
                 for p in tg.metadata["training"]["parameters"]}
    mirror = TorchMirror(graph, trainable)
    params = [p for p in mirror.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1e-3)
    xin = graph.tensors[graph.inputs[0]]
    xf = torch.tensor(deq(xin, x), dtype=torch.float32)
    yt = torch.tensor(y)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def torch_steps() -> None:
        for i in order[0]:
            opt.zero_grad()
            out = mirror(xf[i:i + 1])
            if s.loss == "mse":
                loss = torch.nn.functional.mse_loss(out, xf[i:i + 1].reshape(out.shape))
            else:
                loss = torch.nn.functional.cross_entropy(out.reshape(1, -1), yt[i:i + 1])
            loss.backward()
            opt.step()

    torch_sps = _median_rate(torch_steps, steps, repeat)
    torch.set_num_threads(threads)
    j = plan.to_json()
    from tests.mcunet import backward_macs, forward_macs
    return {"model": key, "spec": spec, "fwd_macs": forward_macs(graph),
            "bwd_macs": backward_macs(tg)["total"], "lower_bound": j["lower_bound_bytes"],
            "arena": j["peak_bytes"], "params": plan.params_bytes,
            "constants": plan.constant_bytes, "compile_s": t_compile,
            "host_steps_s": host_sps, "ref_steps_s": ref_sps, "torch_steps_s": torch_sps,
            "host_over_torch": host_sps / torch_sps}


def run(keys: list[str], steps: int, work: Path, log=print, repeat: int = 1,
        ref: bool = False) -> list[dict]:
    rows = []
    log(f"spec: {SPEC} (MSE for the autoencoder); {steps} steps, batch 1, median of {repeat}; "
        "PyTorch eager CPU, 1 thread; host C: native, ref (the host board's chain); MACs per "
        "step: int8 forward, fp32 backward (input and weight gradients)")
    log(f"{'model':8} {'fwd MACs':>9} {'bwd MACs':>9} {'lower bound':>12} {'arena':>10} "
        f"{'params':>9} {'constants':>10} {'compile':>8} {'host C':>10} "
        + (f"{'ref only':>10} " if ref else "") + f"{'PyTorch':>10} {'host/PyTorch':>13}")
    for key in keys:
        r = measure(key, SPEC, steps, work, repeat, ref)
        rows.append(r)
        ref_col = f"{r['ref_steps_s']:>8.0f}/s " if ref else ""
        log(f"{key:8} {r['fwd_macs'] / 1e6:>8.2f}M {r['bwd_macs'] / 1e6:>8.2f}M "
            f"{r['lower_bound']:>12,} {r['arena']:>10,} {r['params']:>9,} "
            f"{r['constants']:>10,} {r['compile_s']:>7.2f}s {r['host_steps_s']:>8.0f}/s "
            f"{ref_col}{r['torch_steps_s']:>8.0f}/s {r['host_over_torch']:>12.1f}x")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--models", default="digits,kws,ic,vww,ad")
    ap.add_argument("--repeat", type=int, default=3, help="runs per speed (median)")
    ap.add_argument("--ref", action="store_true",
                    help="also the portable ref kernels alone (a tenth of the steps)")
    args = ap.parse_args(argv)
    keys = [k for k in args.models.split(",") if k]
    missing = [k for k in keys if not Path(_models()[k][1]).is_file()]
    if missing:
        print(f"skipping {', '.join(missing)}: models not found in {MODELS}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as d:
        run([k for k in keys if k not in missing], args.steps, Path(d), repeat=args.repeat,
            ref=args.ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
