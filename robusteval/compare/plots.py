"""Plots of a comparison report as inline SVG (matplotlib, Agg; no files, no network).

Each function takes parts of ``report.json`` and returns an ``<svg>`` string, so the HTML
report embeds them and stays a single self-contained file.
"""

from __future__ import annotations

import io
from typing import Any

from robusteval.compare.report_md import LABEL, available, change_families

COLORS = {"plain": "#4C72B0", "guarded": "#55A868", "trained": "#C44E52", "guarded+trained": "#8172B2",
          "smoothed": "#CCB974", "smoothed+trained": "#64B5CD", "guarded+smoothed": "#8C8C8C",
          "guarded+smoothed+trained": "#DA8BC3"}


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inside HTML


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "robusteval", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False})
    return plt


def _legend_above(ax: Any, n: int) -> None:
    """The variants' legend between the title and the plot, clear of the bars (two rows when
    there are many variants)."""
    ax.legend(ncols=min(n, 4), fontsize=8, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0))


LABEL_CHARS = 30  # longer tick labels are cut with an ellipsis; the full text is the label's tooltip
MANY = 8          # more categories than this: horizontal bars, one row each, the figure growing downwards


def short(label: str, n: int = LABEL_CHARS) -> str:
    return label if len(label) <= n else label[: n - 1].rstrip() + "…"


class Tooltips:
    """Full text for cut tick labels: each label artist gets an id, and after saving the SVG a
    ``<title>`` (the browser's tooltip) with the full label goes inside its group."""

    def __init__(self, title: str) -> None:
        import hashlib

        self.prefix = "t" + hashlib.sha1(title.encode("utf-8")).hexdigest()[:10]
        self.full: dict[str, str] = {}

    def add(self, artists: Any, labels: list[str]) -> None:
        for artist, label in zip(artists, labels, strict=True):
            gid = f"{self.prefix}-{len(self.full)}"
            artist.set_gid(gid)
            self.full[gid] = label

    def apply(self, svg: str) -> str:
        from html import escape

        for gid, label in self.full.items():
            svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{escape(label)}</title>', 1)
        return svg


def category_axis(ax: Any, labels: list[str], tips: Tooltips, axis: str = "x", fontsize: float = 8) -> None:
    """Ticks 0..n-1 labelled readably at any n: cut to :data:`LABEL_CHARS` (full text in the
    tooltip); on the x axis wrapped before a parenthesis when there are few, rotated when there
    are more (the callers widen the figure with n, or switch to horizontal bars past :data:`MANY`)."""
    shown = [short(lab) for lab in labels]
    if axis == "y":
        ax.set_yticks(range(len(labels)), shown, fontsize=fontsize)
        tips.add(ax.get_yticklabels(), labels)
        return
    if len(labels) <= 4:  # a few: horizontal, wrapped onto up to three short lines
        import textwrap

        ax.set_xticks(range(len(labels)), ["\n".join(textwrap.wrap(lab, 14, max_lines=3, placeholder="…"))
                                           for lab in shown], fontsize=fontsize)
    else:
        ax.set_xticks(range(len(labels)), shown, fontsize=fontsize, rotation=35 if len(labels) <= MANY else 90,
                      ha="right", rotation_mode="anchor")
    tips.add(ax.get_xticklabels(), labels)


Series = list[tuple[str, str, list[float], list[list[float]]]]


def grouped_bars(groups: list[str], series: Series, title: str, value_label: str,
                 limits: tuple[float, float] | None) -> str:
    fig, tips = grouped_bars_figure(groups, series, title, value_label, limits)
    return tips.apply(_svg(fig))


def grouped_bars_figure(groups: list[str], series: Series, title: str, value_label: str,
                        limits: tuple[float, float] | None) -> tuple[Any, Tooltips]:
    """Bars per group (e.g. attack family) and series (variant): ``series`` is (label, color,
    values, [lower errors, upper errors]). Vertical with up to :data:`MANY` groups, widening
    with their number; horizontal past it, one row per group, growing downwards."""
    plt = _plt()
    tips = Tooltips(title)
    n, k = len(groups), max(1, len(series))
    width = 0.8 / k
    horizontal = n > MANY
    if horizontal:
        fig, ax = plt.subplots(figsize=(7.0, 1.2 + n * (0.11 * k + 0.12)))
    else:
        fig, ax = plt.subplots(figsize=(max(5.0, n * max(1.2, 0.2 * k + 0.5) + 1.5), 3.2))
    for j, (label, color, vals, err) in enumerate(series):
        pos = [i + (j - (k - 1) / 2) * width for i in range(n)]
        style = {"capsize": 2, "error_kw": {"elinewidth": 0.8, "ecolor": "#444"}, "label": label, "color": color}
        if horizontal:
            ax.barh(pos, vals, width, xerr=err, **style)
        else:
            ax.bar(pos, vals, width, yerr=err, **style)
    category_axis(ax, groups, tips, "y" if horizontal else "x")
    if horizontal:
        ax.invert_yaxis()  # the first group on top, as in the tables
        ax.set_xlabel(value_label)
        if limits:
            ax.set_xlim(*limits)
        ax.axvline(0, color="black", linewidth=0.6)
    else:
        ax.set_ylabel(value_label)
        if limits:
            ax.set_ylim(*limits)
        ax.axhline(0, color="black", linewidth=0.6)
    ax.set_title(title, pad=22 if k <= 4 else 34)
    _legend_above(ax, k)
    return fig, tips


