"""The comparison report tells the story: cards with R- ASR, R+ invariance failures and the
validity cost side by side (numbers straight from asr / stats / metaeval, never pooled), no
"best defense" that ruins validity, inverted detectors called out, readable labels at any
number of families, the config folded away, and the docs' screenshots checked."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from robusteval.asr import asr_table, by_direction, overall
from robusteval.attacks.base import ResultRow
from robusteval.compare import plots
from robusteval.compare.pipeline import _rounded, add_validity, flagged_summary
from robusteval.compare.render import render_report
from robusteval.compare.report_html import render
from robusteval.compare.report_md import HEADLINE, headline_rows, markdown
from robusteval.compare.story import NOT_MEASURED, RECOMMENDED, TRADE_OFF, UNCLEAR, Tolerance, stories
from robusteval.results import JsonlLog
from robusteval.types import Sample

ROOT = Path(__file__).resolve().parents[1]


def rows_for(k_minus: int, n_minus: int, k_plus: int, n_plus: int, fams: int = 2) -> list[dict]:
    """Attacked rows, ``k`` of ``n`` fooling the victim, per direction, spread over families
    and contexts (one row per context and family)."""
    out = []
    for direction, k, n in (("R-", k_minus, n_minus), ("R+", k_plus, n_plus)):
        crit = "beats_reference" if direction == "R-" else "invariance"
        for i in range(n):
            fam = f"family-{i % fams}"
            out.append(ResultRow(f"{fam}-attack", fam, f"s{i}", direction, "orig", "adv", "low",
                                 outcome="attacked", success={crit: i < k}, victim_before=50.0, victim_after=60.0,
                                 model_calls=1).to_dict())
    return out


def corr(r: float, flags: tuple[int, int] | None = None, sets: int = 2) -> dict:
    out = {}
    for j in range(sets):
        out[f"set-{j}"] = {"overall": {"n": 40, "spearman": {"r": r + 0.01 * j, "ci95": [r - 0.1, r + 0.1]}}}
        if flags:
            samples = [Sample(id=f"x{j}-{i}", task="dialogue", context=(f"c{i // 2}",), response="r",
                              human={"overall": float(i % 5)}, meta={"scales": {"overall": {"low": 0, "high": 4}}})
                       for i in range(flags[1])]
            out[f"set-{j}"]["_flagged"] = flagged_summary(samples, [i < flags[0] for i in range(flags[1])])
    return out


def variant(rows: list[dict], r: float, flags: tuple[int, int] | None = None) -> dict:
    """A variant entry as the pipeline writes it: the rates from robusteval.asr."""
    c = corr(r, flags)
    vals = [a["spearman"]["r"] for per in c.values() for k, a in per.items() if not k.startswith("_")]
    return {"available": True, "asr": asr_table(rows), "overall": overall(rows), "by_direction": by_direction(rows),
            "correlation": c, "mean_spearman": round(float(np.mean(vals)), 6), "scores": {"clean": [50.0, 70.0], "adversarial": [60.0]},
            "model_calls": 0}


def make_report(guard_flags: tuple[int, int] = (20, 40), trained_r: float = 0.395, fams: int = 2) -> dict:
    """plain: R- 30/60, R+ 2/20 (overall 32/80, so pooling would show 40 %); guarded: R- 6/60
    but flags ``guard_flags`` of every rated set; trained: R- 12/60 and R+ 9/20 (invariance
    lost), Spearman ``trained_r`` against plain's 0.405."""
    victim = {"metric": "toy", "options": {}, "learned": True, "variants": {
        "plain": variant(rows_for(30, 60, 2, 20, fams), 0.4),
        "guarded": variant(rows_for(6, 60, 2, 20, fams), 0.4, guard_flags),
        "trained": variant(rows_for(12, 60, 9, 20, fams), trained_r - 0.005),
        "guarded+trained": {"available": False, "reason": "x"},
        "smoothed": {"available": False, "reason": "y"}, "smoothed+trained": {"available": False, "reason": "y"}}}
    roc = {"good": {"auc": 0.9, "points": [[0, 0], [1, 1]], "n_clean": 50, "n_adversarial": 80, "threshold": 0.5},
           "backwards": {"auc": 0.31, "points": [[0, 0], [1, 1]], "n_clean": 50, "n_adversarial": 80,
                         "threshold": 0.5},
           "chance": {"auc": 0.5, "points": [[0, 0], [1, 1]], "n_clean": 50, "n_adversarial": 80, "threshold": 0.5}}
    fpr = {d: {"clean": {"flagged": 1, "n": 50, "rate": 0.02, "ci": [0.0, 0.1], "ci_method": "wilson"}} for d in roc}
    return {"schema": "robusteval.compare/2", "name": "toy", "seed": 0, "budget": 10,
            "criteria": {"invariance_tolerance": 1.0}, "variants": ["plain", "guarded", "trained"],
            "guard": {"detectors": list(roc), "policy": "floor", "penalty": 0.5, "thresholds": {d: 0.5 for d in roc},
                      "thresholds_file": "guard/thresholds.json", "false_positive_rate": fpr,
                      "roc": {"dialogue": roc}},
            "suites": {"dialogue": {"dataset": "toy", "n_attacked": 60, "n_train_contexts": 0, "attacks": [],
                                    "adaptive": [], "correlation_sets": {"set-0": 40, "set-1": 40},
                                    "victims": {"toy victim": victim}}},
            "provenance": {"created": "now", "python": "3.11", "platform": "x", "git_commit": "abc",
                           "packages": {"numpy": "2"}, "config": {"name": "toy", "guard": {"policy": "floor"}}}}


