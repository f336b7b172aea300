"""Append-only JSONL results that survive a kill and resume without loss or duplicates, the
logged scoring loop built on them, and the provenance every result file carries."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.errors import DataFormatError, FolderBusyError, RobustevalError, RunMismatchError
from robusteval.types import Sample

FINGERPRINT_KEY = "_fingerprint"


class JsonlLog:
    """One JSON object per line, keyed by ``key``; a torn last line (killed mid-write) is
    dropped on open, so a resumed run rewrites exactly the rows that were not finished.

    With ``fingerprint`` (what produced the log: see :func:`run_fingerprint`) a new log starts
    with a header line ``{"_fingerprint": ...}``, and ``resume`` continues an existing log only
    when its header is the same: a different run is refused with :class:`RunMismatchError`
    naming the keys that differ, so rows of one run are never relabelled as another's.
    """

    def __init__(self, path: str | os.PathLike[str], key: str = "id", resume: bool = False,
                 fingerprint: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, dict[str, Any]] = {}
        self.fingerprint = canonical(fingerprint) if fingerprint is not None else None
        self.header: dict[str, Any] | None = None
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise FileExistsError(f"{self.path} exists: pass --resume to continue it, or "
                                      "choose another --out-dir")
            self._load()
            if self.fingerprint is not None and self.header is None and not self.rows:
                # killed while writing its header: nothing was kept, so this is the run's start
                self._write([json.dumps({FINGERPRINT_KEY: self.fingerprint}, ensure_ascii=False) + "\n"])
                self.header = self.fingerprint
            elif self.fingerprint is not None:
                check_same_run(self.path, self.header, self.fingerprint)
        elif self.fingerprint is not None:
            self._write([json.dumps({FINGERPRINT_KEY: self.fingerprint}, ensure_ascii=False) + "\n"])
            self.header = self.fingerprint

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn write: drop it
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise DataFormatError(self.path, "corrupt line (not JSON)",
                                      line=raw[:good_end].count(b"\n") + 1) from None
            good_end += len(line)
            if isinstance(obj, dict) and FINGERPRINT_KEY in obj:
                self.header = obj[FINGERPRINT_KEY]
                continue
            self.rows[str(obj[self.key])] = obj
        if good_end != len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)

    def _write(self, lines: list[str]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("".join(lines))
            fh.flush()
            os.fsync(fh.fileno())

    def __contains__(self, key: object) -> bool:
        return str(key) in self.rows

    def append(self, rows: Iterable[Mapping[str, Any]], replace: bool = False) -> None:
        """Write ``rows``; a row whose key is logged already is skipped, or with ``replace``
        written again, and then it is the key's row (readers keep a key's later row)."""
        lines = []
        written: set[str] = set()
        for row in rows:
            k = str(row[self.key])
            if (k in self.rows and not replace) or k in written:
                continue
            written.add(k)
            self.rows[k] = dict(row)
            lines.append(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")
        if lines:
            self._write(lines)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)

    def to_frame(self, samples: Sequence[Sample] | None = None) -> Any:
        """The rows as a pandas DataFrame (:func:`robusteval.frames.to_frame`)."""
        from robusteval.frames import to_frame

        return to_frame(self, samples)


def read_jsonl(path: str | os.PathLike[str], dedupe: bool = True) -> list[dict[str, Any]]:
    """Rows of a JSONL file without modifying it: a torn last line (a killed writer) is
    skipped, a corrupt line before the end is an error naming the line. A key written twice
    (two processes that resumed one folder at once) keeps its place and its later row, as
    :class:`JsonlLog` reads it, so no reader counts it twice: ``key`` for attack logs and
    suspicion caches, ``id`` for score logs."""
    rows = _read(path)[1]
    # a field every row has, and never empty (rows of an old schema may all carry key "")
    field = next((k for k in ("key", "id") if rows and all(r.get(k) not in (None, "") for r in rows)), None)
    if field is None or not dedupe:  # dedupe=False: every line as written (to name a bad one's line)
        return rows
    latest: dict[str, dict[str, Any]] = {}
    for r in rows:
        latest[str(r[field])] = r
    return list(latest.values())


def failed_rows(folder: str | os.PathLike[str]) -> dict[str, int]:
    """Per result file under ``folder`` (its path relative to the folder), how many of its rows
    rest on a failed LLM request scored at the midpoint (``llm_failed`` in a score or suspicion
    row, ``meta.llm_failed`` in an attack row, a fitted state in ``fitted.json``): what a
    ``--resume`` asks again for. Files without such rows are left out."""
    def marked(row: Any) -> bool:
        meta = row.get("meta") if isinstance(row, dict) else None
        return isinstance(row, dict) and bool(row.get("llm_failed") or (isinstance(meta, dict)
                                                                      and meta.get("llm_failed")))

    root = Path(folder)
    out: dict[str, int] = {}
    for p in sorted(root.rglob("*.jsonl")):
        try:
            n = sum(map(marked, read_jsonl(p)))
        except DataFormatError:
            continue  # not a result file of ours: its own reader names what is wrong with it
        if n:
            out[p.relative_to(root).as_posix()] = n
    for p in sorted(root.rglob("fitted.json")):
        try:
            states = read_json(p, "a fitted state file")
        except DataFormatError:
            continue
        n = sum(1 for state in (states.values() if isinstance(states, dict) else ())
                if isinstance(state, dict) and state.get("llm_failed"))
        if n:
            out[p.relative_to(root).as_posix()] = n
    return out


def read_json(path: str | os.PathLike[str], missing: str) -> Any:
    """A JSON file's content; a missing file or invalid JSON is a DataFormatError naming the
    file (``missing`` says how to make one) and the line."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFormatError(p, missing) from None
    except json.JSONDecodeError as e:
        raise DataFormatError(p, f"not JSON: {e.msg}", line=e.lineno) from None


