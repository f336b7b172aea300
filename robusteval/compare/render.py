"""Render a finished comparison again (``report.md`` and ``report.html`` from its
``report.json``) without rerunning anything: after the report's code changed, or to add what a
run made before they existed lacks (the validity intervals, the paired test against plain),
from the logs the run left."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robusteval.compare.story import DEFAULT_TOLERANCE, Tolerance

RowsOf = Callable[[str], list[dict[str, Any]] | None]  # a variant's name -> its logged rows, or None


def lacks_flag_contexts(victim: dict[str, Any]) -> bool:
    """Whether a guarded variant's ``_flagged`` entries predate the per-context counts that
    :func:`robusteval.compare.story.flagged_pooled` clusters its interval by."""
    return any(isinstance(per, dict) and "_flagged" in per and "contexts" not in per["_flagged"]
               for e in victim["variants"].values() if e.get("available")
               for per in (e.get("correlation") or {}).values())


def lacks_validity(entry: dict[str, Any]) -> bool:
    """An available variant without the ``validity`` intervals, or whose paired change from
    plain predates the per-set changes (``change_vs_plain.per_set``)."""
    if not entry.get("available"):
        return False
    v = entry.get("validity")
    return v is None or ("change_vs_plain" in v and "per_set" not in v["change_vs_plain"])


def add_missing_validity(report: dict[str, Any], out: Path, data_dir: str | None) -> list[str]:
    """Adds what a run made before they existed lacks, from its logged scores and the
    correlation sets named in its config: the ``validity`` intervals
    (:func:`robusteval.compare.pipeline.add_validity`) and the per-context guard flags of the
    rated responses (``_flagged.contexts``, :func:`add_flag_contexts`). Returns the victims it
    filled; a config today's parser refuses or a dataset that is not there leaves the report as
    it was (the HTML then shows the change without an interval, the flag rate with Wilson's
    interval over responses) and says why on stderr."""
    from robusteval.compare.config import parse
    from robusteval.compare.pipeline import SuiteData
    from robusteval.errors import RobustevalError
    from robusteval.results import slug

    todo = [(s, v) for s, suite in report["suites"].items() for v, victim in suite["victims"].items()
            if any(lacks_validity(e) for e in victim["variants"].values())
            or lacks_flag_contexts(victim)]
    if not todo:
        return []
    try:
        cfg = parse(copy.deepcopy((report.get("provenance") or {}).get("config") or {}))  # parse may annotate it
        specs = {s.name: s for s in cfg.suites}
        refuse_other_split(report, [specs[name] for name in {s for s, _ in todo}])
        # the run trained long ago: only what the correlation sets need is checked
        data = {name: SuiteData(specs[name], cfg, data_dir, training=False) for name in {s for s, _ in todo}}
    except (RobustevalError, KeyError, TypeError, ValueError) as exc:
        print(f"render_report: nothing added from the logs ({type(exc).__name__}: {exc})", file=sys.stderr)
        return []
    done = []
    for sname, vname in todo:
        folder = out / slug(sname) / slug(vname)
        variants = report["suites"][sname]["victims"][vname]["variants"]
        before = json.dumps(variants, sort_keys=True)
        if any(lacks_validity(e) for e in variants.values()):
            fill_validity(variants, folder, data[sname].correlation, cfg.n_boot, cfg.seed)
        add_flag_contexts(variants, folder, data[sname].correlation)
        if json.dumps(variants, sort_keys=True) != before:
            done.append(f"{sname}/{vname}")
    return done


def refuse_other_split(report: dict[str, Any], suites: list[Any]) -> None:
    """The correlation sets are rebuilt by today's split: refused (a :class:`RobustevalError`,
    so nothing is added) when the run split the suites' datasets otherwise (a report of code
    before 5807d5b records no scheme; "conversation" split a dataset given as a path by the
    path as written): its test contexts are not the ones today's split would pick."""
    from robusteval.compare.pipeline import correlation_target
    from robusteval.errors import RobustevalError
    from robusteval.training.data import SPLIT_SCHEME, same_split

    # the sets split here: each suite's own and the correlation entries read at their test split
    # (a set correlated whole is loaded whole, whatever the scheme)
    names = [n for spec in suites for n in
             [spec.dataset, *(name for name, test_only in (correlation_target(e, spec.dataset)
                                                            for e in spec.correlation) if test_only)]]
    scheme = report.get("split")
    if not same_split(scheme, names):
        said = repr(scheme) if scheme else "a scheme it did not record"
        raise RobustevalError(f"the run split its data by {said}, this code by {SPLIT_SCHEME!r}: its "
                              "correlation sets' test contexts cannot be rebuilt")


