"""Update kernels: sgd_update (momentum, QAS, master weights, channel subsets, accumulation),
adam_update (fp32), step_counter (step, schedules, Adam's running powers).

Update kernels are pure: they take the current values of the op's slots and return the new
values of the slots they write (``dict`` slot name -> array); the executor stores them.
Slots are those of ``ops.UPDATE_INPUTS``: param, grad, qas, grad_exp, qas_shift, buf1, buf2,
pows, master, lr, accum, step, saturated.

Saturation: an int8 parameter (weight) is kept in [-127, 127]; an int32 parameter (bias) in
[-L, L] with L = ``forward_bias_limit`` of its layer (op attr ``bias_limit``: the forward
int32 accumulator ``sum w*(x - zp) + bias`` can then never overflow, whatever the trained
weights), or [INT32_MIN, INT32_MAX] without one. Every clamp saturates, nothing wraps. The ``saturated`` slot (int32
``(1,)``, optional) counts the **saturated updates** of its parameter: each trained entry whose
update in a step clamped a value (the parameter, a master copy, an int8-mode step or momentum
buffer) or met a NaN, counted once per entry and step; the count itself saturates at
INT32_MAX. Each kernel's docstring lists its saturation conditions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import numerics as nx
from . import train_numerics as tn

F32 = np.float32


@dataclass(frozen=True)
class Channels:
    """The trained channels of a parameter: indices on ``axis`` (None = all)."""

    channels: tuple[int, ...] | None
    axis: int

    def index(self, ndim: int) -> tuple:
        if self.channels is None:
            return (slice(None),) * ndim
        idx: list = [slice(None)] * ndim
        idx[self.axis] = np.asarray(self.channels, dtype=np.int64)
        return tuple(idx)

    def per_channel(self, v: np.ndarray, ndim: int) -> np.ndarray:
        """A (k,) per-channel vector shaped to broadcast along ``axis`` of an ndim array."""
        shape = [1] * ndim
        shape[self.axis] = -1
        return np.asarray(v).reshape(shape)


ROW_SLOTS = ("qas", "qas_shift", "buf1", "buf2", "master", "accum")   # per trained channel


def update_block(channels: tuple[int, ...] | None, rows) -> tuple[int, ...] | None:
    """The parameter channels an update op writes: its trained ``channels`` (None: all), or
    rows [j0, j1) of them for an op of a blocked update (attr ``rows``)."""
    if rows is None:
        return channels
    j0, j1 = (int(r) for r in rows)
    return tuple(range(j0, j1)) if channels is None else tuple(channels[j0:j1])


def param_limits(dtype, bias_limit: int | None = None) -> tuple[int, int]:
    """Saturation bounds of a parameter: int8 weights [-127, 127]; int32 biases
    [-bias_limit, bias_limit] (the update op's ``bias_limit``), else the int32 range."""
    if np.dtype(dtype) == np.int8:
        return -127, 127
    if np.dtype(dtype) == np.int32:
        if bias_limit is None:
            return nx.INT32_MIN, nx.INT32_MAX
        if not 0 <= int(bias_limit) <= nx.INT32_MAX:
            raise ValueError(f"bias_limit {bias_limit} outside [0, 2**31 - 1]")
        return -int(bias_limit), int(bias_limit)
    raise ValueError(f"parameters are int8 or int32, got {dtype}")


def forward_bias_limit(taps: int, input_zero_point: int) -> int | None:
    """The largest |bias| of a conv / depthwise / FC layer with ``taps`` int8 products per
    output (kh*kw*cin/groups, kh*kw, cin) for which the forward int32 accumulator
    ``sum w*(x - zp) + bias`` cannot overflow with any int8 weights in [-127, 127] and any
    input: ``INT32_MAX - taps * 127 * max|x - zp|`` (max|x - zp| = max(127 - zp, zp + 128)).
    None when the products alone can overflow (no bias bound helps; the int32 range applies)."""
    bound = int(taps) * 127 * max(127 - int(input_zero_point), int(input_zero_point) + 128)
    return nx.INT32_MAX - bound if bound < nx.INT32_MAX else None


def count_saturated(counter: np.ndarray | None, saturated: np.ndarray) -> dict:
    """The new ``saturated`` slot value: ``sat32(counter + number of True entries)`` (C: an
    int32 count per call, added to the counter with saturation), or nothing without a slot."""
    if counter is None:
        return {}
    total = int(np.asarray(counter, np.int64).reshape(-1)[0]) + int(np.count_nonzero(saturated))
    return {"saturated": np.array([min(total, nx.INT32_MAX)], np.int32)}


def _write(param: np.ndarray, ch: Channels, values: np.ndarray) -> np.ndarray:
    out = np.array(param, copy=True)
    out[ch.index(param.ndim)] = values.astype(param.dtype)
    return out


def _accumulate(grad: np.ndarray, accum: np.ndarray | None, step: np.ndarray | None,
                k: int) -> tuple[np.ndarray | None, dict]:
    """Gradient accumulation: (the gradient to apply or None, new accum values)."""
    if k <= 1:
        return grad, {}
    assert accum is not None and step is not None
    t = int(np.asarray(step).reshape(-1)[0])
    total = np.asarray(accum, np.float32) + np.asarray(grad, np.float32)
    if (t + 1) % k != 0:
        return None, {"accum": total}
    return total, {"accum": np.zeros_like(total)}


def _lr(lr_slot: np.ndarray | None, lr_attr: float) -> np.float32:
    return F32(np.asarray(lr_slot, np.float32).reshape(-1)[0]) if lr_slot is not None \
        else F32(lr_attr)


def round_step_i64(u: np.ndarray) -> np.ndarray:
    """An fp32 update of an int32 bias as an integer step: ``round_half_away(u)`` clamped to
    [-2**32, 2**32], NaN -> 0, as int64. C::

        float r = roundf(u);
        int64_t n = r >= 4294967296.0f ? 4294967296LL : r <= -4294967296.0f ? -4294967296LL
                  : r == r ? (int64_t)r : 0;
    """
    with np.errstate(invalid="ignore"):                  # inf - inf inside round_half_away
        r = nx.round_half_away(np.asarray(u, np.float32)).astype(np.float64)
    r = np.where(np.isnan(r), 0.0, np.clip(r, -(2.0 ** 32), 2.0 ** 32))
    return r.astype(np.int64)


def _apply_fp32(param: np.ndarray, u: np.ndarray, ch: Channels, master: np.ndarray | None,
                counter: np.ndarray | None, bias_limit: int | None) -> dict:
    """The last step of an fp32 update (and its saturation count, see sgd_update_f32)."""
    lo, hi = param_limits(param.dtype, bias_limit)
    out: dict = {}
    if master is not None:
        master = np.asarray(master, np.float32) - u
        out["master"] = master
        new = tn.round_sat_f32(master, lo, hi)
        sat = tn.round_saturates(master, lo, hi)
    elif np.dtype(param.dtype) == np.int32:
        # int32 bias: integer difference (float32(b) is inexact for |b| > 2**24)
        p = param[ch.index(param.ndim)].astype(np.int64)
        v = p - round_step_i64(u)
        new = np.clip(v, lo, hi)
        sat = np.isnan(np.asarray(u, np.float32)) | (v < lo) | (v > hi)
    else:
        p = param[ch.index(param.ndim)].astype(np.float32)
        new = tn.round_sat_f32(p - u, lo, hi)
        sat = tn.round_saturates(p - u, lo, hi)
    out["param"] = _write(param, ch, new)
    out.update(count_saturated(counter, sat))
    return out


def sgd_update_f32(param: np.ndarray, grad: np.ndarray, qas: np.ndarray, ch: Channels, *,
                   lr: float, momentum: float = 0.0, lr_t: np.ndarray | None = None,
                   buf: np.ndarray | None = None, master: np.ndarray | None = None,
                   accum: np.ndarray | None = None, step: np.ndarray | None = None,
                   accumulate: int = 1, saturated: np.ndarray | None = None,
                   bias_limit: int | None = None) -> dict:
    """fp32 SGD (all float32, one rounding per operation)::

        [accumulate k > 1: if (step+1) % k != 0: accum += grad, stop;
                           else g = accum + grad, accum = 0]
        lr_t = lr slot if present, else float32(attr lr)
        momentum > 0: buf = float32(momentum) * buf + g      else buf = g
        u = (lr_t * buf) * qas[c]                             (qas per trained channel)
        no master, int8 weight: w_q = sat(round_half_away(float32(w_q) - u))   (NaN -> 0)
        no master, int32 bias:  b_q = sat32(b_q - round_step_i64(u))  (int64 difference;
                                round_step_i64: round_half_away, clamp +-2**32, NaN -> 0)
        master:    master = master - u; p_q = sat(round_half_away(master))     (NaN -> 0)

    ``sat``/``sat32`` clamp to ``param_limits(dtype, bias_limit)``.

    The bias uses an integer difference because float32(b_q) is inexact beyond 2**24 (an
    update of 0 would move such a bias by its float32 rounding error). A float32 master of a
    bias beyond 2**24 is inherently that coarse (its resolution is the float32 spacing).

    Saturated entries (counted into the ``saturated`` slot when given, see the module
    docstring): int8 weight or master: the rounded value (``round_half_away(x)``, x =
    float32(w_q) - u or the new master) is NaN or outside the parameter's range
    (``train_numerics.round_saturates``); int32 bias without master: u is NaN or the int64
    difference ``b_q - round_step_i64(u)`` is outside int32. An accumulating step (no update)
    counts nothing.

    Returns the new values of the written slots (param, buf1, master, accum, saturated).
    """
    g, out = _accumulate(grad, accum, step, accumulate)
    if g is None:
        return out
    g = np.asarray(g, np.float32)
    if momentum > 0:
        assert buf is not None
        g = F32(momentum) * np.asarray(buf, np.float32) + g
        out["buf1"] = g
    u = (_lr(lr_t, lr) * g) * ch.per_channel(np.asarray(qas, np.float32), g.ndim)
    out.update(_apply_fp32(param, u, ch, master, saturated, bias_limit))
    return out


def adam_update_f32(param: np.ndarray, grad: np.ndarray, qas: np.ndarray, ch: Channels, *,
                    lr: float, beta1: float, beta2: float, eps: float, m: np.ndarray,
                    v: np.ndarray, pows: np.ndarray, lr_t: np.ndarray | None = None,
                    master: np.ndarray | None = None, accum: np.ndarray | None = None,
                    step: np.ndarray | None = None, accumulate: int = 1,
                    saturated: np.ndarray | None = None, bias_limit: int | None = None) -> dict:
    """fp32 Adam (b1 = float32(beta1), b2 = float32(beta2), eps = float32(eps); every
    ``1 - x`` is the float32 subtraction ``1.0f - x``)::

        [accumulation as sgd_update_f32]
        m = b1 * m + (1.0f - b1) * g
        v = b2 * v + (1.0f - b2) * (g * g)
        b1t = pows[0] * b1;  b2t = pows[1] * b2
        mh = m / (1.0f - b1t);  vh = v / (1.0f - b2t)
        u = ((lr_t * mh) / (sqrtf(vh) + eps)) * qas[c]
        then as SGD (master or round/saturate; saturated entries as SGD's).

    Returns the new param, buf1 (m), buf2 (v) and, if used, master, accum and saturated.
    """
    g, out = _accumulate(grad, accum, step, accumulate)
    if g is None:
        return out
    g = np.asarray(g, np.float32)
    b1, b2, one = F32(beta1), F32(beta2), F32(1.0)
    m = b1 * np.asarray(m, np.float32) + (one - b1) * g
    v = b2 * np.asarray(v, np.float32) + (one - b2) * (g * g)
    pw = np.asarray(pows, np.float32).reshape(-1)
    b1t, b2t = pw[0] * b1, pw[1] * b2
    mh = m / (one - b1t)
    vh = v / (one - b2t)
    u = ((_lr(lr_t, lr) * mh) / (np.sqrt(vh) + F32(eps))) \
        * ch.per_channel(np.asarray(qas, np.float32), g.ndim)
    out.update({"buf1": m, "buf2": v})
    out.update(_apply_fp32(param, u, ch, master, saturated, bias_limit))
    return out


def momentum_q15(momentum: float) -> int:
    """mq = round_half_away(momentum * 2**15) (float64)."""
    return nx.round_half_away_int(float(momentum) * 32768.0)


MASTER_FRAC_BITS = 16        # F: fractional bits of the int32 master (master_weights: int32)
MOMENTUM_FRAC_BITS = 8       # fractional bits of the int8-mode momentum buffer without master
WEIGHT_MASTER_MAX = 127 << MASTER_FRAC_BITS


def master_init(data: np.ndarray, master_dtype: str, kind: str,
                channels: tuple[int, ...] | None, axis: int,
                frac_bits: int = MASTER_FRAC_BITS) -> np.ndarray:
    """The value of a parameter's master copy that follows the parameter ``data`` (in the
    gradient's shape: the trained ``channels`` gathered along ``axis``, all without them):

    - float32 master (``master_weights: fp32``): ``float32(p_q)`` of the trained entries;
    - int32 master of an int8 weight (``master_weights: int32``): ``w_q << frac_bits``;
    - int32 master of an int32 bias: its sub-quantum remainder, 0 (the bias itself does not
      fit int32 with ``frac_bits`` fractional bits; see :func:`sgd_update_i8`).

    The one formula for a master's initial value (training-graph builder), for the masters
    an import sets (``golden.training.import_params``) and for the C of ``<p>_params_import``
    (``render.records``, which emits these three rules)."""
    init = np.asarray(data) if channels is None else np.take(data, list(channels), axis=axis)
    if np.dtype(master_dtype) == np.float32:
        return init.astype(np.float32)
    if np.dtype(master_dtype) != np.int32:
        raise ValueError(f"master dtype {master_dtype} (expected float32 or int32)")
    if kind == "weight":
        return (np.asarray(init, np.int64) << int(frac_bits)).astype(np.int32)
    return np.zeros(np.shape(init), np.int32)


def sgd_update_i8(param: np.ndarray, grad: np.ndarray, grad_exp: int, qas: np.ndarray,
                  qas_shift: np.ndarray, ch: Channels, *, momentum: float = 0.0,
                  buf: np.ndarray | None = None, master: np.ndarray | None = None,
                  frac_bits: int = MASTER_FRAC_BITS, saturated: np.ndarray | None = None,
                  bias_limit: int | None = None) -> dict:
    """int8-mode SGD on an int32 gradient accumulator ``acc`` at exponent ``e`` (integer
    only; every quantity is an int32, products and differences marked 64-bit are int64)::

        (M_c, k_c) = (qas[c], qas_shift[c])     # quantize_multiplier of lr*s_x/s_w[c]
                                                # (weights) or lr/(s_x*s_w[c]) (biases)
        G = master ? F : (momentum ? 8 : 0)     # fractional bits of the step; F = frac_bits
                                                # (attr master_frac_bits, 16)
        d = mbqm_sat(acc, M_c, k_c + e + G)     # the step in units of 2**-G parameter quanta
        momentum > 0:
            mq = round_half_away(momentum * 2**15)
            buf = sat32(rounding_divide_by_pot(mq * buf, 15) + d)     (64-bit product, sum)
            s = buf                             # buf holds the step, 2**-G quanta
        else:
            s = d
        no master:
            p = sat(p - (momentum ? rounding_divide_by_pot(s, 8) : s))    (64-bit difference)
        master, int8 weight (master = the trained entries of w in 2**-F quanta, starts w << F):
            master = clamp(master - s, -(127 << F), 127 << F)             (64-bit difference)
            w = clamp(rounding_divide_by_pot(master, F), -127, 127)
        master, int32 bias (master = the sub-quantum remainder r in 2**-F quanta, starts 0,
                            |r| <= 2**(F-1); b + r * 2**-F is the exact bias):
            t = sat32(master - s)                                         (64-bit difference)
            n = rounding_divide_by_pot(t, F)
            master = t - (n << F)
            b = sat32(b + n)                                              (64-bit sum)

    ``mbqm_sat`` (train_numerics.mul_by_multiplier_sat) is TFLM's
    MultiplyByQuantizedMultiplier with a *saturating* left shift and a right shift of 32 or
    more giving 0 (exact rounding of any int32); ``sat`` saturates to the parameter's range
    ([-127, 127] for int8 weights, int32 for biases). Only the trained channels are read and
    written (``ch``); buf and master have the gradient's shape; ``sat`` of the parameter is
    ``param_limits(dtype, bias_limit)``. The master's clamp keeps a
    weight's latent value inside what the int8 weight can represent (no int32 overflow:
    127 << 16 < 2**23). A step of 2**(31-G) quanta or more saturates (d, buf and t are
    int32). The momentum decay rounds to nearest, so |buf| <= 4 is a fixed point when d = 0
    (a drift of at most 4 * 2**-G quanta per step).

    Saturated entries (counted into the ``saturated`` slot when given): the left shift of
    ``mbqm_sat`` clips (``train_numerics.shl_saturates``), or the momentum sum, the parameter
    difference/sum, the master difference (weights: beyond +-(127 << F); biases: ``t``
    beyond int32) falls outside its range before the clamp. Returns the new param and, when
    present, buf1, master and saturated.
    """
    acc = np.asarray(grad, np.int64)
    e = int(np.asarray(grad_exp).reshape(-1)[0])
    mult = ch.per_channel(np.asarray(qas, np.int64), acc.ndim)
    lo, hi = param_limits(param.dtype, bias_limit)
    f = int(frac_bits)
    g_bits = f if master is not None else MOMENTUM_FRAC_BITS if momentum > 0 else 0
    shift = ch.per_channel(np.asarray(qas_shift, np.int64), acc.ndim) + e + g_bits
    p = param[ch.index(param.ndim)].astype(np.int64)
    out: dict = {}
    step = tn.mul_by_multiplier_sat(acc, mult, shift)
    sat = tn.shl_saturates(acc, shift)

    def clip(v: np.ndarray, v_lo: int, v_hi: int) -> np.ndarray:
        nonlocal sat
        sat = sat | (v < v_lo) | (v > v_hi)
        return np.clip(v, v_lo, v_hi)

    if momentum > 0:
        assert buf is not None
        mq = momentum_q15(momentum)
        b = nx.rounding_divide_by_pot(mq * np.asarray(buf, np.int64), 15) + step
        step = clip(b, nx.INT32_MIN, nx.INT32_MAX)
        out["buf1"] = step.astype(np.int32)
    if master is None:
        if momentum > 0:
            step = nx.rounding_divide_by_pot(step, MOMENTUM_FRAC_BITS)
        new = clip(p - step, lo, hi)
    elif np.dtype(param.dtype) == np.int8:
        m = clip(np.asarray(master, np.int64) - step, -(127 << f), 127 << f)
        out["master"] = m.astype(np.int32)
        new = np.clip(nx.rounding_divide_by_pot(m, f), lo, hi)   # never clips: |m| <= 127 << F
    else:
        t = clip(np.asarray(master, np.int64) - step, nx.INT32_MIN, nx.INT32_MAX)
        n = nx.rounding_divide_by_pot(t, f)
        out["master"] = (t - (n << f)).astype(np.int32)
        new = clip(p + n, lo, hi)
    out["param"] = _write(param, ch, new)
    out.update(count_saturated(saturated, sat))
    return out


# float32 cos(pi * p) for the cosine schedule: pi and the Taylor coefficients of
# (cos(x) - 1) / x^2 = -1/2! + x^2/4! - ... + x^10/12! on [0, pi/2] (truncation < 7e-9), each
# written as the shortest decimal of its float32 (the C kernel uses the same literals).
COS_PI = F32(3.1415927)
COS_COEFFS = (F32(-0.5), F32(4.1666668e-02), F32(-1.3888889e-03), F32(2.4801588e-05),
              F32(-2.755732e-07), F32(2.0876756e-09))


def cosine_halves(k: int, n: int) -> tuple[np.float32, np.float32]:
    """``((1 + cos(pi p)) / 2, (1 - cos(pi p)) / 2)`` for p = k / n (integers, 0 <= k <= n,
    n >= 1), with float32 +, -, * and one division, in this order (pe_step_counter_f32.c does
    the same)::

        r = k > n - k                     # reflect: cos(pi p) = -cos(pi (1 - p))
        q = float32(r ? n - k : k) / float32(n)               # q in [0, 0.5]
        x = COS_PI * q;  z = x * x
        t = z * (c0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * c5)))))   # cos(x) - 1
        a = 0.5 * (2 + t);  b = 0.5 * (-t)                    # (1 + cos x)/2, (1 - cos x)/2
        return (b, a) if r else (a, b)

    Reflecting the integers (not p) and keeping ``t = cos(x) - 1`` instead of adding the 1
    give both halves full relative precision, also where one of them is tiny (the decay's
    start and end): within 4e-7 of their float64 values.
    """
    k, n = int(k), int(n)
    reflect = k > n - k
    q = F32(n - k if reflect else k) / F32(n)
    x = COS_PI * q
    z = x * x
    c0, c1, c2, c3, c4, c5 = COS_COEFFS
    t = z * (c0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * c5)))))
    a = F32(0.5) * (F32(2) + t)
    b = F32(0.5) * (-t)
    return (b, a) if reflect else (a, b)