def read_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The fingerprint header of a log written by :class:`JsonlLog` (None when it has none)."""
    return _read(path)[0]


def _read(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    p = Path(path)
    rows = []
    header = None
    lines = p.read_bytes().splitlines(keepends=True)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if n == len(lines) and not line.endswith(b"\n"):
                import warnings

                warnings.warn(f"{p}: line {n} is incomplete (its writer stopped mid-line): skipped, "
                              f"{len(rows)} complete rows read", stacklevel=3)
                break
            raise DataFormatError(p, f"not JSON: {getattr(e, 'msg', e)}", line=n) from None
        if isinstance(obj, dict) and FINGERPRINT_KEY in obj:
            header = obj[FINGERPRINT_KEY]
        else:
            rows.append(obj)
    return header, rows


def canonical(obj: Any) -> Any:
    """``obj`` as plain JSON values (tuples -> lists, numpy -> Python), for comparisons."""
    return json.loads(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=_jsonable))


def differing_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two fingerprints differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            out += differing_keys(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [prefix.rstrip(".") or "(whole)"]


def check_same_run(path: Path, recorded: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> None:
    """Refuse to resume ``path`` unless it was written by the run ``wanted`` describes."""
    if recorded is None:
        raise RunMismatchError(f"{path} records no run fingerprint (written by another robusteval version "
                               "or by hand): --resume cannot check it is the same run; use a new --out-dir")
    diff = differing_keys(canonical(recorded), canonical(wanted))
    if diff:
        shown = "; ".join(f"{k}: {_lookup(recorded, k)!r} -> {_lookup(wanted, k)!r}" for k in diff[:8])
        raise RunMismatchError(f"{path} was written by a different run ({len(diff)} setting(s) differ: {shown}"
                               f"{' ...' if len(diff) > 8 else ''}); --resume continues only the same run: "
                               "rerun with the same settings, or use a new --out-dir")


def _lookup(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, Mapping):
            return None
        d = d.get(part)
    value = d
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


#: the lock file a command holds in its ``--out-dir`` while it writes there (:func:`exclusive_folder`)
FOLDER_LOCK = ".robusteval.lock"


def distributed_helper() -> bool:
    """Whether this process is a distributed trainer's extra process (Lightning's DDP launcher
    reruns the command line with ``LOCAL_RANK``/``RANK``/``NODE_RANK`` set): it works for the
    process that holds the output folder's lock and must not take it."""
    return any(os.environ.get(k, "0") not in ("", "0") for k in ("LOCAL_RANK", "RANK", "NODE_RANK"))