def fill_validity(variants: dict[str, Any], folder: Path, sets: dict[str, list[Any]], n_boot: int, seed: int) -> None:
    """What :func:`lacks_validity` finds missing, from the score logs, and nothing else: a
    variant without ``validity`` gets the whole entry (as
    :func:`robusteval.compare.pipeline.add_validity` writes it); a variant whose recorded
    change predates the per-set changes gets ``per_set`` alone, and only where the logs gave
    it: what the report already holds is never recomputed or replaced (logs deleted since the
    run leave it as it was)."""
    from robusteval.compare.pipeline import add_validity

    fresh = copy.deepcopy(variants)
    for e in fresh.values():
        e.pop("validity", None)
    add_validity(fresh, folder, sets, n_boot, seed)
    for v, e in variants.items():
        got = fresh[v].get("validity")
        if not lacks_validity(e) or not got:
            continue
        if "validity" not in e:
            e["validity"] = got
            continue
        per = (got.get("change_vs_plain") or {}).get("per_set")
        if per:
            e["validity"]["change_vs_plain"]["per_set"] = per


def logged_rows(folder: Path, variant: str) -> list[dict[str, Any]] | None:
    """The rows behind a variant's headline ASR, read back from its attack logs under
    ``folder`` (a victim's folder): ``attacks/results.jsonl``, or the transfer and adaptive
    logs combined as the run combined them (:func:`robusteval.compare.pipeline.effective_rows`);
    None when the variant has no logs there."""
    from robusteval.compare.pipeline import effective_rows
    from robusteval.results import read_jsonl

    vdir = folder / variant.replace("+", "_")
    direct, transfer, adaptive = (vdir / stage / "results.jsonl" for stage in ("attacks", "transfer", "adaptive"))
    if direct.is_file():
        return effective_rows(read_jsonl(direct), None, None)
    if transfer.is_file():
        return effective_rows(None, read_jsonl(transfer), read_jsonl(adaptive) if adaptive.is_file() else [])
    return None


def counts_of(by_dir: dict[str, Any] | None) -> dict[str, tuple[Any, Any]]:
    return {d: (e.get("successes"), e.get("n")) for d, e in (by_dir or {}).items()}


def rows_of_record(variants: dict[str, Any], folder: Path, v: str, where: str) -> list[dict[str, Any]] | None:
    """The rows behind variant ``v``'s recorded ASR, read back from its attack logs, or None
    (with the reason on stderr) when they cannot be trusted to be the run's: logs gone,
    unreadable, or not the rows the report was computed from. A report that recorded its rows'
    digest (``rows_sha256``, :func:`robusteval.compare.pipeline.rows_digest`) is held to it
    exactly; an older one, which has none, to the counts per direction of its ``by_direction``."""
    from robusteval.asr import by_direction
    from robusteval.compare.pipeline import rows_digest
    from robusteval.errors import RobustevalError

    entry = variants[v]
    recorded = entry.get("rows_sha256")
    try:
        rows = logged_rows(folder, v)
        # the counts (a bootstrap per direction) only where no digest was recorded
        counts = None if rows is None or recorded is not None else counts_of(by_direction(rows))
    except (RobustevalError, ValueError, KeyError, TypeError) as exc:  # a corrupt or older log
        print(f"render_report: {where}: {v}'s attack logs cannot be read ({type(exc).__name__}: {exc}); "
              "nothing added from them", file=sys.stderr)
        return None
    if rows is None:
        print(f"render_report: {where}: no attack logs of {v} under {folder}; nothing added from them",
              file=sys.stderr)
        return None
    if recorded is not None:
        if rows_digest(rows) != recorded:
            print(f"render_report: {where}: {v}'s attack logs under {folder} no longer hold the rows the "
                  "report was computed from (their digest differs); nothing added from them", file=sys.stderr)
            return None
    elif counts != counts_of(entry.get("by_direction")):
        print(f"render_report: {where}: {v}'s attack logs count {counts}, the report "
              f"{counts_of(entry.get('by_direction'))}; nothing added from them", file=sys.stderr)
        return None
    return rows


