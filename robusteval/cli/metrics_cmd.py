"""``robusteval metrics list``: the registered metrics."""

from __future__ import annotations

import argparse

from robusteval.cli.common import print_listing


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="list metrics", description=__doc__)
    msub = p.add_subparsers(dest="action", required=True)
    lp = msub.add_parser("list", help="registered metric names")
    lp.add_argument("--json", action="store_true", help="JSON array, one object per metric")
    lp.set_defaults(func=run_list)


def run_list(args: argparse.Namespace) -> int:
    from robusteval import metrics

    rows = []
    for name in metrics.names():
        info = metrics.info(name)
        cls = metrics.METRICS.get(name)
        rows.append({"name": name, "family": info.get("family"), "source": info.get("source"),
                     "requires_reference": bool(getattr(cls, "requires_reference", False)),
                     "tasks": list(getattr(cls, "tasks", ())),
                     "summary": (cls.__doc__ or "").strip().splitlines()[0]})
    print_listing(rows, args.json, [("name", 14), ("family", 10), ("summary", 0)])
    return 0
