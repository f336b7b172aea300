"""``robusteval data list|show``: the registered human-judgment datasets."""

from __future__ import annotations

import argparse
import json

from robusteval.cli.common import add_data_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list or inspect datasets", description=__doc__)
    dsub = p.add_subparsers(dest="action", required=True)
    lp = dsub.add_parser("list", help="registered dataset names")
    lp.add_argument("--json", action="store_true", help="JSON array output")
    lp.set_defaults(func=run_list)
    sp = dsub.add_parser("show", help="a dataset's description, scales and first samples")
    sp.add_argument("name")
    sp.add_argument("-n", type=int, default=2, help="samples to print (default 2)")
    sp.add_argument("--json", action="store_true")
    add_data_dir(sp)
    sp.set_defaults(func=run_show)


def run_list(args: argparse.Namespace) -> int:
    from robusteval import data

    infos = [data.info(n).to_dict() for n in data.names()]
    if args.json:
        print(json.dumps(infos, indent=2))
    else:
        for i in infos:
            print(f"{i['name']:<26} {i['task']:<14} {', '.join(i['aspects'])}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from robusteval import data

    info = data.info(args.name).to_dict()
    samples = data.load(args.name, args.data_dir)
    info["size"] = len(samples)
    info["file"] = str(data.path_of(args.name, args.data_dir))
    shown = []
    for s in samples[: args.n]:
        d = s.to_dict()
        d["meta"] = {k: v for k, v in d["meta"].items() if k not in ("translations", "scales")}
        shown.append(d)
    if args.json:
        print(json.dumps({**info, "samples": shown}, indent=2, ensure_ascii=False))
    else:
        print(f"{info['name']}: {info['description']}")
        print(f"  file: {info['file']}  ({info['size']} samples, task {info['task']})")
        for a, sc in info["scales"].items():
            print(f"  aspect {a}: {sc['low']}-{sc['high']}")
        for d in shown:
            print(json.dumps(d, ensure_ascii=False)[:600])
    return 0