def card_cells(page: str, variant: str) -> dict[str, tuple[int, int]]:
    row = re.search(rf'<tr data-variant="{re.escape(variant)}">(.*?)</tr>', page, re.S)
    assert row, variant
    return {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r'class="num ([\w-]+)" data-k="(\d+)" data-n="(\d+)"',
                                                              row.group(1))}


# -- the cards -------------------------------------------------------------------------------
def test_cards_show_r_minus_and_r_plus_apart_with_their_own_numerators_and_denominators() -> None:
    report = make_report()
    page = render(report)
    v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    for name in ("plain", "guarded", "trained"):
        cells = card_cells(page, name)
        d = v[name]["by_direction"]
        assert cells["r-minus"] == (d["R-"]["successes"], d["R-"]["n"])
        assert cells["r-plus"] == (d["R+"]["successes"], d["R+"]["n"])
        # never the pooled overall rate
        assert (v[name]["overall"]["successes"], v[name]["overall"]["n"]) not in cells.values()
    assert card_cells(page, "plain")["r-minus"] == (30, 60) and card_cells(page, "plain")["r-plus"] == (2, 20)
    # the rated text the guard flagged: every set's flags over every set's rated responses
    assert card_cells(page, "guarded")["flagged"] == (40, 80) and "flagged" not in card_cells(page, "plain")
    assert "50.0 [" in page and f"{100 * v['plain']['by_direction']['R-']['asr']:.1f} [" in page
    assert "40.0 [" not in page.split('<h2>Suite')[0]  # plain's pooled 32/80 is nowhere in the verdict


def test_the_report_says_how_its_data_was_split() -> None:
    report = make_report()
    assert "records no split scheme" in markdown(report)  # reports before the conversation split
    assert "whole conversations together" in markdown({**report, "split": "conversation"})
    assert "records no split scheme" not in markdown({**report, "split": "conversation"})
    assert "keep whole conversations together" in markdown({**report, "split": "conversation/file-name"})


def test_headline_table_keeps_the_directions_apart() -> None:
    report = make_report()
    rows = headline_rows(report)
    assert not any("pooled" in h or h.startswith("ASR") for h in HEADLINE)
    plain = rows[0]
    assert plain[HEADLINE.index("R- ASR % [95% CI] (fooled/attacked)")].endswith("(30/60)")
    assert plain[HEADLINE.index("R+ invariance failures % [95% CI] (failed/attacked)")].endswith("(2/20)")
    md = markdown(report)
    assert "R- attacks (text made worse)" in md and "R+ attacks (meaning kept)" in md
    r_minus = md.split("R- attacks (text made worse): ASR")[1].split("###")[0]
    assert "(R+)" not in r_minus and "(R-)" in r_minus


def test_a_guard_that_floors_half_the_rated_text_is_never_the_recommended_defense() -> None:
    report = make_report(guard_flags=(20, 40))
    (vs,) = stories(report)
    by = {s.variant: s for s in vs.variants}
    assert by["guarded"].verdict == TRADE_OFF and "flags 50.0 % of rated responses (40/80)" in by["guarded"].summary
    # the trained variant lowers R- ASR too but loses R+ invariance (10 % -> 45 %): a trade-off, not an improvement
    assert by["trained"].verdict == TRADE_OFF and "R+ invariance failures +35.0 points" in by["trained"].summary
    assert vs.recommended is None and vs.headline.startswith("No defense is recommended")
    page = render(report)
    assert 'data-recommended=""' in page and "Recommended defense" not in page
    assert "Recommended defense" not in markdown(report)


def test_a_defense_within_the_tolerance_is_recommended_and_the_rule_is_stated() -> None:
    report = make_report(guard_flags=(1, 40))  # 2/80 = 2.5 % flagged
    (vs,) = stories(report)
    assert vs.recommended == "guarded" and vs.headline.startswith("Recommended defense: guarded")
    assert {s.variant: s.verdict for s in vs.variants}["guarded"] == RECOMMENDED
    page = render(report)
    assert 'data-recommended="guarded"' in page and "at most 5 % of the rated responses flagged" in page
    # a stricter tolerance turns the same numbers into a trade-off
    (strict,) = stories(report, Tolerance(flagged=0.01))
    assert strict.recommended is None


