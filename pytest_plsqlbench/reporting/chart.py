"""A grouped horizontal bar chart as inline SVG: no script, no font or file fetched at view time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

#: Colour per metric (colour-blind-safe Okabe-Ito hues).
COLOURS = {
    "mean_test_pass": "#0072B2",
    "suite_pass": "#E69F00",
    "turn_suite_pass": "#009E73",
    "episode_pass": "#CC79A7",
}


def bar_chart(
    groups: Sequence[tuple[str, Mapping[str, float | None], Mapping[str, Sequence[float]]]],
    metrics: Mapping[str, str],
    chart_id: str = "chart",
    title: str = "",
) -> str:
    """SVG with one group of bars per ``(label, {metric: value 0..1}, {metric: (lo, hi)})``.

    Bars carry ``class="bar"``, ``data-group``, ``data-metric`` and ``data-value`` (percent), so
    tests and scripts can read the chart; intervals are drawn as whiskers.
    """
    label_w, plot_w, bar_h, gap = 170, 420, 14, 12
    top = 58 if title else 34
    present = [m for m in metrics if any(values.get(m) is not None for _, values, _ in groups)]
    group_h = bar_h * max(1, len(present)) + gap
    height = top + group_h * len(groups) + 34
    legend_w = sum(14 + 7 * len(metrics[m]) + 16 for m in present)
    width = max(label_w + plot_w + 70, label_w + legend_w)
    out = [
        (
            f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
        ),
        f"<title>{escape(title or 'scores')}</title>",
    ]
    if title:
        out.append(f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>')
    for tick in range(0, 101, 25):
        x = label_w + plot_w * tick / 100
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 30}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 16}" text-anchor="middle" fill="#555">{tick}%</text>')
    for g, (label, values, cis) in enumerate(groups):
        y0 = top + g * group_h
        out.append(
            f'<text x="{label_w - 8}" y="{y0 + bar_h * len(present) / 2 + 4:.1f}" text-anchor="end">{escape(label)}</text>'
        )
        for i, metric in enumerate(present):
            value = values.get(metric)
            if value is None:
                continue
            y = y0 + i * bar_h
            w = plot_w * max(0.0, min(1.0, value))
            out.append(
                f'<rect class="bar" data-group="{escape(label)}" data-metric="{metric}" data-value="{100 * value:.2f}" '
                f'x="{label_w}" y="{y + 1}" width="{w:.1f}" height="{bar_h - 2}" fill="{COLOURS.get(metric, "#888")}">'
                f"<title>{escape(label)}: {escape(metrics[metric])} {100 * value:.2f}%</title></rect>"
            )
            ci = cis.get(metric)
            if ci:
                x1, x2 = label_w + plot_w * ci[0], label_w + plot_w * ci[1]
                ym = y + bar_h / 2
                out.append(
                    f'<path class="ci" d="M{x1:.1f} {ym:.1f}H{x2:.1f}M{x1:.1f} {ym - 4:.1f}V{ym + 4:.1f}'
                    f'M{x2:.1f} {ym - 4:.1f}V{ym + 4:.1f}" stroke="#333" fill="none"/>'
                )
            out.append(
                f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 3}" fill="#333" font-size="10">{100 * value:.1f}</text>'
            )
    lx = label_w
    for metric in present:
        out.append(
            f'<rect x="{lx}" y="{top - 24}" width="10" height="10" fill="{COLOURS.get(metric, "#888")}"/>'
        )
        out.append(f'<text x="{lx + 14}" y="{top - 15}">{escape(metrics[metric])}</text>')
        lx += 14 + 7 * len(metrics[metric]) + 16
    out.append("</svg>")
    return "\n".join(out)