def whiskers(vals: list[float], cis: list[list[float] | None]) -> list[list[float]]:
    """Error-bar lengths below and above each value from its interval (0 where the value or its
    interval is missing)."""
    pairs = list(zip(vals, cis, strict=True))
    return [[max(0.0, v - ci[0]) if v == v and ci else 0.0 for v, ci in pairs],
            [max(0.0, ci[1] - v) if v == v and ci else 0.0 for v, ci in pairs]]


def asr_bars(victim: dict[str, Any], title: str, direction: str = "R-") -> str:
    """Grouped bars: ASR per attack family of one ``direction``, one bar per variant (no bar
    where nothing was attacked: never a 0 % bar for an empty denominator). R- families count
    successes against the metric, R+ families count invariance failures; the two are drawn
    on separate charts, never on one axis."""
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    fams = sorted({f for v in vs for f, e in victim["variants"][v]["asr"].items() if e.get("direction") == direction})
    series = []
    for v in vs:
        prim = [(victim["variants"][v]["asr"].get(f) or {}).get("primary") or {} for f in fams]
        vals = [100 * p["asr"] if p.get("asr") is not None else float("nan") for p in prim]
        cis = [[100 * x for x in p["ci"]] if p.get("ci") else None for p in prim]
        series.append((LABEL[v], COLORS[v], vals, whiskers(vals, cis)))
    label = "ASR (%)" if direction == "R-" else "invariance failures (%)"
    return grouped_bars(fams, series, title, label, (0, 100))


def score_change_bars(victim: dict[str, Any], title: str) -> str:
    """Grouped bars: the mean change of the victim's score (points, after - before, 95 %
    interval) per R- family, one bar per variant: above 0, the text made worse scored higher
    (gaming paid); no bar where the entry has no change."""
    vs, fams = available(victim), change_families(victim)
    series = []
    for v in vs:
        ch = [(victim["variants"][v]["asr"].get(f) or {}).get("score_change") or {} for f in fams]
        vals = [c["mean"] if c.get("mean") is not None else float("nan") for c in ch]
        series.append((LABEL[v], COLORS[v], vals, whiskers(vals, [c.get("ci") for c in ch])))
    return grouped_bars(fams, series, title, "mean score change (points)", None)


def has_score_change(victim: dict[str, Any]) -> bool:
    """Whether any available variant has a mean score change for an R- family."""
    return bool(change_families(victim))


def has_direction(victim: dict[str, Any], direction: str) -> bool:
    """Whether any available variant of ``victim`` has a family of ``direction``."""
    return any(e.get("direction") == direction for v in victim["variants"].values() if v.get("available")
               for e in v["asr"].values())


def robustness_validity(points: list[dict[str, Any]], title: str) -> str:
    """One point per victim and variant: x = mean Spearman with human judgments, y = R- ASR
    (%), whiskers = their 95 % intervals where measured. Colour = variant, marker = victim;
    a hollow marker is a defense outside the validity tolerance (a trade-off) or with no gain."""
    from matplotlib.lines import Line2D

    plt = _plt()
    markers = "osD^vP*Xh<>p"
    victims = list(dict.fromkeys(p["victim"] for p in points))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for p in points:
        if p["x"] is None or p["y"] is None:
            continue
        xerr = [[p["x"] - p["xci"][0]], [p["xci"][1] - p["x"]]] if p.get("xci") else None
        yerr = [[p["y"] - p["yci"][0]], [p["yci"][1] - p["y"]]] if p.get("yci") else None
        color = COLORS[p["variant"]]
        ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt=markers[victims.index(p["victim"]) % len(markers)],
                    color=color, ecolor=color, elinewidth=0.8, capsize=2, markersize=8,
                    markerfacecolor=color if p["ok"] else "white", markeredgewidth=1.5, alpha=0.95)
    ax.set_xlabel("mean Spearman with human judgments (validity; right is better)")
    ax.set_ylabel("R- ASR % (robustness; lower is better)")
    ax.set_ylim(0, 100)
    seen = list(dict.fromkeys(p["variant"] for p in points))
    handles = [Line2D([], [], color=COLORS[v], marker="o", linestyle="", label=LABEL[v]) for v in seen]
    handles += [Line2D([], [], color="#333", marker=markers[i % len(markers)], linestyle="", markerfacecolor="#333",
                       label=short(v, 24)) for i, v in enumerate(victims)]
    handles.append(Line2D([], [], color="#333", marker="o", linestyle="", markerfacecolor="white",
                          label="outside the validity tolerance / no gain"))
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    return _svg(fig)