def test_a_spearman_drop_beyond_the_tolerance_is_a_cost_and_no_gain_is_said() -> None:
    report = make_report(guard_flags=(0, 40), trained_r=0.3)
    by = {s.variant: s for s in stories(report)[0].variants}
    assert "mean Spearman -0.105" in by["trained"].summary
    same = copy.deepcopy(report)
    g = same["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    g["guarded"]["by_direction"] = g["plain"]["by_direction"]
    assert {s.variant: s.verdict for s in stories(same)[0].variants}["guarded"] == "no gain"


def test_detectors_that_rank_attacks_below_clean_text_are_called_out() -> None:
    report = make_report()
    page, md = render(report), markdown(report)
    callout = page.split('data-callout="inverted-detectors"')[1].split("</div>")[0]
    assert "backwards" in callout and "0.310" in callout and "chance" not in callout and "good" not in callout
    assert "backwards ranks the dialogue suite's attacked texts below clean text" in md
    # with intervals: the AUC table prints them, and the callout says whether 0.5 is inside
    roc = report["guard"]["roc"]["dialogue"]
    roc["good"]["ci"], roc["backwards"]["ci"] = [0.84, 0.95], [0.2, 0.45]
    md = markdown(report)
    assert "| good | 0.900 [0.84, 0.95] |" in md and "ROC AUC 0.310 [0.20, 0.45], 80 attacked vs 50 clean; " \
        "the interval stays below 0.5)" in md
    roc["backwards"]["ci"] = [0.25, 0.55]
    assert "single thresholds); but the interval reaches 0.5, so this may be noise" in markdown(report)


def test_page_is_self_contained_with_the_tradeoff_plot_and_the_config_folded() -> None:
    report = make_report()
    page = render(report)
    assert page.count('data-plot="tradeoff"') == 1 and "robustness vs validity" in page
    assert "<script" not in page and "<link" not in page and 'src="http' not in page and "<img" not in page
    config = page.index('<details class="config">')
    assert page.index("&quot;guard&quot;", config) > config  # the config is inside the folded block
    assert '<pre>' not in page[:config]


def test_asr_charts_draw_r_minus_and_r_plus_families_on_separate_axes(monkeypatch) -> None:
    report = make_report()
    victim = report["suites"]["dialogue"]["victims"]["toy victim"]
    drawn: list[tuple[list[str], str]] = []
    real = plots.grouped_bars
    monkeypatch.setattr(plots, "grouped_bars", lambda fams, series, title, label, limits:
                        drawn.append((list(fams), label)) or real(fams, series, title, label, limits))
    page = render(report)
    assert 'data-plot="asr"' in page and 'data-plot="asr-plus"' in page
    by_label = {label: fams for fams, label in drawn}
    assert by_label["ASR (%)"] == ["family-0 (R-)", "family-1 (R-)"]
    assert by_label["invariance failures (%)"] == ["family-0 (R+)", "family-1 (R+)"]
    for v in victim["variants"].values():  # no R+ family at all: no R+ chart
        if v.get("available"):
            v["asr"] = {f: e for f, e in v["asr"].items() if e["direction"] == "R-"}
    assert 'data-plot="asr-plus"' not in render(report)


def test_does_gaming_pay_shows_the_r_minus_score_change_per_family_and_skips_older_reports(monkeypatch) -> None:
    """Every R- row moves the score 50 -> 60: +10 points per family over its 30 rows, in the
    markdown table and in a chart of its own; R+ families are not in it; a report written
    before the change existed shows neither."""
    report = make_report()
    md, page = markdown(report), render(report)
    section = md.split("does gaming pay?")[1].split("###")[0]
    assert "| family-0 (R-) | +10.0 [+10.0, +10.0] (n=30) | +10.0 [+10.0, +10.0] (n=30) |" in section
    assert "(R+)" not in section and 'data-plot="score-change"' in page
    drawn: list[tuple[list[str], str]] = []
    real = plots.grouped_bars
    monkeypatch.setattr(plots, "grouped_bars", lambda fams, series, title, label, limits:
                        drawn.append((list(fams), label)) or real(fams, series, title, label, limits))
    render(report)
    assert dict((label, fams) for fams, label in drawn)["mean score change (points)"] == ["family-0 (R-)",
                                                                                          "family-1 (R-)"]
    for v in report["suites"]["dialogue"]["victims"]["toy victim"]["variants"].values():
        for e in (v.get("asr") or {}).values():
            e.pop("score_change")
    assert "does gaming pay" not in markdown(report) and 'data-plot="score-change"' not in render(report)


def test_pooled_flags_cluster_by_context_so_the_interval_is_not_too_narrow() -> None:
    from robusteval.compare.story import flagged_pooled
    from robusteval.stats import wilson

    def rated(j: int) -> list[Sample]:  # 10 contexts x 8 responses; the guard flags whole contexts
        return [Sample(id=f"s{j}-{i}", task="dialogue", context=(f"c{j}-{i // 8}",), response="r",
                       human={"overall": 1.0}, meta={"scales": {"overall": {"low": 0, "high": 4}}}) for i in range(80)]

    correlation = {f"set-{j}": {"_flagged": flagged_summary(rated(j), [i < 24 for i in range(80)])} for j in range(2)}
    assert correlation["set-0"]["_flagged"]["contexts"] == [[8, 8]] * 3 + [[8, 0]] * 7
    pooled = flagged_pooled(correlation)
    assert pooled is not None and (pooled["flagged"], pooled["n"], pooled["rate"]) == (48, 160, 0.3)
    assert pooled["ci_method"] == "cluster-bootstrap" and pooled["sets"] == 2
    lo, hi = wilson(48, 160)
    assert pooled["ci"][0] < lo - 0.03 and pooled["ci"][1] > hi + 0.03  # 20 clusters, not 160 trials
    for per in correlation.values():  # a report written before contexts were recorded: Wilson, said so
        per["_flagged"].pop("contexts")
    old = flagged_pooled(correlation)
    assert old is not None and old["ci_method"] == "wilson" and old["ci"] == [round(x, 6) for x in (lo, hi)]


# -- readable labels ------------------------------------------------------------------------
def overlaps(boxes: list) -> bool:
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


@pytest.mark.parametrize("n", [3, 30])
def test_family_labels_stay_readable_at_any_number_of_families(n: int) -> None:
    fams = [f"a long attack family name number {i} (R-)" for i in range(n)]
    series = [(v, plots.COLORS[v], [10.0 * (i % 9) for i in range(n)], [[1.0] * n, [1.0] * n])
              for v in ("plain", "guarded", "trained", "guarded+trained")]
    fig, tips = plots.grouped_bars_figure(fams, series, "title", "ASR (%)", (0, 100))
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t for t in (ax.get_yticklabels() if n > plots.MANY else ax.get_xticklabels()) if t.get_text()]
    assert len(labels) == n and not overlaps([t.get_window_extent() for t in labels])
    assert all(len(t.get_text().replace("\n", "")) <= plots.LABEL_CHARS for t in labels)
    assert all("…" in t.get_text() for t in labels)  # cut, and ...
    size = fig.get_size_inches()
    svg = tips.apply(plots._svg(fig))
    assert all(f"<title>{f}</title>" in svg for f in fams)  # the full text is each cut label's tooltip
    if n == 30:
        assert size[1] > 15  # one row per family: the figure grows downwards
    heat = {"asr": {"none": {f: 0.5 for f in fams}, "trained on x": {f: 0.2 for f in fams}}, "attack_families": fams}
    hfig, _ = plots.heatmap_figure(heat, "heat")
    hfig.canvas.draw()
    cols = [t for t in hfig.axes[0].get_xticklabels() if t.get_text()]
    assert not overlaps([t.get_window_extent() for t in cols])
    assert hfig.get_size_inches()[0] >= 0.55 * n


