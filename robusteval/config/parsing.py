"""jsonargparse glue shared by every command's config: the parser of a config dataclass
(``--config FILE``, ``--print_config``, dotted overrides), the old flag spellings rewritten to
the dotted ones, config dicts validated the same way from Python, and jsonargparse's errors
turned into one line that names the bad key and the closest known one."""

import copy
import dataclasses
import difflib
import json
import os
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonargparse import ActionConfigFile, ArgumentParser, Namespace

from robusteval.errors import RobustevalError

# not part of a run's fingerprint: where the output goes, and where the work runs (every backend
# gives the same rows; robusteval.config.common.Execution)
EXECUTION_KEYS = ("backend", "ray_address", "workers", "cpus_per_worker", "gpus_per_worker", "max_in_flight")
# how a run is written and rendered, not what it measures: left out of its fingerprint
# (``seeds``: which runs to make, each with its own ``seed`` in its fingerprint)
OUTPUT_KEYS = ("config", "out_dir", "resume", "report_only", "screenshot", "tolerance", "seeds", *EXECUTION_KEYS)


class ConfigError(RobustevalError):
    """A config file, a flag or a config dict that does not fit the command's dataclass."""


@dataclass(frozen=True)
class Alias:
    """An old flag spelling and what it becomes.

    ``mode``: ``rename`` (same value), ``kv`` (``KEY=VALUE`` -> ``NEW.KEY=VALUE``), ``csv``
    (``a,b`` -> ``NEW=["a", "b"]``), ``append`` (every occurrence gathered into one list),
    ``const`` (a bare flag -> ``NEW=value``), ``guard`` (``--guard a,b``: a detector list,
    or a whole block given as YAML/JSON)."""

    new: str
    mode: str = "rename"
    value: str = ""


def command_parser(prog: str, cls: type, description: str | None = None,
                   aliases: dict[str, Alias] | None = None) -> ArgumentParser:
    """The parser of one command: ``--config``, ``--print_config`` and one flag per field of
    ``cls`` (nested dataclasses and dicts take dotted flags, ``--guard.policy flag``); the
    older spellings (``aliases``) are listed in the help's epilog."""
    forms = {"rename": "{old} V = {new} V", "kv": "{old} K=V = {new}.K V", "csv": "{old} a,b = {new} [a,b]",
             "append": "{old} (repeatable) = {new} [...]", "const": "{old} = {new} {value}",
             "guard": "{old} a,b = {new}.detectors [a,b]"}
    lines = [forms[a.mode].format(old=old, new=a.new, value=a.value) for old, a in (aliases or {}).items()
             if old != a.new or a.mode != "rename"]
    epilog = ("Also accepted: " + "; ".join([*lines, "--x-y = --x_y", "a bare boolean flag = FLAG true"]) + ".")
    parser = ArgumentParser(prog=prog, description=description, exit_on_error=False, allow_abbrev=False,
                            epilog=epilog)
    parser.add_argument("--config", action=ActionConfigFile,
                        help="YAML file with any of the keys below; flags after it override it")
    parser.add_class_arguments(cls, None)
    return parser


def bool_fields(cls: type) -> set[str]:
    hints = typing.get_type_hints(cls)
    return {f.name for f in dataclasses.fields(cls) if hints.get(f.name) is bool}