@contextlib.contextmanager
def exclusive_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``out``'s writer lock while a command writes there, so a second process pointed at
    the same folder (two ``--resume`` runs of one folder, a run started twice) is refused with an
    error naming the folder instead of both appending to the same logs and training into the same
    checkpoints. The lock is the operating system's (``filelock``; an ``flock`` on Linux and
    macOS), so it is released when the process ends, even by ``kill -9``; the empty lock file
    stays and is ignored. A folder this call made and nothing was written to (a command refused
    before any work) is removed again. One process may take the lock again (nested commands)."""
    import warnings

    import filelock

    folder = Path(out)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(folder / FOLDER_LOCK, timeout=0, thread_local=False, is_singleton=True)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise FolderBusyError(f"{folder} is being written by another robusteval process (it holds "
                              f"{folder / FOLDER_LOCK}): wait for it to finish, or choose another "
                              "--out-dir") from None
    except NotImplementedError:  # a file system without file locks (some network mounts)
        warnings.warn(f"{folder}: this file system has no file locks, so nothing stops a second process "
                      "from writing this folder at the same time", RuntimeWarning, stacklevel=3)
        yield folder
        return
    try:
        yield folder
    finally:
        # a folder made for a command that wrote nothing is removed again: while the lock is held
        # where an open file can be deleted (so no other process takes the lock in between),
        # after releasing it on Windows, where it cannot
        unused = made and folder.is_dir() and [p.name for p in folder.iterdir()] == [FOLDER_LOCK]
        if unused and os.name != "nt":
            _remove_unused(folder)
        lock.release()
        if unused and os.name == "nt":
            _remove_unused(folder)


def _remove_unused(folder: Path) -> None:
    try:
        (folder / FOLDER_LOCK).unlink()
        folder.rmdir()
    except OSError:
        pass  # a file appeared meanwhile, or another process holds the lock: it is theirs now


def refuse_occupied(out: Path, resume: bool) -> None:
    """Without ``resume``, a folder that holds a run's fingerprint is refused (:func:`claim_folder`
    does this too; a command calls it first to fail before slow work that precedes the claim)."""
    if not resume and (Path(out) / "fingerprint.json").is_file():
        raise FileExistsError(f"{out} holds an earlier run: pass --resume to continue it, or choose "
                              "another --out-dir")


def claim_folder(out: Path, fingerprint: Mapping[str, Any], resume: bool) -> None:
    """Record ``fingerprint`` in ``out/fingerprint.json`` for a new run; on ``resume`` continue
    only the run recorded there (:class:`RunMismatchError` otherwise); without ``resume`` an
    existing run's folder is refused."""
    path = Path(out) / "fingerprint.json"
    if path.is_file():
        refuse_occupied(out, resume)
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataFormatError(path, f"corrupt run fingerprint: {exc}") from None
        check_same_run(path.parent, recorded, fingerprint)
        return
    if resume and Path(out).is_dir() and any(p.name != FOLDER_LOCK for p in Path(out).iterdir()):
        check_same_run(Path(out), None, fingerprint)  # outputs without a fingerprint: refuse
    write_json(path, canonical(fingerprint))


def code_version() -> dict[str, Any]:
    from robusteval import __version__

    return {"robusteval": __version__, "git_commit": git_commit()}


def fingerprint_data_dir(given: str | None) -> str | None:
    """The data folder a run reads, as its fingerprint records it: the one given, else
    ``$ROBUSTEVAL_DATA``, resolved to an absolute path (so ``../shared/data`` and its absolute
    spelling are one folder, and a resume pointed at another folder is refused)."""
    folder = given if given is not None else os.environ.get("ROBUSTEVAL_DATA")
    return str(Path(folder).expanduser().resolve()) if folder else None