# -- validity intervals and re-rendering ----------------------------------------------------
def test_add_validity_pairs_the_bootstrap_and_matches_mean_spearman(tmp_path) -> None:
    rng = np.random.default_rng(0)
    samples = [Sample(id=f"s{i}", task="dialogue", context=(f"c{i // 3}",), response="r",
                      human={"overall": float(rng.integers(1, 6))}) for i in range(60)]
    base = np.array([s.human["overall"] + rng.normal(0, 1) for s in samples])
    scores = {"plain": base, "guarded": base.copy(), "trained": base + rng.normal(0, 3, len(base))}
    for v, sc in scores.items():
        log = JsonlLog(tmp_path / v / "scores" / "rated.jsonl", key="id", resume=False)
        log.append([{"id": s.id, "score": float(x)} for s, x in zip(samples, sc, strict=True)])
    from robusteval.metaeval import metaevaluate

    variants = {v: {"available": True, "mean_spearman": metaevaluate(samples, sc, n_boot=0)["overall"]["spearman"]["r"]}
                for v, sc in scores.items()}
    add_validity(variants, tmp_path, {"rated": samples}, 200, 0)
    assert "change_vs_plain" not in variants["plain"]["validity"]
    lo, hi = variants["plain"]["validity"]["mean_spearman"]["ci"]
    assert lo < variants["plain"]["mean_spearman"] < hi
    assert variants["guarded"]["validity"]["change_vs_plain"]["ci"] == [0.0, 0.0]  # same scores: paired, no spread
    ch = variants["trained"]["validity"]["change_vs_plain"]
    assert ch["mean"] == pytest.approx(variants["trained"]["mean_spearman"] - variants["plain"]["mean_spearman"],
                                       abs=1e-6)
    assert ch["ci"][0] < ch["mean"] < ch["ci"][1] < 0
    # one set, one aspect: its per-set change is the mean change, with the same paired draws
    assert ch["per_set"] == {"rated": {"overall": {"change": ch["mean"], "ci": ch["ci"]}}}
    assert variants["guarded"]["validity"]["change_vs_plain"]["per_set"]["rated"]["overall"] == {
        "change": 0.0, "ci": [0.0, 0.0]}


def test_render_report_rewrites_the_pages_from_report_json(tmp_path, capsys) -> None:
    report = make_report()
    (tmp_path / "report.json").write_text(json.dumps(report))
    again = render_report(tmp_path)
    assert again == report  # the toy config cannot be parsed: nothing added, report.json untouched
    assert "nothing added from the logs" in capsys.readouterr().err
    assert "Verdict: robustness and its validity cost" in (tmp_path / "report.html").read_text()
    assert "## Headline" in (tmp_path / "report.md").read_text()