def score_distributions(victim: dict[str, Any], title: str) -> str:
    """Per variant: histograms of the victim's scores of clean originals and R- adversarial texts."""
    plt = _plt()
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    fig, axes = plt.subplots(1, len(vs), figsize=(2.6 * len(vs) + 0.5, 2.6), sharey=True, squeeze=False)
    bins = [i * 5 for i in range(21)]
    for ax, v in zip(axes[0], vs, strict=True):
        d = victim["variants"][v]["scores"]
        for values, color, label in ((d["clean"], "#4C72B0", "clean"), (d["adversarial"], "#DD8452",
                                                                          "adversarial (R-)")):
            if values:  # an empty histogram has no density
                ax.hist(values, bins=bins, alpha=0.6, color=color, label=label, density=True)
        ax.set_title(LABEL[v], fontsize=9)
        ax.set_xlim(0, 100)
        ax.set_xlabel("victim score")
    axes[0][0].set_ylabel("density")
    axes[0][-1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title, fontsize=10, y=1.08)
    return _svg(fig)


def correlation_bars(victim: dict[str, Any], title: str) -> str:
    """Spearman with human judgments (95% CI) per correlation set and aspect, one bar per variant."""
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    first = victim["variants"][vs[0]]["correlation"]
    keys = [(c, a) for c, per in first.items() for a in per if not a.startswith("_")]
    series = []
    for v in vs:
        vals, lo, hi = [], [], []
        for c, a in keys:
            sp = ((victim["variants"][v]["correlation"][c].get(a) or {}).get("spearman") or {})
            r = sp.get("r")
            ci = sp.get("ci95") or [r, r]
            vals.append(float("nan") if r is None else r)
            lo.append(0.0 if r is None else r - ci[0])
            hi.append(0.0 if r is None else ci[1] - r)
        series.append((LABEL[v], COLORS[v], vals, [lo, hi]))
    return grouped_bars([f"{c} · {a}" for c, a in keys], series, title, "Spearman ρ", None)


def roc_curves(roc: dict[str, Any], title: str) -> str:
    """One ROC curve per detector, with its calibrated operating point."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.2, 3.8))
    ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--")
    for name, r in roc.items():
        if not r["points"]:
            continue
        xs, ys = [p[0] for p in r["points"]], [p[1] for p in r["points"]]
        ax.plot(xs, ys, linewidth=1.2, label=f"{name} (AUC {r['auc']:.2f})")
    ax.set_xlabel("false-positive rate (clean text)")
    ax.set_ylabel("true-positive rate (R- adversarial text)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return _svg(fig)


def generalization_heatmap(gen: dict[str, Any], title: str) -> str:
    """ASR of models trained on family X (rows) under attack family Y (columns); wider with
    more columns, the column labels rotated and cut (full text in their tooltips)."""
    fig, tips = heatmap_figure(gen, title)
    return tips.apply(_svg(fig))


def heatmap_figure(gen: dict[str, Any], title: str) -> tuple[Any, Tooltips]:
    plt = _plt()
    tips = Tooltips(title)
    rows, cols = list(gen["asr"]), gen["attack_families"]
    vals = [[(gen["asr"][r].get(c) if gen["asr"][r].get(c) is not None else float("nan")) for c in cols]
            for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * len(cols) + 2.5), 0.45 * len(rows) + 1.6))
    im = ax.imshow([[100 * v for v in row] for row in vals], cmap="Reds", vmin=0, vmax=100, aspect="auto")
    size = 8 if len(cols) <= 12 else 6
    for i, row in enumerate(vals):
        for j, v in enumerate(row):
            if v == v and len(cols) <= 24:  # not NaN; past 24 columns the colour says it
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=size,
                        color="white" if v > 0.6 else "black")
    category_axis(ax, cols, tips, "x", fontsize=7)
    category_axis(ax, rows, tips, "y", fontsize=8)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="ASR (%)", shrink=0.8)
    return fig, tips