def warmup_lr(u: int, lr: float, warmup_steps: int) -> np.float32:
    """Schedule ``warmup``: ``(float32(lr) * float32(min(u + 1, W))) / float32(W)``
    (W < 1 is taken as 1), u = updates done."""
    w = max(int(warmup_steps), 1)
    return (F32(lr) * F32(min(u + 1, w))) / F32(w)


def cosine_lr(u: int, lr: float, total_steps: int, warmup_steps: int = 0,
              min_lr: float = 0.0) -> np.float32:
    """Schedule ``cosine``: the lr of the next update after u updates, float32 throughout::

        u < W:  (lr * float32(u + 1)) / float32(W)                 (the warmup formula)
        else:   T' = max(T - W, 1);  k = min(u - W, T')            # p = k / T'
                (a, b) = cosine_halves(k, T')     # ((1 + cos(pi p))/2, (1 - cos(pi p))/2)
                lr * a + min_lr * b

    i.e. ``min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2``; lr exactly at u = W, min_lr exactly
    from u = T on. W < 0 is taken as 0.
    """
    w = max(int(warmup_steps), 0)
    if u < w:
        return warmup_lr(u, lr, w)
    tp = max(int(total_steps) - w, 1)
    a, b = cosine_halves(min(u - w, tp), tp)
    return F32(lr) * a + F32(min_lr) * b