# -- headless Chromium: the page and the docs' screenshots ----------------------------------
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it when run as root)")
    return found


def painted(png: Path, hex_color: str, tol: int = 30) -> int:
    from matplotlib.image import imread

    pixels = (imread(png)[..., :3] * 255).round().astype(int)
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(pixels - rgb).sum(axis=-1) <= tol).sum())


TRADE_OFF_ORANGE, UNCLEAR_AMBER = "#c05621", "#b7791f"


def test_cards_render_in_headless_chromium(tmp_path) -> None:
    browser = chromium()
    page = tmp_path / "report.html"
    page.write_text(render(make_report()))
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert dom.count('<section class="card') == 1 and dom.count('data-plot="tradeoff"') == 1
    assert '<details class="config">' in dom and 'data-callout="inverted-detectors"' in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120)
    assert painted(shot, TRADE_OFF_ORANGE, 6) > 500  # the trade-off card's border and badges are on screen


@pytest.mark.parametrize("name, verdict_color", [("quickstart-report.png", TRADE_OFF_ORANGE),
                                                 ("dialogue-report.png", UNCLEAR_AMBER)])
def test_docs_screenshots_show_the_new_cards(name: str, verdict_color: str) -> None:
    """docs/img: the quickstart (every defense a trade-off: the guard floors half the rated
    text) and the real dialogue run (lower ASR within the intervals' overlap: unclear gains), rendered by
    ``python -m robusteval.compare.render RUN --screenshot docs/img/NAME`` (docs/compare.md)."""
    from PIL import Image

    png = ROOT / "docs" / "img" / name
    assert png.is_file() and 20_000 < png.stat().st_size < 400_000
    with Image.open(png) as im:
        assert im.size == (1200, 2400)
    assert painted(png, verdict_color) > 2000  # the verdict cards' border and badges
    assert painted(png, "#dd6b20", 6) > 300  # the inverted-detector callout's border
    for color in ("#4C72B0", "#55A868"):  # the robustness-vs-validity points (plain, guarded)
        assert painted(png, color) > 50, color
    md = (ROOT / "docs" / "compare.md").read_text()
    assert f"img/{name}" in md


def test_an_unmeasured_cost_is_never_read_as_no_cost() -> None:
    """A guard whose flags or Spearman change were not measured (no rated set scored) is not
    recommended on its ASR alone: it may floor everything."""
    report = make_report(guard_flags=(1, 40))
    guarded = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]["guarded"]
    for per in guarded["correlation"].values():
        per.pop("_flagged", None)
    (vs,) = stories(report)
    by = {s.variant: s for s in vs.variants}
    assert by["guarded"].verdict == NOT_MEASURED and "share of rated text the guard flags" in by["guarded"].summary
    assert vs.recommended is None
    report = make_report(guard_flags=(1, 40))
    for name in ("plain", "guarded"):
        v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"][name]
        v["mean_spearman"] = None
        v.pop("validity", None)
    by = {s.variant: s for s in stories(report)[0].variants}
    assert by["guarded"].verdict == NOT_MEASURED and "Spearman change" in by["guarded"].summary


def test_a_gain_within_noise_is_not_recommended() -> None:
    """Guarded R- 28/60 against plain's 30/60: the intervals overlap, so no recommendation."""
    report = make_report(guard_flags=(1, 40))
    v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    v["guarded"] = variant(rows_for(28, 60, 2, 20, 2), 0.4, (1, 40))
    (vs,) = stories(report)
    by = {s.variant: s for s in vs.variants}
    assert by["guarded"].asr_gain > 0 and not by["guarded"].clear_gain
    assert by["guarded"].verdict == UNCLEAR and "(intervals overlap): more samples decide" in by["guarded"].summary
    assert vs.recommended is None and vs.headline.startswith("No defense is recommended")


def test_add_validity_pairs_by_set_and_aspect_when_variants_skip_different_ones(tmp_path) -> None:
    rng = np.random.default_rng(1)

    def rated(name: str) -> list[Sample]:
        return [Sample(id=f"{name}{i}", task="dialogue", context=(f"{name}c{i // 2}",), response="r",
                       human={"overall": float(rng.integers(1, 6)), "fluency": float(rng.integers(1, 6))})
                for i in range(40)]

    sets = {"a": rated("a"), "b": rated("b")}
    good = {n: np.array([s.human["overall"] + rng.normal(0, 0.5) for s in ss]) for n, ss in sets.items()}
    flat = {n: np.full(len(ss), 3.0) for n, ss in sets.items()}  # constant: no correlation is defined
    # plain has a/overall, a/fluency, b/*; 'skips_a' cannot score set a; 'flat_b' scores b with a constant
    logs = {"plain": {"a": good["a"], "b": good["b"]}, "skips_a": {"b": good["b"]},
            "flat_b": {"a": good["a"], "b": flat["b"]}}
    for v, per in logs.items():
        for n, sc in per.items():
            JsonlLog(tmp_path / v / "scores" / f"{n}.jsonl", key="id", resume=False).append(
                [{"id": s.id, "score": float(x)} for s, x in zip(sets[n], sc, strict=True)])
    variants = {v: {"available": True, "mean_spearman": 0.5} for v in logs}
    add_validity(variants, tmp_path, sets, 50, 0)
    skips, flat_b = variants["skips_a"]["validity"]["change_vs_plain"], variants["flat_b"]["validity"]["change_vs_plain"]
    assert (skips["n_pairs"], skips["unpaired"]) == (2, ["a/fluency", "a/overall"])
    assert (flat_b["n_pairs"], flat_b["unpaired"]) == (2, ["b/fluency", "b/overall"])
    # each variant compared with plain on the keys both have: same scores there, so no change and no spread
    assert skips["mean"] == 0.0 and skips["ci"] == [0.0, 0.0]
    assert set(skips["per_set"]) == {"b"} and set(flat_b["per_set"]) == {"a"}  # only the pairs both have
    assert flat_b["mean"] == 0.0 and flat_b["ci"] == [0.0, 0.0]