def rewrite_argv(argv: Sequence[str], parser: ArgumentParser, cls: type,
                 aliases: dict[str, Alias] | None = None) -> list[str]:
    """Old spellings -> jsonargparse's: aliases, ``--out-dir`` -> ``--out_dir``, and a bare
    boolean flag (``--resume``) -> ``--resume=true``."""
    aliases = aliases or {}
    known = set(parser._option_string_actions)
    flags = {f"--{name}" for name in bool_fields(cls)}
    out: list[str] = []
    appended: dict[str, list[str]] = {}  # an append alias's target -> its values, gathered
    slot: dict[str, int] = {}  # where in ``out`` the gathered list goes: its last occurrence, so a
    # value given after --config still overrides the file
    dropped: set[int] = set()  # earlier placeholders
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("-") or tok == "--" or tok.startswith("---"):
            out.append(tok)
            continue
        name, eq, inline = tok.partition("=")
        alias = aliases.get(name)
        if alias is None and "_" in name:  # --attack_results DIR: the dashed alias's own target, given one value
            dashed = aliases.get(name.replace("_", "-"))
            value = inline if eq else (argv[i] if i < len(argv) else "")
            if dashed is not None and dashed.new == name and not value.lstrip().startswith(("[", "{")):
                alias = dashed
            elif dashed is not None and dashed.new == name and dashed.mode == "append":
                items = _json_list(value)
                if items is not None:  # a whole list sets the list; --attack-results c then adds to it
                    i += 0 if eq else 1
                    _gather(out, slot, dropped, name)
                    appended[name] = list(items)
                    continue
        if alias is None:
            head, dot, rest = name.partition(".")
            if head not in known and head.startswith("--") and head.replace("-", "_")[2:] != head[2:]:
                under = "--" + head[2:].replace("-", "_")
                if under in known:
                    name = under + dot + rest
            if name in flags and not eq and (i >= len(argv) or argv[i].lower() not in ("true", "false")):
                out.append(f"{name}=true")
                continue
            out.append(name + eq + inline)
            continue
        if alias.mode == "const":
            out.append(f"{alias.new}={alias.value}")
            continue
        if not eq:
            if i >= len(argv):
                raise ConfigError(f"{name} needs a value")
            inline = argv[i]
            i += 1
        if alias.mode == "rename":
            out.append(f"{alias.new}={inline}")
        elif alias.mode == "kv" and inline.lstrip().startswith("{"):
            out.append(f"{alias.new}={inline}")  # the whole mapping at once
        elif alias.mode == "kv":
            key, sep, value = inline.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{name} {inline!r} is not KEY=VALUE")
            out.append(f"{alias.new}.{key.strip()}={value}")
        elif alias.mode == "csv" and inline.lstrip().startswith("["):
            out.append(f"{alias.new}={inline}")  # already a list
        elif alias.mode == "csv":
            out.append(f"{alias.new}={json.dumps(split_csv(inline))}")
        elif alias.mode == "append":
            _gather(out, slot, dropped, alias.new)
            appended.setdefault(alias.new, []).append(inline)
        elif alias.mode == "guard":
            if inline.lstrip().startswith(("{", "[")):
                out.append(f"{alias.new}={inline}")
            else:
                out.append(f"{alias.new}.detectors={json.dumps(split_csv(inline))}")
        else:  # pragma: no cover - a programming error in an alias table
            raise ValueError(f"unknown alias mode {alias.mode!r}")
    for target, at in slot.items():  # by position: a flag passed through as it was (for jsonargparse to judge) stays
        out[at] = f"{target}={json.dumps(appended[target])}"
    return [t for j, t in enumerate(out) if j not in dropped]


def _gather(out: list[str], slot: dict[str, int], dropped: set[int], target: str) -> None:
    """A placeholder for ``target``'s gathered list at the end of ``out``; the earlier one is dropped."""
    if target in slot:
        dropped.add(slot[target])
    slot[target] = len(out)
    out.append(target)


def _json_list(value: str) -> list[str] | None:
    """``value`` read as a JSON list of strings, else None (left to jsonargparse to judge)."""
    try:
        items = json.loads(value)
    except ValueError:
        return None
    return items if isinstance(items, list) and all(isinstance(v, str) for v in items) else None


