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
#: Okabe-Ito hues for the other metrics of a chart, in column order (cycled).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def _colours(metrics: Sequence[str]) -> dict[str, str]:
    """A distinct colour per metric of one chart: the fixed one where it has one, else the next unused hue."""
    out = {m: COLOURS[m] for m in metrics if m in COLOURS}
    free = [c for c in PALETTE if c not in out.values()] or list(PALETTE)
    for i, m in enumerate(m for m in metrics if m not in out):
        out[m] = free[i % len(free)]
    return out


def _legend_rows(names: Sequence[tuple[str, int]], width: int) -> list[list[tuple[str, int]]]:
    """Legend entries ``(metric, x)`` in rows no wider than ``width`` (the chart never grows for its legend)."""
    rows: list[list[tuple[str, int]]] = [[]]
    x = 0
    for name, w in names:
        if rows[-1] and x + w > width:
            rows.append([])
            x = 0
        rows[-1].append((name, x))
        x += w
    return rows


def bar_chart(
    groups: Sequence[tuple[str, Mapping[str, float | None], Mapping[str, Sequence[float]]]],
    metrics: Mapping[str, str],
    chart_id: str = "chart",
    title: str = "",
    kind: str = "scores",
) -> str:
    """SVG with one group of bars per ``(label, {metric: value 0..1}, {metric: (lo, hi)})``.

    Bars carry ``class="bar"``, ``data-chart`` (``kind``: what the chart compares), ``data-group``,
    ``data-metric`` and ``data-value`` (percent), so tests and scripts can read the chart;
    intervals are drawn as whiskers.
    """
    # Sized to be read at 100% zoom: 20 px bars, 13 px text, labels as wide as they need.
    longest = max((len(label) for label, _, _ in groups), default=8)
    label_w, plot_w, bar_h, gap, right = min(280, max(110, 8 * longest + 16)), 600, 20, 16, 64
    present = [m for m in metrics if any(values.get(m) is not None for _, values, _ in groups)]
    colours = _colours(present)
    width = label_w + plot_w + right
    legend = _legend_rows([(m, 18 + 8 * len(metrics[m]) + 20) for m in present], width - label_w)
    top = (62 if title else 36) + 20 * (len(legend) - 1)
    group_h = bar_h * max(1, len(present)) + gap
    height = top + group_h * len(groups) + 34
    out = [
        (
            f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">'
        ),
        f"<title>{escape(title or 'scores')}</title>",
    ]
    if title:
        out.append(f'<text x="0" y="16" font-weight="bold" font-size="14">{escape(title)}</text>')
    for tick in range(0, 101, 10):
        x = label_w + plot_w * tick / 100
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 30}" stroke="{"#ccc" if tick % 50 == 0 else "#eee"}"/>')
        if tick % 20 == 0:
            out.append(f'<text x="{x:.1f}" y="{height - 14}" text-anchor="middle" fill="#555">{tick}%</text>')
    for g, (label, values, cis) in enumerate(groups):
        y0 = top + g * group_h
        out.append(
            f'<text x="{label_w - 10}" y="{y0 + bar_h * len(present) / 2 + 5:.1f}" text-anchor="end">{escape(label)}</text>'
        )
        for i, metric in enumerate(present):
            value = values.get(metric)
            if value is None:
                continue
            y = y0 + i * bar_h
            w = plot_w * max(0.0, min(1.0, value))
            out.append(
                f'<rect class="bar" data-chart="{escape(kind)}" data-group="{escape(label)}" data-metric="{metric}" data-value="{100 * value:.2f}" '
                f'x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{bar_h - 4}" fill="{colours[metric]}">'
                f"<title>{escape(label)}: {escape(metrics[metric])} {100 * value:.2f}%</title></rect>"
            )
            right_edge = label_w + w
            ci = cis.get(metric)
            if ci:
                x1, x2 = label_w + plot_w * max(0.0, ci[0]), label_w + plot_w * min(1.0, ci[1])
                ym = y + bar_h / 2
                out.append(
                    f'<path class="ci" data-metric="{metric}" data-group="{escape(label)}" data-x2="{x2:.1f}" '
                    f'd="M{x1:.1f} {ym:.1f}H{x2:.1f}M{x1:.1f} {ym - 5:.1f}V{ym + 5:.1f}'
                    f'M{x2:.1f} {ym - 5:.1f}V{ym + 5:.1f}" stroke="#222" stroke-width="1.5" fill="none"/>'
                )
                right_edge = max(right_edge, x2)
            # The value stands right of the bar *and* of its whisker, never across either.
            out.append(
                f'<text class="value" data-metric="{metric}" data-group="{escape(label)}" x="{right_edge + 6:.1f}" '
                f'y="{y + bar_h - 6}" fill="#222" font-size="12">{100 * value:.1f}</text>'
            )
    for r, row in enumerate(legend):
        ly = top - 28 - 20 * (len(legend) - 1 - r)
        for metric, x in row:
            out.append(f'<rect x="{label_w + x}" y="{ly}" width="12" height="12" fill="{colours[metric]}"/>')
            out.append(f'<text x="{label_w + x + 17}" y="{ly + 11}">{escape(metrics[metric])}</text>')
    out.append("</svg>")
    return "\n".join(out)