def test_the_correlation_table_shows_each_defended_variants_change_per_set() -> None:
    report = make_report(trained_r=0.3)
    victim = report["suites"]["dialogue"]["victims"]["toy victim"]
    victim["variants"]["trained"]["validity"] = {"change_vs_plain": {"per_set": {
        "set-0": {"overall": {"change": -0.1, "ci": [-0.18, -0.03]}}, "set-1": {"overall": {"change": -0.1, "ci": None}}}}}
    md = markdown(report)
    row0 = next(line for line in md.splitlines() if line.startswith("| set-0 | overall | 40 |"))
    assert row0.endswith("| 0.295 [0.19, 0.40] (Δ -0.100 [-0.180, -0.030]) |")  # trained, the last column
    assert "| 0.400 [0.30, 0.50] |" in row0  # plain: no change of its own
    assert "(Δ -0.100) |" in md  # no interval recorded: the point alone


def test_a_clear_drop_on_one_set_is_a_cost_even_when_the_mean_is_within_tolerance() -> None:
    report = make_report(guard_flags=(0, 40))
    variants = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    # R+ as plain's (2/20): the set's drop is the only cost this variant can have
    variants["trained"] = trained = variant(rows_for(12, 60, 2, 20, 2), 0.4)
    per = {"set-0": {"overall": {"change": -0.09, "ci": [-0.15, -0.03]}},  # clearly below -0.02
           "set-1": {"overall": {"change": -0.05, "ci": [-0.12, 0.01]}}}  # below on the point, noise
    trained["validity"] = {"change_vs_plain": {"mean": 0.0, "ci": [-0.01, 0.01], "per_set": per}}
    by = {s.variant: s for s in stories(report)[0].variants}
    assert "Spearman on set-0 (overall) -0.090 [-0.150, -0.030]" in by["trained"].costs
    assert not any("set-1" in c for c in by["trained"].costs)
    assert by["trained"].verdict == TRADE_OFF and by["trained"].costs == ["Spearman on set-0 (overall) -0.090 "
                                                                        "[-0.150, -0.030]"]
    per["set-0"]["overall"]["ci"] = [-0.15, 0.01]  # the same point, an interval that reaches 0
    again = {s.variant: s for s in stories(report)[0].variants}["trained"]
    assert again.costs == [] and again.verdict == RECOMMENDED


def test_the_paired_test_decides_a_gain_where_the_run_recorded_it() -> None:
    """plain R- 30/60; guarded fooled on the first k of the same samples. 18/60: the two
    intervals overlap, but 12 contexts fooled less and none more (p = 0.0005): clear. 26/60:
    the bootstrap of the paired change excludes 0, yet 4 contexts down and none up gives
    p = 0.125: not clear."""
    from robusteval.asr import direction_of, paired_change

    plain_rows = rows_for(30, 60, 2, 20, 2)
    for k, verdict in ((18, RECOMMENDED), (26, UNCLEAR)):
        report = make_report(guard_flags=(1, 40))
        v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
        guarded_rows = rows_for(k, 60, 2, 20, 2)
        v["guarded"] = variant(guarded_rows, 0.4, (1, 40))
        minus = [r for r in guarded_rows if r["direction"] == "R-"]
        paired = paired_change([([r for r in plain_rows if r["direction"] == "R-"], minus)], key=direction_of)
        v["guarded"]["paired_vs_plain"] = paired
        story = {s.variant: s for s in stories(report)[0].variants}["guarded"]
        assert story.verdict == verdict, (k, story.summary)
        t = paired["R-"]["sign_test"]
        assert (t["down"], t["up"]) == (30 - k, 0)
        assert f"paired over 60 rows: {30 - k} contexts fooled less, 0 more, p = {t['p']:.2g}" in story.summary
        if verdict == UNCLEAR:
            assert paired["R-"]["change"]["ci"][1] < 0 and "; not clear" in story.summary
        else:  # the older rule would not have called it: the intervals overlap
            assert v["guarded"]["by_direction"]["R-"]["ci"][1] > v["plain"]["by_direction"]["R-"]["ci"][0]