def fill_paired(variants: dict[str, Any], read: RowsOf) -> bool:
    """Adds ``paired_vs_plain`` (:func:`robusteval.asr.paired_change` per direction, the
    verdict's paired test) to each available variant that a run made before it existed lacks,
    from the attack logs of the variant and of plain (``read``: :func:`rows_of_record` of the
    victim). Logs that cannot be trusted leave the variant as it was (its verdict then falls
    back to the intervals). Returns whether it added any."""
    from robusteval.asr import direction_of, paired_change
    from robusteval.compare.pipeline import _rounded

    todo = [v for v, e in variants.items() if v != "plain" and e.get("available") and "paired_vs_plain" not in e]
    plain = variants.get("plain") or {}
    if not todo or not plain.get("available"):
        return False
    base = read("plain")
    added = False
    for v in todo if base is not None else ():
        rows = read(v)
        if rows is not None:
            variants[v]["paired_vs_plain"] = _rounded(paired_change([(base, rows)], key=direction_of))
            added = True
    return added


def fill_score_change(variants: dict[str, Any], read: RowsOf, where: str) -> bool:
    """Adds ``score_change`` (:func:`robusteval.asr.score_change`, "does gaming pay?") to the
    ASR table entries of a run made before it existed, from the variant's attack logs
    (``read``: :func:`rows_of_record` of the victim); an entry gets it only where the logs count what the entry counts
    (attacked rows and primary successes). Returns whether it added any."""
    from robusteval.asr import asr_table
    from robusteval.compare.pipeline import _rounded

    added = False
    for v, e in variants.items():
        table = e.get("asr") if e.get("available") else None
        if not table or all("score_change" in a for a in table.values()):
            continue
        rows = read(v)
        fresh = asr_table(rows) if rows is not None else {}
        for name, a in table.items():
            got = fresh.get(name)
            if "score_change" in a or got is None:
                continue
            if (got["attacked"], got["primary"].get("successes")) != (a.get("attacked"),
                                                                      (a.get("primary") or {}).get("successes")):
                print(f"render_report: {where}: {v}'s logs count {name} differently from the report; "
                      "no score change added for it", file=sys.stderr)
                continue
            a["score_change"] = _rounded(got["score_change"])
            added = True
    return added


def add_missing_from_logs(report: dict[str, Any], out: Path) -> list[str]:
    """:func:`fill_paired` and :func:`fill_score_change` for every victim of the report, each
    variant's logs read (and checked, :func:`rows_of_record`) at most once; returns the victims
    it filled."""
    from robusteval.results import slug

    done = []
    for s, suite in report["suites"].items():
        for v, victim in suite["victims"].items():
            variants, folder, where = victim["variants"], out / slug(s) / slug(v), f"{s}/{v}"
            read = functools.cache(functools.partial(rows_of_record, variants, folder, where=where))
            paired = fill_paired(variants, read)
            if fill_score_change(variants, read, where) or paired:
                done.append(where)
    return done


def add_flag_contexts(variants: dict[str, Any], out: Path, sets: dict[str, list[Any]]) -> None:
    """Recomputes each guarded variant's ``_flagged`` entry that lacks ``contexts`` from its
    score log (``<variant>/scores/<set>.jsonl``, the guard's verdict per rated response) with
    :func:`robusteval.compare.pipeline.flagged_summary`; kept only when it counts the same
    flags over the same responses as the entry it replaces (else left as it was, with a
    warning)."""
    from robusteval.compare.pipeline import flagged_summary
    from robusteval.results import read_jsonl, slug

    for v, e in variants.items():
        for set_name, per in (e.get("correlation") or {}).items() if e.get("available") else ():
            old = per.get("_flagged") if isinstance(per, dict) else None
            samples = sets.get(set_name)
            if not old or "contexts" in old or not samples:
                continue
            log = out / v.replace("+", "_") / "scores" / f"{slug(set_name)}.jsonl"
            rows = {r["id"]: r for r in read_jsonl(log) if "id" in r} if log.is_file() else {}
            if any(s.id not in rows for s in samples):
                print(f"render_report: {log} lacks rated responses; {v}'s flags on {set_name} keep Wilson's "
                      "interval", file=sys.stderr)
                continue
            new = flagged_summary(samples, [bool((rows[s.id].get("guard") or {}).get("flagged")) for s in samples])
            if (new["flagged"], new["n"]) != (old["flagged"], old["n"]):
                print(f"render_report: {log} counts {new['flagged']}/{new['n']} flagged, the report "
                      f"{old['flagged']}/{old['n']}; left as it was", file=sys.stderr)
                continue
            per["_flagged"] = new


