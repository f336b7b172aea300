"""The Metric contract (DESIGN.md): ``score(samples) -> ndarray`` of 0-100, higher is better.

:class:`Metric` does the shared input checks once, so every metric treats bad input the
same way:

* every text of every sample must be valid Unicode (no lone surrogates): else
  :class:`InputError` naming the sample and the field (:func:`robusteval.text.check_sample_text`);
* a sample whose response is empty or *blank* (whitespace, zero-width, control or other
  invisible characters only: :func:`robusteval.text.is_blank`) raises :class:`InputError`
  naming the sample (``on_empty="error"``, the default), or gets ``empty_score`` (default
  0.0) and is *counted* in :attr:`Metric.fallbacks` and :meth:`report` (``on_empty="floor"``);
* a reference-based metric given a sample without a (visible) reference raises
  :class:`InputError`;
* a score that comes back NaN/inf is an error (it never leaks into results);
* scores are clipped to [0, 100]; how many were clipped is counted too.
"""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.columns import REWARD_REFERENCE_COLUMNS
from robusteval.errors import InputError, RobustevalError
from robusteval.text import check_sample_text, is_blank
from robusteval.types import TASKS, Sample

ON_EMPTY = ("error", "floor")
AGAINST = ("reference", "first_reference", "context", "last_turn", "fact")