def step_counter(step: np.ndarray, lr_t: np.ndarray | None, pows: np.ndarray | None, *,
                 accumulate: int = 1, schedule: str = "constant", lr: float = 0.0,
                 gamma: float = 1.0, step_size: int = 1, warmup_steps: int = 0,
                 total_steps: int = 1, min_lr: float = 0.0, beta1: float = 0.9,
                 beta2: float = 0.999) -> dict:
    """The last op of a training step (t = step before the op)::

        apply = (t + 1) % accumulate == 0
        if apply:
            pows = (pows[0] * b1, pows[1] * b2)           (float32, if present)
            u = (t + 1) / accumulate                      # updates done now
            step:   if u % step_size == 0: lr_t = lr_t * float32(gamma)
            warmup: lr_t = (float32(lr) * float32(min(u + 1, W))) / float32(W)
            cosine: lr_t = cosine_lr(u, lr, T, W, min_lr)
        step = t + 1

    Returns the new values of "step", "lr" and "pows" (those given).
    """
    t = int(np.asarray(step).reshape(-1)[0])
    out: dict = {"step": np.array([t + 1], dtype=np.int32)}
    k = max(1, int(accumulate))
    if (t + 1) % k != 0:
        return out
    if pows is not None:
        pw = np.asarray(pows, np.float32).reshape(-1)
        out["pows"] = np.array([pw[0] * F32(beta1), pw[1] * F32(beta2)], dtype=np.float32)
    u = (t + 1) // k
    if lr_t is not None:
        cur = np.asarray(lr_t, np.float32).reshape(-1)
        if schedule == "step":
            if step_size > 0 and u % int(step_size) == 0:
                cur = cur * F32(gamma)
            out["lr"] = cur.astype(np.float32)
        elif schedule == "warmup":
            out["lr"] = np.array([warmup_lr(u, lr, warmup_steps)], dtype=np.float32)
        elif schedule == "cosine":
            out["lr"] = np.array([cosine_lr(u, lr, total_steps, warmup_steps, min_lr)],
                                 dtype=np.float32)
    return out