def test_an_invariance_cost_names_its_paired_test_and_stays_a_cost_when_it_is_not_clear() -> None:
    """plain R+ 2/20; trained fails invariance on the first 9 of the same samples: 7 contexts
    worse, none better (p = 0.016), a clear rise. With 4/20 the rise (10 points) still exceeds
    the 5-point tolerance, and stays a cost though the sign test (p = 0.5) cannot confirm it."""
    from robusteval.asr import direction_of, paired_change
    from robusteval.compare.story import paired_reading

    def plus(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["direction"] == "R+"]

    for k, side in ((9, 1), (4, 0)):
        report = make_report(guard_flags=(1, 40))
        v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
        rows = rows_for(12, 60, k, 20, 2)
        v["trained"] = variant(rows, 0.4)
        paired = paired_change([(plus(rows_for(30, 60, 2, 20, 2)), plus(rows))], key=direction_of)
        v["trained"]["paired_vs_plain"] = paired
        t = paired["R+"]["sign_test"]
        assert (t["down"], t["up"]) == (0, k - 2) and paired_reading(paired["R+"])[0] == side
        story = {s.variant: s for s in stories(report)[0].variants}["trained"]
        cost = f"R+ invariance failures {5 * (k - 2):+.1f} points (paired over 20 rows: 0 contexts fooled less, " \
            f"{k - 2} more, p = {t['p']:.2g}{'' if side else '; not clear'})"
        assert cost in story.costs and story.verdict == TRADE_OFF, story.costs


def test_render_report_adds_the_paired_test_from_the_attack_logs(tmp_path, capsys) -> None:
    """A run made before ``paired_vs_plain`` existed gets it from the attack logs on re-render:
    plain's direct log against guarded's transfer + adaptive logs (the adaptive rows replace
    the transfer rows of their attack, as the run combined them). Trained's log no longer
    counts what its report entry says, so it gets none, and stderr says why; a corrupt log
    (a bad line before the end) leaves its variant as it was too, without stopping the render."""
    from robusteval.asr import direction_of, paired_change
    from robusteval.results import slug

    report = make_report(guard_flags=(1, 40))
    v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    folder = tmp_path / "dialogue" / slug("toy victim")
    plain_rows, guarded_rows = rows_for(30, 60, 2, 20, 2), rows_for(18, 60, 2, 20, 2)

    def log(path: Path, rows: list[dict]) -> None:
        JsonlLog(path, key="key", resume=False).append([{**r, "key": f"{r['attack']}|{r['sample_id']}"}
                                                        for r in rows])

    def minus(rows: list[dict]) -> list[dict]:  # one row per attack and sample
        return [r for r in rows if r["direction"] == "R-"]

    v["plain"], v["guarded"] = variant(minus(plain_rows), 0.4), variant(minus(guarded_rows), 0.4, (1, 40))
    log(folder / "plain" / "attacks" / "results.jsonl", minus(plain_rows))
    # guarded: family-1's rows are in the transfer log with every one fooling, and replaced by its adaptive rows
    g = minus(guarded_rows)
    fam1 = [r for r in g if r["family"] == "family-1"]
    log(folder / "guarded" / "transfer" / "results.jsonl",
        [r for r in g if r["family"] != "family-1"] + [{**r, "success": {"beats_reference": True}} for r in fam1])
    log(folder / "guarded" / "adaptive" / "results.jsonl", fam1)
    log(folder / "trained" / "attacks" / "results.jsonl", minus(rows_for(5, 60, 0, 0, 2)))
    (tmp_path / "report.json").write_text(json.dumps(report))
    again = render_report(tmp_path)
    expected = _rounded(paired_change([(minus(plain_rows), g)], key=direction_of))  # as the pipeline writes it
    assert json.loads(json.dumps(expected)) == again["suites"]["dialogue"]["victims"]["toy victim"]["variants"][
        "guarded"]["paired_vs_plain"]
    assert "paired_vs_plain" not in again["suites"]["dialogue"]["victims"]["toy victim"]["variants"]["trained"]
    assert "trained's attack logs count" in capsys.readouterr().err
    assert json.loads((tmp_path / "report.json").read_text()) == again
    assert "paired over 60 rows: 12 contexts fooled less, 0 more" in (tmp_path / "report.md").read_text()
    # a corrupt log: reported, the variant left as it was, the pages written
    (tmp_path / "report.json").write_text(json.dumps(report))  # as the run left it, without the paired test
    adaptive = folder / "guarded" / "adaptive" / "results.jsonl"
    adaptive.write_text("{not json\n" + adaptive.read_text(), encoding="utf-8")
    again = render_report(tmp_path)
    assert "paired_vs_plain" not in again["suites"]["dialogue"]["victims"]["toy victim"]["variants"]["guarded"]
    assert "guarded's attack logs cannot be read (DataFormatError" in capsys.readouterr().err


def _log_rows(path: Path, rows: list[dict]) -> None:
    JsonlLog(path, key="key", resume=False).append([{**r, "key": f"{r['attack']}|{r['sample_id']}"} for r in rows])