def samples_digest(samples: Sequence[Sample], ratings: bool = False) -> dict[str, Any]:
    """How many samples and a digest of every text a metric, a detector or an attack may read
    (id, task, response, context, every reference, the fact, the answer, the declared language):
    a different dataset, split, selection or ``--limit``, or an edited fact, gives a different
    digest. (Version 2: the first digest hashed the response, context and first reference only,
    so a resume after the facts changed mixed scores ``against: fact`` of the two files.)"""
    import hashlib

    h = hashlib.sha256()
    for s in samples:
        # with ratings (a run that trains on them), the human judgments too
        human = sorted((s.human or {}).items()) if ratings else None
        h.update(json.dumps([s.id, s.task, s.response, list(s.context), s.reference, list(s.references), s.fact,
                             s.answer, (s.meta or {}).get("language"), human],
                            ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return {"n": len(samples), "sha256": h.hexdigest()[:20], "version": 2}


def run_fingerprint(**parts: Any) -> dict[str, Any]:
    """What identifies a run: the given parts (command, config, victim, attacks, seed, limit,
    dataset...) plus the code version, as plain JSON."""
    return canonical({**parts, "code": code_version()})


def _jsonable(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (temp file + rename). The temporary name carries the process id,
    so processes writing the same file at once (the ranks of a multi-GPU fit) never rename
    each other's half-written file: the last rename wins, whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=_jsonable) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The checkout's HEAD when this process first asked: the code it loaded. A run's fingerprint
    (at its start) and its report's provenance (at its end) name the same commit even when the
    checkout moves on while the run goes (a report used to name the later commit)."""
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(config: dict[str, Any] | None = None) -> dict[str, Any]:
    pkgs = {}
    for name in ("robusteval", "torch", "transformers", "bert-score", "sacrebleu", "rouge-score",
                 "nltk", "spacy", "peft", "lightning", "textattack", "numpy", "scipy"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = None
    from robusteval import execution

    return {"created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(), "platform": platform.platform(),
            "git_commit": git_commit(), "packages": pkgs, "config": config or {},
            "execution": execution.current().describe()}  # where it ran (not part of any fingerprint)


def guard_row(metric: Any, sample: Sample) -> dict[str, Any]:
    """``{"guard": details}`` for a guarded metric's last scoring of ``sample``, else ``{}``."""
    details = getattr(metric, "details", None)
    found = details(sample) if callable(details) else None
    return {"guard": found} if found is not None else {}


def counters(metric: Any) -> dict[str, int]:
    """Every integer counter in ``metric.report()`` (fallbacks, clipping, guard flags, LLM
    retries...), flattened to dotted keys."""
    report = metric.report() if callable(getattr(metric, "report", None)) else {}
    out: dict[str, int] = {}

    def walk(obj: Any, prefix: str) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                walk(v, f"{prefix}{k}.")
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{prefix}{i}.")
        elif isinstance(obj, int) and not isinstance(obj, bool):
            out[prefix.rstrip(".")] = obj

    walk(report, "")
    return out


def counter_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What changed between two :func:`counters` snapshots (non-zero differences only)."""
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] != before.get(k, 0)}


def merge_counts(*parts: Mapping[str, int]) -> dict[str, int]:
    """The key-wise sum of counter dicts (sorted keys)."""
    total: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + int(v)
    return dict(sorted(total.items()))


def sum_counters(rows: Iterable[Mapping[str, Any]], field: str = "counters") -> dict[str, int]:
    """The counters of a run, summed from its rows (never from process memory, so a resumed
    run reports the whole run)."""
    return merge_counts(*(r.get(field) or {} for r in rows))


def metric_identity(metric: Any) -> str:
    repro = getattr(metric, "reproducibility", None)
    return repro() if callable(repro) else f"{type(metric).__module__}.{type(metric).__qualname__}"


def score_with_log(metric: Any, samples: Sequence[Sample], log_path: Path, resume: bool,
                   chunk: int = 32, desc: str = "scoring",
                   fingerprint: Mapping[str, Any] | None = None) -> np.ndarray:
    """Score ``samples`` in chunks, appending ``{id, score}`` rows to ``log_path`` as they
    finish; with ``resume`` rows already there are reused, so a killed run loses nothing.

    The log's fingerprint is the metric's reproducibility string, a digest of the samples and
    ``fingerprint`` (the caller's settings): resuming with anything else is refused. The last
    row of each chunk carries the change of the metric's counters over that chunk
    (``counters``), so :func:`sum_counters` over the log gives the run's totals.

    A sample whose request failed under an LLM judge's ``on_llm_error="midpoint"`` is scored at
    the midpoint for this run, counted (``llm_failed`` in the counters) and its row is marked
    ``llm_failed: n`` (the judge names the failed samples: :mod:`robusteval.metrics.inner`). A
    resume scores exactly those rows again -- a failure is never served as a finished score --
    and keeps every other row. The counters stay the run's history: a retried row takes over the
    counters of the row it replaces, so ``llm_failed`` counts every failed request of the run,
    and :func:`score_summary` counts the rows still failed (``llm_failed_rows``).

    Behind a guard with policy ``reject`` a refused response is logged with ``score: null``
    (and the guard's details) and returned as NaN: it has no score, and the correlation code
    drops it and counts it (``dropped_nonfinite``) instead of the run aborting."""
    from tqdm import tqdm

    from robusteval import execution

    ids = [s.id for s in samples]
    if len(set(ids)) != len(ids):
        first: dict[str, int] = {}
        repeat = next(i for k, i in enumerate(ids) if first.setdefault(i, k) != k)
        raise RobustevalError(f"sample ids are not unique (first repeated id: {repeat!r}, at positions "
                              f"{[k for k, i in enumerate(ids) if i == repeat]}); cannot log scores by id")
    fp = {"metric": metric_identity(metric), "samples": samples_digest(samples), **(fingerprint or {})}
    log = JsonlLog(log_path, key="id", resume=resume, fingerprint=run_fingerprint(**fp))
    todo = [s for s in samples if s.id not in log or log.rows[s.id].get("llm_failed")]
    with tqdm(total=len(samples), initial=len(samples) - len(todo), desc=desc, unit="sample",
              dynamic_ncols=True, leave=False) as bar:
        for _, rows in execution.current().map(ScoreWorker, [metric], "run", execution.chunks(todo, chunk),
                                               desc=desc, label=execution.span):
            for row in rows:  # a retried row keeps the run's history of the row it replaces
                old = log.rows.get(str(row["id"]))
                if old is not None and old.get("counters"):
                    row["counters"] = merge_counts(old["counters"], row.get("counters") or {})
            log.append(rows, replace=True)
            bar.update(len(rows))
    from robusteval.frames import export_tables

    export_tables(log_path, samples)  # <stem>.csv and .parquet beside the log, with the texts
    return np.array([np.nan if log.rows[i]["score"] is None else log.rows[i]["score"] for i in ids], dtype=float)


class ScoreWorker:
    """Scores one chunk of samples: the unit of :func:`score_with_log` an executor runs. Each
    row is ``{id, score}`` (None for a refused response) with the guard's details, and
    ``llm_failed: n`` when n of the sample's requests failed and it got a fallback score; the
    last row carries the change of the metric's counters over the chunk."""

    def __init__(self, metric: Any) -> None:
        self.metric = metric

    def run(self, part: Sequence[Sample]) -> list[dict[str, Any]]:
        from robusteval.metrics.base import score_or_refuse
        from robusteval.metrics.inner import failed_since, failure_marks

        before, marks = counters(self.metric), failure_marks(self.metric)
        scores, _ = score_or_refuse(self.metric, part)  # a refused response has no score (NaN), not an abort
        delta = counter_delta(before, counters(self.metric))
        failed = failed_since(marks)
        rows = [{"id": s.id, "score": float(v) if np.isfinite(v) else None, **guard_row(self.metric, s),
                 **({"llm_failed": failed[s.id]} if failed[s.id] else {})}
                for s, v in zip(part, scores, strict=True)]
        if delta:
            rows[-1]["counters"] = delta
        return rows


def score_summary(log_path: Path, ids: Sequence[str]) -> dict[str, Any]:
    """n, mean, guard flags and counters of the rows of ``ids`` in a score log: what a
    ``summary.json`` reports, computed from the log alone."""
    rows = {str(r["id"]): r for r in read_jsonl(log_path)}
    mine = [rows[i] for i in ids if i in rows]
    scores = np.array([r["score"] for r in mine if r["score"] is not None], dtype=float)
    flagged: dict[str, int] = {}
    guarded = [r for r in mine if r.get("guard")]
    for r in guarded:
        for name in r["guard"].get("flagged") or []:
            flagged[name] = flagged.get(name, 0) + 1
    return {"n": len(mine), "missing": len(ids) - len(mine), "refused": sum(r["score"] is None for r in mine),
            "llm_failed_rows": sum(bool(r.get("llm_failed")) for r in mine),
            "mean": float(scores.mean()) if len(scores) else None,
            "guard": {"scored": len(guarded), "flagged_any": sum(bool(r["guard"].get("flagged")) for r in guarded),
                      "flagged": dict(sorted(flagged.items()))} if guarded else None,
            "counters": sum_counters(mine)}