def split_csv(value: str | Sequence[str] | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` -> ``["a", "b"]``."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]


def build(cls: type, parser: ArgumentParser, ns: Namespace, where: str = "", validate: bool = True) -> Any:
    """The parsed namespace as an instance of ``cls`` (nested dataclasses instantiated), then
    (with ``validate``) its ``validate()``: the checks a type cannot express."""
    ns = ns.clone()
    if "config" in ns:
        del ns["config"]
    try:
        init = parser.instantiate(ns)
        obj = cls(**{f.name: init[f.name] for f in dataclasses.fields(cls) if f.name in init})
    except (TypeError, ValueError) as exc:  # chained: ROBUSTEVAL_TRACEBACK=1 shows a bug inside a constructor
        raise ConfigError(f"{where}{exc}") from exc
    check = getattr(obj, "validate", None) if validate else None
    if check is not None:
        try:
            check()
        except ConfigError as exc:
            raise ConfigError(f"{where}{exc}") from None
    if any(f.name == "raw" and not f.init for f in dataclasses.fields(cls)):
        # the whole validated config, defaults included: the run's fingerprint and provenance record it
        obj.raw = {k: v for k, v in to_dict(obj).items() if k not in (*OUTPUT_KEYS, "raw")}
    return obj


@cache
def _dict_parser(cls: type) -> ArgumentParser:
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, None)
    return parser


def from_dict(cls: type, raw: Any, where: str) -> Any:
    """A config given as a dict (a YAML file read by Python code) -> ``cls``, validated exactly
    as the command line validates it; errors start with ``where``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    try:
        check_keys(cls, raw)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    parser = _dict_parser(cls)
    try:
        ns = parser.parse_object(copy.deepcopy(raw))  # jsonargparse turns nested dicts into Namespaces
    except Exception as exc:  # jsonargparse raises ArgumentError and, for some values, others
        raise ConfigError(f"{where}: {explain(str(exc), cls, parser)}") from None
    return build(cls, parser, ns, f"{where}: ")


def from_file(cls: type, path: str | os.PathLike[str], where: str | None = None, validate: bool = True) -> Any:
    """A config file (YAML or JSON) -> ``cls``, read by the same parser as ``--config`` on the
    command line and (with ``validate``) validated exactly as it is; errors start with ``where``
    (default: the path)."""
    p = Path(path)
    where = where or f"config {p}"
    if not p.is_file():
        raise ConfigError(f"{where}: file not found")
    try:
        check_file_keys(cls, p)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    parser = _dict_parser(cls)
    try:
        ns = parser.parse_path(str(p))
    except Exception as exc:  # invalid YAML, unknown keys, wrong types: jsonargparse's errors
        raise ConfigError(f"{where}: {explain(str(exc), cls, parser)}") from None
    return build(cls, parser, ns, f"{where}: ", validate)


def to_dict(obj: Any) -> dict[str, Any]:
    """A config dataclass as plain data (what ``--print_config`` shows)."""
    return json.loads(json.dumps(dataclasses.asdict(obj), default=str))


# -- errors --------------------------------------------------------------------------------
_KEY = re.compile(r'Parser key "([^"]+)"')
_NOT_ACCEPTED = re.compile(r"Option '([^']+)' is not accepted")
_REQUIRED = re.compile(r"the following arguments are required: (.+)")
_EXPECTED = re.compile(r"Expected an? (.+?)\. Got value: (.*)")
_GROUP = re.compile(r"Group '([^']+)' does not accept option '([^']+)'")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)")
_SUBTYPES = re.compile(r"Subtypes: \[(.*)\]")
_GIVEN = re.compile(r"Given value: (.*)")


def _type_name(text: str) -> str:
    lit = re.match(r"typing\.Literal\[(.*)\]", text)
    if lit:
        return "one of " + lit.group(1).replace("'", "")
    return re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", text).replace("typing.", "").replace("NoneType", "null")


def _leaf(lines: list[str]) -> int | None:
    """Index of the most telling line of a nested jsonargparse message."""
    for pattern in (_NOT_ACCEPTED, _REQUIRED):
        for i, line in enumerate(lines):
            if pattern.search(line):
                return i
    candidates = [i for i, line in enumerate(lines) if _EXPECTED.search(line) and "NoneType" not in line]
    if candidates:
        return max(candidates, key=lambda i: len(lines[i]) - len(lines[i].lstrip()))
    return None


def _path(lines: list[str], leaf: int) -> list[str]:
    path: list[str] = []
    indent = len(lines[leaf]) - len(lines[leaf].lstrip())
    for line in reversed(lines[:leaf + 1]):
        ind = len(line) - len(line.lstrip())
        m = _KEY.search(line)
        if m and (ind < indent or line is lines[leaf]):
            path = m.group(1).split(".") + path
            indent = ind
        elif ind < indent:
            indent = ind
    return path


def _dataclass_in(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


def fields_at(root: type | None, path: Sequence[str]) -> list[str]:
    """Field names of the dataclass reached from ``root`` through ``path`` (lists and unions
    looked into); [] when the path leaves the dataclasses."""
    cls = root
    for key in path:
        if cls is None:
            return []
        cls = _dataclass_in(typing.get_type_hints(cls).get(key))
    return [f.name for f in dataclasses.fields(cls) if f.init] if cls is not None else []


def unknown_key(key: str, path: Sequence[str], known: Sequence[str]) -> str:
    """"unknown key 'optoins' in suites.victims; did you mean 'options'?" (else the ``known``
    keys of that level)."""
    hint = did_you_mean(key, known)
    where = ".".join(path)
    at = f"in {where}" if where else "at the top level"
    allowed = f" (allowed: {', '.join(known)})" if known and not hint else ""
    return f"unknown key {key!r} {at}{hint}{allowed}"


def _takes_mapping(tp: Any) -> bool:
    """Whether a field of type ``tp`` accepts a free-form mapping (``dict[str, Any]``, or a
    union with one): its keys are not config keys."""
    if tp is dict or typing.get_origin(tp) is dict:
        return True
    return any(_takes_mapping(arg) for arg in typing.get_args(tp))


def check_keys(cls: type, raw: Any, path: tuple[str, ...] = ()) -> None:
    """Raise :class:`ConfigError` for the first key (in file order) of a config for ``cls`` that
    no dataclass field takes, named with its full place, list positions included ("unknown key
    'trian' in suites[0].victims[1]; did you mean 'train'?"). Dotted keys ("guard.policy") are
    read as nested ones, as jsonargparse reads them. jsonargparse reports unknown keys too, but
    without the list position, and not at all for a misspelled key holding an empty mapping
    (``optoins: {}``): it flattens nested mappings into dotted keys, so an empty one leaves no
    key behind to reject. Free-form mappings (``options``) are not looked into."""
    if not isinstance(raw, dict) or not dataclasses.is_dataclass(cls):
        return
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    for key, value in raw.items():
        key = str(key)
        if key.startswith("__") and key.endswith("__"):  # jsonargparse's own (__path__)
            continue
        if "." in key:  # a dotted key ("guard.policy: flag"), which jsonargparse takes too
            key, rest = key.split(".", 1)
            value = {rest: value}
        if key not in known:
            raise ConfigError(unknown_key(key, path, known))
        tp = hints.get(key)
        sub = _dataclass_in(tp)
        if sub is None or _takes_mapping(tp):
            continue
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                check_keys(sub, item, (*path, f"{key}[{i}]"))
        else:
            check_keys(sub, value, (*path, key))


def check_file_keys(cls: type, path: str | os.PathLike[str]) -> None:
    """:func:`check_keys` on a YAML or JSON config file, or on the config text itself
    (``--config '{...}'``, which jsonargparse also accepts); what does not read as YAML is left
    to jsonargparse, which names the problem."""
    import yaml

    is_file = Path(path).is_file()
    try:
        text = Path(path).read_text(encoding="utf-8") if is_file else str(path)
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        if not is_file:
            return
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"not valid YAML{where}: {exc.problem or exc.context}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    check_keys(cls, raw)


def _config_files(args: Sequence[str]) -> list[str]:
    """The files named by ``--config FILE`` / ``--config=FILE`` in a command line."""
    files = []
    for i, tok in enumerate(args):
        if tok == "--config" and i + 1 < len(args):
            files.append(args[i + 1])
        elif tok.startswith("--config="):
            files.append(tok.partition("=")[2])
    return files


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def explain(message: str, root: type | None = None, parser: ArgumentParser | None = None) -> str:
    """jsonargparse's (often nested, many-line) message as one line naming the key."""
    unknown = _UNRECOGNIZED.search(message)
    if unknown:
        flag = unknown.group(1).split()[0]
        options = sorted(o for o in (parser._option_string_actions if parser else ())
                         if o.startswith("--"))
        shown = flag.partition("=")[0]
        return f"unknown option {shown}{did_you_mean(shown, options)} (see --help)"
    group = _GROUP.search(message)
    if group:
        message = f'Parser key "{group.group(1)}":\n  Option {group.group(2)!r} is not accepted'
    lines = [line for line in message.splitlines() if line.strip()]
    leaf = _leaf(lines)
    if leaf is None:
        keys = [m.group(1) for line in lines if (m := _KEY.search(line))]
        where = keys[-1] if keys else "value"
        subtypes, given = _SUBTYPES.search(message), _GIVEN.search(message)
        if subtypes and given:
            kinds = [_type_name(t.strip()) for t in subtypes.group(1).split(", ") if "NoneType" not in t]
            return f"{where}: expected {' or '.join(kinds)}, got {given.group(1).strip()!r}"
        rest = [_KEY.sub("", line).strip(" :") for line in lines]
        return f"{where}: " + " ".join(r for r in rest if r) if keys else " ".join(rest)
    path = _path(lines, leaf)
    line = lines[leaf].strip()
    where = ".".join(path)
    m = _NOT_ACCEPTED.search(line)
    if m:
        return unknown_key(m.group(1), path, fields_at(root, path))
    m = _REQUIRED.search(line)
    if m:
        keys = ", ".join(k.strip().rpartition(".")[2] for k in m.group(1).split(","))
        return f"{where}: missing required key(s) {keys}" if where else f"missing required option(s) {keys}"
    m = _EXPECTED.search(line)
    assert m is not None
    got = m.group(2).strip()
    expected = _type_name(m.group(1))
    hint = ""
    if expected.startswith("one of "):
        hint = did_you_mean(got, [c.strip() for c in expected[7:].split(",")])
    return f"{where or 'value'}: expected {expected}, got {got!r}{hint}"


def parse_command(parser: ArgumentParser, cls: type, argv: Sequence[str],
                  aliases: dict[str, Alias] | None = None) -> Any:
    """``argv`` (old spellings welcome) -> a validated ``cls``; ``--help`` and
    ``--print_config`` print and exit as usual."""
    args = rewrite_argv(argv, parser, cls, aliases)
    for path in _config_files(args):
        try:
            check_file_keys(cls, path)
        except ConfigError as exc:
            raise ConfigError(f"config {path}: {exc}") from None
    try:
        ns = parser.parse_args(args)
    except SystemExit:
        raise
    except Exception as exc:
        raise ConfigError(explain(str(exc), cls, parser)) from None
    return build(cls, parser, ns)