class Metric(ABC):
    """Base class of every victim metric. Subclasses implement :meth:`_score`."""

    name: ClassVar[str] = "metric"
    requires_reference: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = TASKS
    #: the quality aspect the metric scores (one of :data:`robusteval.aspects.ASPECTS`, or a
    #: custom one); the expectation criterion of Hu et al. 2024 (Table 19) depends on it
    aspect: str = "Overall_quality"

    def __init__(self, on_empty: str = "error", empty_score: float = 0.0) -> None:
        if on_empty not in ON_EMPTY:
            raise ValueError(f"on_empty must be one of {ON_EMPTY}, got {on_empty!r}")
        self.on_empty = on_empty
        self.empty_score = float(empty_score)
        if not 0.0 <= self.empty_score <= 100.0:  # a score like any other (NaN fails too)
            raise ValueError(f"empty_score must be a score in [0, 100], got {empty_score!r}")
        self.fallbacks: Counter[str] = Counter()
        #: ids of the samples whose scoring fell back because their request failed, in order
        #: (an LLM judge under ``on_llm_error="midpoint"``): see :mod:`robusteval.metrics.inner`
        self.failed_requests: list[str] = []

    # -- public API ---------------------------------------------------------------------
    def score(self, samples: Sequence[Sample]) -> np.ndarray:
        """One float per sample, 0-100, higher is better; deterministic."""
        samples = list(samples)
        out = np.full(len(samples), np.nan, dtype=np.float64)
        todo: list[int] = []
        for i, s in enumerate(samples):
            check_sample_text(s)
            if is_blank(s.response):
                if self.on_empty == "error":
                    raise InputError(s.id, "response", f"empty or invisible-only response; {self.name} "
                                     "cannot score it (pass on_empty='floor' to score it as "
                                     "empty_score and count it)")
                out[i] = self.empty_score
                self.fallbacks["empty_response"] += 1
                continue
            self.check_sample(s)
            todo.append(i)
        if todo:
            raw = np.asarray(self._score([samples[i] for i in todo]), dtype=np.float64)
            if raw.shape != (len(todo),):
                raise RobustevalError(f"{self.name} returned {raw.shape} scores for {len(todo)} samples")
            bad = ~np.isfinite(raw)
            if bad.any():
                first = samples[todo[int(np.flatnonzero(bad)[0])]]
                raise InputError(first.id, "response", f"{self.name} produced a non-finite score")
            clipped = (raw < 0) | (raw > 100)
            if clipped.any():
                self.fallbacks["clipped_to_0_100"] += int(clipped.sum())
            out[todo] = np.clip(raw, 0.0, 100.0)
        return out

    def screened(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(scores, refused): :meth:`score` and which samples the metric refused to score (their
        score NaN). A plain metric refuses nothing; a guard with policy ``reject`` refuses the
        texts it flags instead of raising (``robusteval.detectors.guarded``)."""
        return self.score(samples), np.zeros(len(samples), dtype=bool)

    def leaves_cpu_idle(self) -> bool:
        """Whether scoring leaves this machine's CPU mostly free (a GPU does the work, or a
        server answers). A guard then parses its detectors' texts in a helper process while the
        metric scores (:func:`robusteval.detectors.parsing.prefetched`); beside a metric that
        keeps the cores busy the helper only competes with it (BERTScore on 2 CPU cores: 1.47x
        instead of 1.34x, BENCHMARKS §10). True when the metric's ``device`` is cuda or mps."""
        return on_accelerator(getattr(self, "device", "cpu"))

    def check_sample(self, sample: Sample) -> None:
        """Raise InputError if ``sample`` lacks what this metric needs."""
        if self.requires_reference and all(is_blank(r) for r in sample.all_references()):
            raise InputError(sample.id, "reference", f"{self.name} needs a non-empty reference")

    def reproducibility(self) -> str:
        """A string that pins model, settings and versions (like bert-score's hash code); an
        empty-response policy other than the default (``on_empty="error"``) is part of it, since
        ``empty_score`` is what such a response scores."""
        from robusteval import __version__

        empty = "" if self.on_empty == "error" else f"|on_empty={self.on_empty},empty_score={self.empty_score:g}"
        return (f"{self.name}|{self.signature()}{empty}|robusteval={__version__}"
                f"|python={platform.python_version()}")

    def signature(self) -> str:
        return ""

    def report(self) -> dict[str, Any]:
        """Counters of fallbacks since the metric was loaded (empty responses, clipping...)."""
        return {"metric": self.name, "reproducibility": self.reproducibility(),
                "fallbacks": dict(self.fallbacks)}

    # -- the interfaces users know (docs/interfaces.md) --------------------------------
    def compute(self, *, predictions: Sequence[str], references: Sequence[Any] | None = None,
                sources: Sequence[Any] | None = None, task: str | None = None, ids: Sequence[str] | None = None,
                facts: Sequence[str | None] | None = None, answers: Sequence[str | None] | None = None,
                as_frame: bool = False, **options: Any) -> Any:
        """Score parallel lists the way Hugging Face ``evaluate``'s ``compute`` does.

        ``references``: per prediction a string, a list of strings (several references) or
        None; ``sources``: per prediction the document (a string) or the dialogue context as a
        list of turns, oldest first; ``task``: by default the metric's only task, else
        ``dialogue`` when a source is a list of turns, else ``summarization``
        (:func:`robusteval.types.samples_from_lists` builds the samples; sample ids are the
        item indexes unless ``ids`` are given, so an error names the item). Lists of another
        length than ``predictions`` are an error; an empty or invisible-only prediction
        follows the metric's ``on_empty`` (an :class:`InputError` naming the item, or
        ``empty_score`` counted in ``fallbacks``).

        Returns ``{<metric name>: mean score, "scores": [0-100 per item], "n": ...,
        "fallbacks": {what fell back in this call}, "reproducibility": ...}``, plus what the
        metric adds (:meth:`compute_extras`: a guard's flags, a smoothed metric's certified
        bounds); ``options`` go to it. A score a ``reject`` guard refused is None and left out
        of the mean. ``as_frame=True``: a pandas DataFrame, one row per item with its texts
        and per-item values, the rest in ``df.attrs``.
        """
        from robusteval.types import samples_from_lists

        if task is None and len(self.tasks) == 1:
            task = self.tasks[0]
        samples = samples_from_lists(predictions, references, sources, task=task, ids=ids, facts=facts,
                                     answers=answers)
        before = dict(self.report().get("fallbacks") or {})
        scores, _ = self.screened(samples)
        after = dict(self.report().get("fallbacks") or {})
        summary, per_item = self.compute_extras(samples, scores, **options)
        finite = scores[np.isfinite(scores)]
        result: dict[str, Any] = {
            self.name: float(finite.mean()) if len(finite) else None,
            "scores": [float(v) if np.isfinite(v) else None for v in scores], "n": len(samples),
            "fallbacks": {k: int(v) - int(before.get(k, 0)) for k, v in sorted(after.items())
                          if int(v) != int(before.get(k, 0))},
            "reproducibility": self.reproducibility(), **summary, **per_item}
        if as_frame:
            from robusteval.frames import compute_frame

            return compute_frame(samples, result, ["scores", *per_item])
        return result

    def compute_extras(self, samples: Sequence[Sample], scores: np.ndarray,
                       **options: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """What :meth:`compute` adds for this metric after ``scores`` of ``samples``: (summary
        values, per-item lists). A plain metric adds nothing and takes no options; a guard adds
        its flags, a smoothed metric its certified bounds."""
        if options:
            raise TypeError(f"{self.name}.compute() got unexpected keyword argument(s) {', '.join(sorted(options))}")
        return {}, {}

    def as_reward_fn(self, **options: Any) -> RewardFunction:
        """This metric as a TRL reward function (:class:`RewardFunction`; ``options`` there)."""
        return RewardFunction(self, **options)

    # -- to implement -------------------------------------------------------------------
    @abstractmethod
    def _score(self, samples: list[Sample]) -> np.ndarray:
        """Scores for samples that passed the checks."""


class PairMetric(Metric):
    """A metric comparing the response with one or more texts of the sample.

    ``against`` picks them: ``reference`` (all references, best score kept),
    ``first_reference`` (the dataset's main reference alone, e.g. SummEval's original CNN/DM
    highlight: the single-reference scoring of Mu & Lim's Table 2), ``context`` (the whole
    context), ``last_turn`` (the last context element) or ``fact``. ``context``,
    ``last_turn`` and ``fact`` turn the metric into a reference-free proxy; every choice shows in
    :meth:`reproducibility`.
    """

    requires_reference: ClassVar[bool] = True

    def __init__(self, against: str = "reference", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if against not in AGAINST:
            raise ValueError(f"against must be one of {AGAINST}, got {against!r}")
        self.against = against

    def targets(self, sample: Sample) -> tuple[str, ...]:
        if self.against == "reference":
            refs = tuple(r for r in sample.all_references() if not is_blank(r))
        elif self.against == "first_reference":
            refs = tuple(r for r in sample.all_references()[:1] if not is_blank(r))
        elif self.against == "context":
            refs = (sample.source_text(),) if not is_blank(sample.source_text()) else ()
        elif self.against == "last_turn":
            refs = (sample.context[-1],) if sample.context and not is_blank(sample.context[-1]) else ()
        else:
            refs = (sample.fact,) if sample.fact is not None and not is_blank(sample.fact) else ()
        return refs

    def check_sample(self, sample: Sample) -> None:
        if not self.targets(sample):
            field = "reference" if self.against in ("reference", "first_reference") else self.against
            raise InputError(sample.id, field, f"{self.name} needs a non-empty {field} "
                             f"(against={self.against!r})")

    def signature(self) -> str:
        return f"against={self.against}"


def on_accelerator(device: Any) -> bool:
    """Whether ``device`` (a string or a torch.device) is a GPU: cuda or mps."""
    return str(device).split(":")[0] in ("cuda", "mps")


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when an NVIDIA GPU is visible here, else ``"mps"`` on Apple silicon
    (the device Lightning's ``accelerator="auto"`` picks there, so a trainer and the metric it
    feeds agree), else ``"cpu"``; any other device as given."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def score_or_refuse(metric: Any, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """``metric.screened(samples)`` for any object with ``score`` (attack victims and score logs
    take metric-like objects too): refused samples are marked, never an abort."""
    screened = getattr(metric, "screened", None)
    if callable(screened):
        scores, refused = screened(samples)
        return np.asarray(scores, dtype=float), np.asarray(refused, dtype=bool)
    return np.asarray(metric.score(samples), dtype=float), np.zeros(len(samples), dtype=bool)


#: dataset columns tried, in order, as the reference of a reward function (TRL passes every
#: extra column of the dataset to the reward function as a keyword argument)
REFERENCE_COLUMNS = REWARD_REFERENCE_COLUMNS  # one table with the file loader's (robusteval.columns)


class RewardFunction:
    """A metric as a reward function for TRL's ``GRPOTrainer`` (and ``RLOOTrainer``).

    TRL calls a reward function with keyword arguments only and logs its rewards under its
    ``__name__`` (``GRPOTrainer.__init__`` keeps ``reward_func.__name__``;
    ``GRPOTrainer._calculate_rewards`` calls ``reward_func(prompts=prompts,
    completions=completions, completion_ids=completion_ids_list, **reward_kwargs)``, where
    ``reward_kwargs`` holds every other column of the dataset repeated per generation, plus
    ``trainer_state``; huggingface/trl ``trl/trainer/grpo_trainer.py``, and "Using a custom
    reward function" in its GRPO docs). Prompts and completions are plain strings (standard
    format) or lists of ``{"role", "content"}`` messages (conversational format). It returns
    one float per completion.

    * ``reference_column``: the dataset column holding the references (a string or a list of
      strings per row); None (default): the first present of :data:`REFERENCE_COLUMNS`;
      False: none. A reference-based metric with no reference column is an error at the first
      call, naming the columns TRL passed.
    * ``source``: ``"prompt"`` (default): the prompt is the source -- a conversational prompt
      becomes the dialogue context, one turn per message (system messages left out), a
      standard prompt the document; a column name: that column; None: no source.
    * ``scale``: rewards are ``score / 100 * scale`` (default 1.0: rewards in [0, 1]; 100:
      the metric's own 0-100 scale).
    * ``empty_reward``: the score (0-100) of an empty or invisible-only completion (default:
      the metric's ``empty_score``): it is never an error mid-training, and it is counted in
      :attr:`counts` (``empty_completion``), as are completions a ``reject`` guard refused
      (``refused``, same score) and completions the metric refuses as invalid text
      (``invalid_completion``). A missing reference or source is still an error: it is the
      dataset's, and it shows at the first step.
    * ``task``: the samples' task (default: ``dialogue`` for conversational prompts, else the
      metric's only task or ``summarization``); ``name``: the ``__name__`` TRL logs it under
      (default: the metric's name).
    """

    def __init__(self, metric: Metric, *, reference_column: str | bool | None = None,
                 source: str | None = "prompt", scale: float = 1.0, empty_reward: float | None = None,
                 task: str | None = None, name: str | None = None) -> None:
        self.metric = metric
        self.reference_column, self.source, self.task = reference_column, source, task
        self.scale = float(scale)
        self.empty_reward = float(metric.empty_score if empty_reward is None else empty_reward)
        self.__name__ = name or metric.name
        self.calls = 0
        self.counts: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"<reward function {self.__name__!r} of {self.metric.reproducibility()}>"

    def _references(self, columns: dict[str, Any]) -> list[Any] | None:
        if self.reference_column is False:
            return None
        if isinstance(self.reference_column, str):
            if self.reference_column not in columns:
                raise RobustevalError(f"reward {self.__name__}: no column {self.reference_column!r} among the "
                                      f"dataset's columns TRL passed ({', '.join(sorted(columns)) or 'none'})")
            return list(columns[self.reference_column])
        for key in REFERENCE_COLUMNS:
            if columns.get(key) is not None:
                return list(columns[key])
        if self.metric.requires_reference:
            raise RobustevalError(f"reward {self.__name__}: {self.metric.name} needs references, and none of the "
                                  f"columns {', '.join(REFERENCE_COLUMNS)} is in the dataset (it has: "
                                  f"{', '.join(sorted(columns)) or 'none'}); pass reference_column=")
        return None

    def _sources(self, prompts: Sequence[Any] | None, columns: dict[str, Any]) -> list[Any] | None:
        if self.source is None:
            return None
        if self.source == "prompt":
            return None if prompts is None else [_prompt_turns(p) for p in prompts]
        if self.source not in columns:
            raise RobustevalError(f"reward {self.__name__}: no column {self.source!r} among the dataset's "
                                  f"columns TRL passed ({', '.join(sorted(columns)) or 'none'})")
        return list(columns[self.source])

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Any = None, **columns: Any) -> list[float]:
        from robusteval.types import samples_from_lists

        if completions is None:
            raise RobustevalError(f"reward {self.__name__}: called without completions")
        texts = [_message_text(c) for c in completions]
        columns = {k: v for k, v in columns.items() if isinstance(v, list | tuple)}  # trainer_state etc. left out
        sources = self._sources(prompts, columns)
        task = self.task
        if task is None:
            conversational = prompts is not None and any(isinstance(p, list | tuple) for p in prompts)
            task = "dialogue" if conversational else (self.metric.tasks[0] if len(self.metric.tasks) == 1 else None)
        samples = samples_from_lists(texts, self._references(columns), sources, task=task)
        self.calls += 1
        out = np.full(len(samples), self.empty_reward)
        todo = [i for i, s in enumerate(samples) if not is_blank(s.response)]
        counts = {"empty_completion": len(samples) - len(todo)}
        if todo:
            scores, refused, invalid = self._score([samples[i] for i in todo])
            counts.update(refused=int(refused.sum()), invalid_completion=int(invalid.sum()),
                          scored=int((~refused & ~invalid).sum()))
            out[todo] = np.where(refused | invalid, self.empty_reward, scores)
        self.counts.update({k: v for k, v in counts.items() if v})
        return [float(v) * self.scale / 100.0 for v in out]

    def _score(self, samples: list[Sample]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(scores, refused by a guard, invalid completion text) of non-blank completions."""
        invalid = np.zeros(len(samples), dtype=bool)
        try:
            return (*score_or_refuse(self.metric, samples), invalid)
        except InputError as exc:
            if exc.field != "response":
                raise
        scores, refused = np.zeros(len(samples)), np.zeros(len(samples), dtype=bool)
        for i, s in enumerate(samples):  # one completion is invalid text: the others still count
            try:
                got, ref = score_or_refuse(self.metric, [s])
                scores[i], refused[i] = got[0], ref[0]
            except InputError as exc:
                if exc.field != "response":
                    raise
                invalid[i] = True
        return scores, refused, invalid

    def report(self) -> dict[str, Any]:
        return {"reward": self.__name__, "calls": self.calls, "counts": dict(self.counts),
                "metric": self.metric.report()}


def _message_text(message: Any) -> str:
    """A completion's text: a string as is; a conversational completion (a list of messages)
    is the content of its messages joined by newlines (multimodal content: its text parts)."""
    if isinstance(message, str):
        return message
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, list):
            return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "" if content is None else str(content)
    if isinstance(message, list | tuple):
        return "\n".join(t for t in (_message_text(m) for m in message) if t)
    raise RobustevalError(f"a completion must be a string or a list of messages, got {type(message).__name__}")


def _prompt_turns(prompt: Any) -> str | list[str] | None:
    """A prompt as a source: a string as is, a conversational prompt as its turns (system
    messages left out: they instruct the model, they are not the dialogue)."""
    if prompt is None or isinstance(prompt, str):
        return prompt
    return [_message_text(m) for m in prompt
            if not (isinstance(m, dict) and m.get("role") == "system") and _message_text(m)]


def as_reward_fn(metric_or_name: Any, *, metric_options: dict[str, Any] | None = None,
                 **options: Any) -> RewardFunction:
    """A TRL reward function (:class:`RewardFunction`, ``options`` there) from a metric, a
    metric name (``metrics.load(name, **metric_options)``) or a plain metric function
    ``f(predictions, references=None, sources=None) -> list[float]``
    (``metrics.function.as_metric(f, **metric_options)``)."""
    if isinstance(metric_or_name, str):
        from robusteval import metrics

        metric = metrics.load(metric_or_name, **(metric_options or {}))
    elif isinstance(metric_or_name, Metric):
        if metric_options:
            raise TypeError(f"metric {metric_or_name.name!r} is already built; metric_options cannot apply")
        metric = metric_or_name
    elif callable(metric_or_name):
        from robusteval.metrics.function import as_metric

        metric = as_metric(metric_or_name, **(metric_options or {}))
    else:
        raise TypeError(f"as_reward_fn takes a Metric, a metric name or a metric function, got "
                        f"{type(metric_or_name).__name__}")
    return RewardFunction(metric, **options)