def render_report(out_dir: str | Path, data_dir: str | None = None, tol: Tolerance | None = None,
                  fill_validity: bool = True) -> dict[str, Any]:
    """Rewrite ``report.md`` and ``report.html`` of the run in ``out_dir`` from its
    ``report.json``. The verdicts follow ``tol``; without one, the tolerance the run recorded
    (``provenance.tolerance``), else the default. With ``fill_validity`` a run that lacks the
    validity intervals gets them from its score logs (:func:`add_missing_validity`), and one that
    lacks the paired test of each variant against plain or the score changes gets them from its
    attack logs (:func:`add_missing_from_logs`); report.json
    is rewritten when that added something or ``tol`` differs from the recorded tolerance (which
    it then records); nothing else in it changes. Returns the report."""
    from robusteval.compare.report_html import render
    from robusteval.compare.report_md import markdown
    from robusteval.results import read_json, write_json

    out = Path(out_dir)
    report = read_json(out / "report.json", missing="run `robusteval compare` first")
    changed = fill_validity and bool(add_missing_from_logs(report, out) + add_missing_validity(report, out, data_dir))
    recorded = (report.get("provenance") or {}).get("tolerance")
    if tol is None:
        tol = Tolerance(**recorded) if isinstance(recorded, dict) else DEFAULT_TOLERANCE
    elif isinstance(report.get("provenance"), dict) and recorded != dataclasses.asdict(tol):
        report["provenance"]["tolerance"] = dataclasses.asdict(tol)  # the page's verdicts follow it
        changed = True
    if changed:
        write_json(out / "report.json", report)
    (out / "report.md").write_text(markdown(report, tol), encoding="utf-8")
    (out / "report.html").write_text(render(report, tol), encoding="utf-8")
    return report


def screenshot(html: str | Path, png: str | Path, width: int = 1200, height: int = 2400, colors: int = 256) -> Path:
    """The top ``width`` x ``height`` pixels of a report page as painted by headless Chromium
    (Debian ``chromium``), saved as a palette PNG of ``colors`` colours to keep it small (the
    docs' screenshots). Raises MissingResourceError without a Chromium."""
    import shutil
    import subprocess
    import tempfile

    from PIL import Image

    from robusteval.errors import MissingResourceError

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise MissingResourceError("no chromium on PATH (scripts/setup.sh installs Debian's when run as root)")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "shot.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size={width},{height}", f"--screenshot={raw}", Path(html).resolve().as_uri()],
                       capture_output=True, timeout=180, check=False)
        if not raw.is_file():
            raise MissingResourceError(f"chromium wrote no screenshot of {html}")
        image = small_png(Image.open(raw).convert("RGB"), colors)
        Path(png).parent.mkdir(parents=True, exist_ok=True)
        image.save(png, optimize=True)
    return Path(png)


KEY_COLORS = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD", "#c05621", "#2f855a", "#dd6b20",
              "#718096", "#ffffff", "#000000", "#1d2430", "#f6f7f9")


def small_png(image: Any, colors: int = 256) -> Any:
    """A palette image: a median cut of ``image`` plus the report's own colours (variants,
    verdicts), kept exact so small plot markers do not blend into a neighbour's shade."""
    from PIL import Image

    keys = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in KEY_COLORS]
    cut = image.quantize(colors=colors - len(keys), method=Image.Quantize.MEDIANCUT).getpalette() or []
    flat = [v for rgb in keys for v in rgb] + cut[: 3 * (colors - len(keys))]
    palette = Image.new("P", (1, 1))
    palette.putpalette(flat + [0] * (768 - len(flat)))
    return image.quantize(palette=palette, dither=Image.Dither.NONE)


def main(argv: list[str] | None = None) -> int:
    """``python -m robusteval.compare.render OUT_DIR [--data-dir D] [--screenshot PNG]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m robusteval.compare.render", description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--data-dir", default=None, help="for the validity intervals of a run made before them")
    ap.add_argument("--no-fill-validity", action="store_true")
    ap.add_argument("--screenshot", default=None, help="also write a PNG of the page's top")
    args = ap.parse_args(argv)
    render_report(args.out_dir, args.data_dir, fill_validity=not args.no_fill_validity)
    print(f"rendered {Path(args.out_dir) / 'report.html'}")
    if args.screenshot:
        print(f"screenshot {screenshot(Path(args.out_dir) / 'report.html', args.screenshot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