def test_render_report_adds_the_score_change_to_older_reports_from_their_logs(tmp_path, capsys) -> None:
    """A report written before ``score_change`` existed gets it per ASR-table entry from the
    attack logs, so its "does gaming pay?" section appears on re-render; an entry whose logs
    count it differently gets none (stderr says so), and the others still get theirs."""
    from robusteval.results import slug

    report = make_report()
    v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    folder = tmp_path / "dialogue" / slug("toy victim")
    rows = [{**r, "victim_after": 50.0 + 3.0 * (int(r["sample_id"][1:]) // 2 % 2)} for r in rows_for(30, 60, 0, 0, 2)]
    v["plain"] = variant(rows, 0.4)
    _log_rows(folder / "plain" / "attacks" / "results.jsonl", rows)
    want = asr_table(rows)
    for e in v["plain"]["asr"].values():
        e.pop("score_change")
    v["plain"]["asr"]["family-1 (R-)"]["primary"]["successes"] -= 1  # this entry no longer matches its log
    for name in ("guarded", "trained"):
        v[name] = {"available": False, "reason": "x"}
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert "does gaming pay" not in markdown(report)
    again = render_report(tmp_path)
    asr_ = again["suites"]["dialogue"]["victims"]["toy victim"]["variants"]["plain"]["asr"]
    got = asr_["family-0 (R-)"]["score_change"]
    assert got == json.loads(json.dumps(_rounded(want["family-0 (R-)"]["score_change"]))) and (got["n"], got["mean"]) == (30, 1.5)
    assert "score_change" not in asr_["family-1 (R-)"]
    assert "logs count family-1 (R-) differently" in capsys.readouterr().err
    assert "does gaming pay" in (tmp_path / "report.md").read_text()


def _digested_report(tmp_path: Path) -> tuple[dict, dict, Path, list[dict], list[dict]]:
    """A report whose plain and guarded variants record their rows' digest (computed with
    timings in the rows: they do not enter it), with the victim's log folder and both row sets."""
    from robusteval.compare.pipeline import rows_digest
    from robusteval.results import slug

    report = make_report()
    v = report["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    plain, guarded = rows_for(30, 60, 0, 0, 2), rows_for(6, 60, 0, 0, 2)
    for name, rows in (("plain", plain), ("guarded", guarded)):
        v[name] = variant(rows, 0.4)
        v[name]["rows_sha256"] = rows_digest([{**r, "wall_time": 9.0} for r in rows])
    v["trained"] = {"available": False, "reason": "x"}
    return report, v, tmp_path / "dialogue" / slug("toy victim"), plain, guarded


def test_a_recorded_rows_digest_refuses_logs_that_changed_even_with_the_same_counts(tmp_path, capsys) -> None:
    """A report records a digest of each variant's rows (``rows_sha256``); a log edited since
    (here one row's score, every count unchanged) is not read back, where the counts alone would
    pass it. Timings do not enter the digest."""
    report, _, folder, plain, guarded = _digested_report(tmp_path)
    for name, rows in (("plain", plain), ("guarded", guarded)):
        _log_rows(folder / name / "attacks" / "results.jsonl", rows)
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert "paired_vs_plain" in render_report(tmp_path)["suites"]["dialogue"]["victims"]["toy victim"][
        "variants"]["guarded"]
    (tmp_path / "report.json").write_text(json.dumps(report))
    edited = folder / "guarded" / "attacks" / "results.jsonl"
    edited.unlink()
    _log_rows(edited, [{**guarded[0], "victim_after": 99.0}, *guarded[1:]])
    again = render_report(tmp_path)
    assert "paired_vs_plain" not in again["suites"]["dialogue"]["victims"]["toy victim"]["variants"]["guarded"]
    assert "no longer hold the rows the report was computed from" in capsys.readouterr().err


def test_a_digest_mismatch_blocks_the_score_change_too_and_is_reported_once(tmp_path, capsys) -> None:
    """An older report lacking both the paired test and the score changes: a variant whose log no
    longer matches its recorded digest gets neither, and its logs are read (and refused) once,
    so stderr says so once; plain, whose log matches, still gets its score changes."""
    report, v, folder, plain, guarded = _digested_report(tmp_path)
    for name in ("plain", "guarded"):
        for e in v[name]["asr"].values():
            e.pop("score_change")
    _log_rows(folder / "plain" / "attacks" / "results.jsonl", plain)
    _log_rows(folder / "guarded" / "attacks" / "results.jsonl", [{**guarded[0], "victim_after": 99.0}, *guarded[1:]])
    (tmp_path / "report.json").write_text(json.dumps(report))
    again = render_report(tmp_path)["suites"]["dialogue"]["victims"]["toy victim"]["variants"]
    assert "paired_vs_plain" not in again["guarded"]
    assert not any("score_change" in e for e in again["guarded"]["asr"].values())
    assert all("score_change" in e for e in again["plain"]["asr"].values())
    assert capsys.readouterr().err.count("guarded's attack logs under") == 1
