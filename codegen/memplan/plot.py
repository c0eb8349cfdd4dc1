"""A picture of a memory plan: buffers as rectangles over time (steps) × address, one panel per
pool (arena, parameters, constant), with the live-bytes profile (the lower bound) over the arena.

``plot_plan(plan, "plan.svg")`` writes SVG by hand (no dependency); a ``.png`` path needs
matplotlib. The drawing is a list of primitives in pixel coordinates rendered by either
backend, so both show the same thing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..errors import PockError
from .plan import MemoryPlan

COLORS = {"input": "#4e79a7", "output": "#f28e2b", "activation": "#76b7b2",
          "gradient": "#e15759", "mask": "#b07aa1", "scratch": "#9c755f",
          "parameters": "#59a14f", "constant": "#bab0ac"}
WIDTH, LEFT, RIGHT, TOP = 1100, 150, 20, 46
ARENA_H, POOL_H, GAP = 420, 70, 48


@dataclass(frozen=True)
class _Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    tip: str = ""
    label: str = ""


@dataclass(frozen=True)
class _Text:
    x: float
    y: float
    text: str
    size: int = 12
    anchor: str = "start"     # start | middle | end
    bold: bool = False


@dataclass(frozen=True)
class _Line:
    points: tuple[tuple[float, float], ...]
    color: str = "#000000"
    dashed: bool = False


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _short(name: str) -> str:
    """A readable label: the first of ';'-joined TFLite names, its last two path parts."""
    return "/".join(name.split(";", 1)[0].split("/")[-2:])[:28]


def _primitives(plan: MemoryPlan) -> tuple[list, int]:
    s = plan.schedule
    steps = max(1, len(s.ops))
    plot_w = WIDTH - LEFT - RIGHT
    xs = plot_w / steps
    items: list = []
    title = (f"{plan.graph.name}: arena {_size(plan.arena_bytes)} (lower bound "
             f"{_size(plan.lower_bound_bytes)}), parameters {_size(plan.params_bytes)}, "
             f"constant {_size(plan.constant_bytes)}")
    items.append(_Text(LEFT, 22, title, 14, bold=True))
    items.append(_Text(LEFT, 38, f"{len(s.ops)} steps, schedule {s.method}, placement "
                                 f"{plan.algorithm}, alignment {plan.alignment} B", 11))
    # arena panel: address grows upwards
    y0 = TOP + ARENA_H
    top = max(plan.arena_bytes, plan.lower_bound_bytes, 1)
    ys = ARENA_H / top
    items.append(_Rect(LEFT, TOP, plot_w, ARENA_H, "#ffffff"))
    for pb in plan.buffers:
        b = pb.buffer
        h = b.size * ys
        tip = (f"{b.name} [{b.kind}] {b.nbytes} B at {pb.offset}..{pb.end}, steps "
               f"{b.first}..{b.last}" + (f"; shares: {', '.join(b.tensors[1:])}"
                                          if len(b.tensors) > 1 else ""))
        label = _short(b.name) if h >= 11 and (b.last - b.first + 1) * xs > 60 \
            else ""
        items.append(_Rect(LEFT + b.first * xs, y0 - (pb.offset + b.size) * ys,
                           (b.last - b.first + 1) * xs, h, COLORS.get(b.kind, "#cccccc"), tip,
                           label))
    prof = list(s.live_bytes)
    if prof:
        pts: list[tuple[float, float]] = []
        for k, v in enumerate(prof):
            pts += [(LEFT + k * xs, y0 - v * ys), (LEFT + (k + 1) * xs, y0 - v * ys)]
        items.append(_Line(tuple(pts), "#222222", dashed=True))
    items.append(_Text(LEFT - 8, TOP + 12, _size(top), 11, "end"))
    items.append(_Text(LEFT - 8, y0, "0", 11, "end"))
    items.append(_Text(LEFT - 8, TOP + ARENA_H / 2, "arena (RAM)", 12, "end", True))
    items.append(_Text(LEFT + plot_w / 2, y0 + 32, "step", 11, "middle"))
    for k in range(0, steps, max(1, steps // 12)):
        items.append(_Text(LEFT + (k + 0.5) * xs, y0 + 15, str(k), 10, "middle"))
    y = y0 + GAP + 8
    for pool, label, size in (("parameters", "parameters (RAM)", plan.params_bytes),
                              ("constant", "constant (flash)", plan.constant_bytes)):
        items.append(_Text(LEFT - 8, y + POOL_H / 2, label, 12, "end", True))
        items.append(_Text(LEFT - 8, y + POOL_H / 2 + 14, _size(size), 10, "end"))
        items.append(_Rect(LEFT, y, plot_w, POOL_H, "#ffffff"))
        if size:
            ps = POOL_H / size
            for t, p in sorted(plan.pool(pool).items(), key=lambda kv: kv[1].offset):
                items.append(_Rect(LEFT, y + POOL_H - (p.offset + p.nbytes) * ps, plot_w,
                                   max(p.nbytes * ps, 0.5), COLORS[pool],
                                   f"{t}: {p.nbytes} B at {p.offset}"))
        y += POOL_H + GAP / 2
    legend_x = LEFT
    for kind in ("input", "activation", "gradient", "mask", "output", "scratch"):
        items.append(_Rect(legend_x, y, 12, 12, COLORS[kind]))
        items.append(_Text(legend_x + 16, y + 11, kind, 11))
        legend_x += 100
    items.append(_Line(((legend_x, y + 6), (legend_x + 24, y + 6)), "#222222", dashed=True))
    items.append(_Text(legend_x + 30, y + 11, "live bytes (lower bound)", 11))
    return items, int(y + 30)


def _svg(items: list, height: int) -> str:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">')
    out = [svg,
           f'<rect width="{WIDTH}" height="{height}" fill="#fafafa"/>']
    for it in items:
        if isinstance(it, _Rect):
            tip = f"<title>{escape(it.tip)}</title>" if it.tip else ""
            stroke = "#333333" if it.fill != "#ffffff" else "#999999"
            out.append(f'<rect x="{it.x:.2f}" y="{it.y:.2f}" width="{it.w:.2f}" '
                       f'height="{it.h:.2f}" fill="{it.fill}" stroke="{stroke}" '
                       f'stroke-width="0.5">{tip}</rect>')
            if it.label:
                out.append(f'<text x="{it.x + 3:.2f}" y="{it.y + min(it.h, 14) - 3:.2f}" '
                           f'font-size="9">{escape(it.label)}</text>')
        elif isinstance(it, _Text):
            weight = ' font-weight="bold"' if it.bold else ""
            out.append(f'<text x="{it.x:.2f}" y="{it.y:.2f}" font-size="{it.size}" '
                       f'text-anchor="{it.anchor}"{weight}>{escape(it.text)}</text>')
        else:
            pts = " ".join(f"{x:.2f},{y:.2f}" for x, y in it.points)
            dash = ' stroke-dasharray="4 3"' if it.dashed else ""
            out.append(f'<polyline points="{pts}" fill="none" stroke="{it.color}" '
                       f'stroke-width="1"{dash}/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _png(items: list, height: int, path: Path) -> None:
    try:
        import matplotlib  # optional: the plot extra (PNG only)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise PockError(f"{path}: PNG plots need matplotlib (pip install matplotlib); "
                        "write a .svg file instead") from None
    dpi = 100
    fig = plt.figure(figsize=(WIDTH / dpi, height / dpi), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(height, 0)
    ax.axis("off")
    align = {"start": "left", "middle": "center", "end": "right"}
    for it in items:
        if isinstance(it, _Rect):
            ax.add_patch(Rectangle((it.x, it.y), it.w, it.h, facecolor=it.fill,
                                   edgecolor="#333333" if it.fill != "#ffffff" else "#999999",
                                   linewidth=0.4))
            if it.label:
                ax.text(it.x + 3, it.y + min(it.h, 14) - 3, it.label, fontsize=6)
        elif isinstance(it, _Text):
            ax.text(it.x, it.y, it.text, fontsize=it.size * 0.75, ha=align[it.anchor],
                    fontweight="bold" if it.bold else "normal")
        else:
            ax.plot([p[0] for p in it.points], [p[1] for p in it.points], color=it.color,
                    linewidth=0.8, linestyle="--" if it.dashed else "-")
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def plot_plan(plan: MemoryPlan, path: str | os.PathLike) -> Path:
    """Write a picture of ``plan`` to ``path`` (.svg by hand; .png with matplotlib)."""
    p = Path(path)
    items, height = _primitives(plan)
    suffix = p.suffix.lower()
    try:
        if suffix == ".svg":
            p.write_text(_svg(items, height), encoding="utf-8")
        elif suffix == ".png":
            _png(items, height, p)
        else:
            raise PockError(f"{path}: plot format must be .svg or .png")
    except OSError as e:
        raise PockError(f"{path}: cannot write ({e.strerror or e})") from None
    return p
