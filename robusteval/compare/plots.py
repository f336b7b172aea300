"""Plots of a comparison report as inline SVG (matplotlib, Agg; no files, no network).

Each function takes parts of ``report.json`` and returns an ``<svg>`` string, so the HTML
report embeds them and stays a single self-contained file.
"""

from __future__ import annotations

import io
from typing import Any

from robusteval.compare.report_md import LABEL

COLORS = {"plain": "#4C72B0", "guarded": "#55A868", "trained": "#C44E52", "guarded+trained": "#8172B2",
          "smoothed": "#CCB974", "smoothed+trained": "#64B5CD"}


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
    """The variants' legend in one row between the title and the plot, clear of the bars."""
    ax.legend(ncols=n, fontsize=8, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0))


def asr_bars(victim: dict[str, Any], title: str) -> str:
    """Grouped bars: ASR per attack family, one bar per variant."""
    plt = _plt()
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    fams = sorted({f for v in vs for f in victim["variants"][v]["asr"]})
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(fams) + 2), 3.2))
    width = 0.8 / max(1, len(vs))
    for k, v in enumerate(vs):
        prim = [(victim["variants"][v]["asr"].get(f) or {}).get("primary") or {} for f in fams]
        # n/a (nothing attacked) is no bar at all, never a 0 % bar
        vals = [100 * p["asr"] if p.get("asr") is not None else float("nan") for p in prim]
        cis = [p.get("ci") or [float("nan")] * 2 for p in prim]
        err = [[max(0.0, val - 100 * lo) if val == val else 0.0 for val, (lo, _) in zip(vals, cis, strict=True)],
               [max(0.0, 100 * hi - val) if val == val else 0.0 for val, (_, hi) in zip(vals, cis, strict=True)]]
        ax.bar([i + (k - (len(vs) - 1) / 2) * width for i in range(len(fams))], vals, width,
               yerr=err, capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "#444"},
               label=LABEL[v], color=COLORS[v])
    ax.set_xticks(range(len(fams)), [f.replace(" (", "\n(") for f in fams], fontsize=8)
    ax.set_ylabel("ASR (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title, pad=22)
    _legend_above(ax, len(vs))
    return _svg(fig)


def score_distributions(victim: dict[str, Any], title: str) -> str:
    """Per variant: histograms of the victim's scores of clean originals and R- adversarial texts."""
    plt = _plt()
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    fig, axes = plt.subplots(1, len(vs), figsize=(2.6 * len(vs) + 0.5, 2.6), sharey=True, squeeze=False)
    bins = [i * 5 for i in range(21)]
    for ax, v in zip(axes[0], vs, strict=True):
        d = victim["variants"][v]["scores"]
        ax.hist(d["clean"], bins=bins, alpha=0.6, color="#4C72B0", label="clean", density=True)
        ax.hist(d["adversarial"], bins=bins, alpha=0.6, color="#DD8452", label="adversarial (R-)", density=True)
        ax.set_title(LABEL[v], fontsize=9)
        ax.set_xlim(0, 100)
        ax.set_xlabel("victim score")
    axes[0][0].set_ylabel("density")
    axes[0][-1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title, fontsize=10, y=1.08)
    return _svg(fig)


def correlation_bars(victim: dict[str, Any], title: str) -> str:
    """Spearman with human judgments (95% CI) per correlation set and aspect, one bar per variant."""
    plt = _plt()
    vs = [v for v, e in victim["variants"].items() if e.get("available")]
    first = victim["variants"][vs[0]]["correlation"]
    keys = [(c, a) for c, per in first.items() for a in per if not a.startswith("_")]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(keys) + 2), 3.0))
    width = 0.8 / max(1, len(vs))
    for k, v in enumerate(vs):
        xs, ys, lo, hi = [], [], [], []
        for i, (c, a) in enumerate(keys):
            sp = ((victim["variants"][v]["correlation"][c].get(a) or {}).get("spearman") or {})
            if sp.get("r") is None:
                continue
            xs.append(i + (k - (len(vs) - 1) / 2) * width)
            ys.append(sp["r"])
            ci = sp.get("ci95") or [sp["r"], sp["r"]]
            lo.append(sp["r"] - ci[0])
            hi.append(ci[1] - sp["r"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=LABEL[v], color=COLORS[v],
               error_kw={"elinewidth": 0.8})
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(keys)), [f"{c}\n{a}" for c, a in keys], fontsize=7)
    ax.set_ylabel("Spearman ρ")
    ax.set_title(title, pad=22)
    _legend_above(ax, len(vs))
    return _svg(fig)


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
    """ASR of models trained on family X (rows) under attack family Y (columns)."""
    plt = _plt()
    rows, cols = list(gen["asr"]), gen["attack_families"]
    vals = [[(gen["asr"][r].get(c) if gen["asr"][r].get(c) is not None else float("nan")) for c in cols]
            for r in rows]
    fig, ax = plt.subplots(figsize=(0.9 * len(cols) + 2.5, 0.45 * len(rows) + 1.6))
    im = ax.imshow([[100 * v for v in row] for row in vals], cmap="Reds", vmin=0, vmax=100, aspect="auto")
    for i, row in enumerate(vals):
        for j, v in enumerate(row):
            if v == v:  # not NaN
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=8,
                        color="white" if v > 0.6 else "black")
    ax.set_xticks(range(len(cols)), [c.replace(" (", "\n(") for c in cols], fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="ASR (%)", shrink=0.8)
    return _svg(fig)
