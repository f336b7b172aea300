"""The counting helpers of benchmarks/judge_flips.py and the option parser of
benchmarks/smoothing.py: the figures those scripts print come from these functions."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from robusteval.training.data import SPLIT_SCHEME

from robusteval import Sample

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"robusteval_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def flips() -> ModuleType:
    return _load("judge_flips")


@pytest.fixture(scope="module")
def smoothing() -> ModuleType:
    return _load("smoothing")


def _reply(ctx: str, i: int, text: str, rating: float) -> Sample:
    return Sample(id=f"{ctx}/{i}", task="dialogue", context=(ctx,), response=text, human={"overall": rating})


def test_pairs_take_best_and_worst_per_context_and_alternate_sides(flips) -> None:
    rows = [
        _reply("你好吗？", 0, "我很好，谢谢。", 4.0), _reply("你好吗？", 1, "香蕉。", 1.0), _reply("你好吗？", 2, "还行。", 3.0),
        _reply("كيف حالك؟", 0, "بخير", 2.0), _reply("كيف حالك؟", 1, "بخير شكرا", 2.0),  # one rating: skipped
        _reply("Как дела?", 0, "Хорошо.", 1.5), _reply("Как дела?", 1, "Отлично, спасибо!", 5.0),
        _reply("आप कैसे हैं?", 0, "ठीक हूँ", 3.0), _reply("आप कैसे हैं?", 1, "नमस्ते", 2.0),
        _reply("Ça va ?", 0, "Oui, merci.", 4.0), _reply("Ça va ?", 1, "Non.", 2.0),
    ]
    out = flips.pairs(rows, limit=3)
    assert [(s.response, s.reference, better) for s, better in out] == [
        ("我很好，谢谢。", "香蕉。", True),  # even pair: the best reply is the judged response
        ("Хорошо.", "Отлично, спасибо!", False),  # odd pair: the worst is
        ("ठीक हूँ", "नमस्ते", True),
    ]
    assert len(flips.pairs(rows, limit=10)) == 4  # the Arabic context has no better reply


def test_first_position_wins_counts_both_orders(flips) -> None:
    # ab: response first, wins when p > 0.5; ba: reference first, the first wins when p < 0.5
    rec = flips.first_wins([0.9, 0.2, 0.5], [0.3, 0.6, 0.5], ["a", "b", "c"])
    assert (rec["first_wins"], rec["n"]) == (2, 6)  # 0.9 and 0.3; both ties (0.5) are no win
    near = ([0.9, 0.54, 0.5], [0.3, 0.47, 0.5], ["a", "b", "c"])
    assert flips.first_wins(*near)["first_wins"] == 4  # 0.54 and 0.47 count at margin 0
    assert flips.first_wins(*near, margin=0.05)["first_wins"] == 2  # within the margin: ties
    assert rec["rate"] == pytest.approx(2 / 6)


def test_agreement_counts_ties_as_disagreement(flips) -> None:
    rec = flips.agreement([0.8, 0.3, 0.5, 0.52], [True, False, True, True], ["a", "b", "c", "d"], margin=0.05)
    # win (agrees), loss (agrees), tie (no), 0.52 is within the margin: a tie (no)
    assert (rec["agree"], rec["n"]) == (2, 4)
    assert flips.agreement([0.52], [True], ["a"], margin=0.0)["agree"] == 1


def test_smoothing_perturbation_specs(smoothing) -> None:
    assert smoothing.perturbation("synonym") == ("synonym", {})
    assert smoothing.perturbation("mask:0.9") == ("mask", {"rate": 0.9})
    assert smoothing.perturbation("synonym:sets=wordnet") == ("synonym", {"sets": "wordnet"})
    assert smoothing.perturbation("synonym:0.5,sets=wordnet,max_set=8") == (
        "synonym", {"rate": 0.5, "sets": "wordnet", "max_set": 8})


def _harden_folder(root: Path, fooled: list[bool], spearman: dict[str, float], seed: int = 0) -> Path:
    """A finished harden run: a base (round 0) and a chosen round 1 that is fooled by nothing."""
    import json

    from robusteval.attacks.base import ResultRow

    rounds = []
    for k, hits in ((0, fooled), (1, [False] * len(fooled))):
        (root / f"test_round_{k}").mkdir(parents=True)
        with open(root / f"test_round_{k}" / "results.jsonl", "w", encoding="utf-8") as f:
            for i, hit in enumerate(hits):
                row = ResultRow("generic-hello", "dialogue-rules", f"d/{i}", "R-", "o", "hello", "low",
                                victim_before=50.0, victim_after=60.0 if hit else 40.0,
                                success={"beats_reference": hit}, context_id=f"c{i}")
                f.write(json.dumps(row.to_dict()) + "\n")
        test = {"test_spearman": sum(spearman.values()) / len(spearman),
                **{f"test_spearman/{s}": v - 0.1 * k for s, v in spearman.items()}}
        rounds.append({"round": k, "val_spearman": 0.3, "test": test})
    config = {"seed": seed, "data": {"val_fraction": 0.1, "test_fraction": 0.2}, "attack": {"dataset": "d"}}
    (root / "harden.json").write_text(json.dumps({"chosen": 1, "rounds": rounds, "config": config}),
                                      encoding="utf-8")
    return root


def test_paired_bases_prints_the_paired_change_and_spearman_per_set(tmp_path, capsys) -> None:
    paired = _load("paired_bases")
    seeds = []
    for s, (before, after) in enumerate([([True, True, False, False], [False, True, False, True]),
                                         ([True, True, True, False], [False, False, True, False])]):
        b = _harden_folder(tmp_path / f"b{s}", before, {"zh-set": 0.30, "ar-set": 0.20})
        a = _harden_folder(tmp_path / f"a{s}", after, {"zh-set": 0.25, "ar-set": 0.24})
        seeds += ["--pair", str(b), str(a)]
    assert paired.main(seeds) == 0
    out = capsys.readouterr().out
    # seed 1: 2 -> 2 of 4 (one row each way); seed 2: 3 -> 1 of 4; pooled 5 -> 3 of 8, -25 points
    assert "| dialogue-rules (R-) | 2 → 2 (4) | 3 → 1 (4) |" in out
    assert "| 5 → 3 (8) | **-25.0 [" in out
    # the sign test over the 8 contexts: 3 fooled less, 1 more, 4 tied; binomial p of 3 of 4
    assert "; 3↓ 1↑, p = 0.625**" in out
    # rows that moved both ways inside one context: no p, said so (not a crash)
    cell = paired.change_cell({"change": {"mean": 0.0, "ci": [-0.5, 0.5]}, "only_before": 1, "only_after": 1,
                               "sign_test": {"down": 0, "up": 0, "tied": 1, "p": None}})
    assert cell == "+0.0 [-50.0, +50.0]; 0↓ 0↑, p = n/a (no context moved on balance)"
    assert "| zh-set | 0.300 → 0.250 | 0.300 → 0.250 | -0.050 |" in out
    assert "| ar-set | 0.200 → 0.240 | 0.200 → 0.240 | +0.040 |" in out
    assert "sets whose mean change is below −0.02: 1 of 2" in out
    # the chosen rounds instead of the bases: nothing fooled on either side
    assert paired.main([*seeds, "--round", "chosen"]) == 0
    assert "| dialogue-rules (R-) | 0 → 0 (4) | 0 → 0 (4) |" in capsys.readouterr().out
    # runs of different seeds are different splits: refused
    other = _harden_folder(tmp_path / "seed1", [True] * 4, {"zh-set": 0.3}, seed=1)
    with pytest.raises(SystemExit, match="seed is 0 and 1"):
        paired.main(["--pair", seeds[1], str(other)])


def test_rating_priors_compares_each_group_with_the_sets_mean(monkeypatch, capsys) -> None:
    priors = _load("rating_priors")
    scale = {"scales": {"overall": {"low": 1, "high": 5}}}
    texts = [("c1", "好！", 5), ("c1", "That is a long and careful answer.", 1), ("c2", "Не знаю?", 3),
             ("c2", "Je pense que oui, merci beaucoup !", 5), ("c3", "هل أنت بخير؟", 1), ("c3", "ठीक है", 3)]
    samples = [Sample(id=f"s{i}", task="dialogue", context=(c,), response=t, human={"overall": r}, meta=scale)
               for i, (c, t, r) in enumerate(texts)]
    monkeypatch.setattr(priors.data, "load", lambda name: samples)
    assert priors.main(["--split", "all", "--datasets", "toy"]) == 0
    out = capsys.readouterr().out
    # normalized: 1, 0, 0.5, 1, 0, 0.5 -> mean 0.5; short (<= 3 words): 好！, Не знаю?, هل أنت بخير؟, ठीक है
    # -> (1 + 0.5 + 0 + 0.5) / 4 = 0.5; '!': 好！ and the French reply -> 1.0; '?': Russian and Arabic -> 0.25
    assert "| toy (overall) | 6 | 0.50 | 4: 0.50 (+0.00" in out
    assert "| 2: 1.00 (+0.50" in out
    assert "| 2: 0.25 (-0.25" in out


def test_judge_attacks_split_follows_the_seed_and_plain_has_one_source(tmp_path) -> None:
    from robusteval.training.data import split_of

    ja = _load("judge_attacks")
    samples = [_reply(f"contexte {i} — 上下文 {i}", j, f"réponse {j}", float(j + 1)) for i in range(60) for j in range(3)]
    ids = {}
    for seed in (0, 1):
        args = argparse.Namespace(split="test", seed=seed, fit_size=2, limit=50)
        picked = ja.contexts("dailydialog-zhao", samples, "overall", args)
        parts = [split_of("dailydialog-zhao", s, *ja.SPLIT, seed) for s in picked]
        assert parts[:2] == ["val", "val"] and set(parts[2:]) == {"test"}
        assert len(picked) - 2 == sum(split_of("dailydialog-zhao", s, *ja.SPLIT, seed) == "test"
                                      for s in samples if s.id.endswith("/2"))  # one (the best) per test context
        ids[seed] = [s.id for s in picked]
    assert ids[0] != ids[1]  # another seed, another split
    with pytest.raises(SystemExit):
        ja.main(["--out-dir", str(tmp_path), "--variants", "plain", "--plain-from", str(tmp_path / "other")])


def test_paired_bases_keeps_only_the_test_split_of_each_seed(monkeypatch) -> None:
    from robusteval.training.data import split_of

    from robusteval.attacks.base import ResultRow

    paired = _load("paired_bases")
    samples = [_reply(f"السياق {i} / контекст {i}", 0, "réponse", 4.0) for i in range(40)]
    monkeypatch.setattr("robusteval.data.load", lambda name, data_dir=None: samples)
    rows = [ResultRow("judge-master-keys", "judge-master-keys", s.id, "R-", "o", ":", "low",
                      success={"beats_reference": True}, dataset="toy") for s in samples]
    for seed in (0, 1):
        kept = {r.sample_id for r in paired.test_rows(rows, seed)}
        assert kept == {s.id for s in samples if split_of("toy", s, 0.1, 0.2, seed) == "test"}
        assert 0 < len(kept) < len(samples)
    with pytest.raises(Exception, match="does not name its dataset"):
        paired.test_rows([ResultRow("a", "f", samples[0].id, "R-", "o", "x", "low")], 0)


def test_paired_bases_splits_by_conversation_or_as_old_runs_did(monkeypatch, tmp_path, capsys) -> None:
    from dataclasses import replace

    from robusteval.training.data import split_of

    from robusteval.attacks.base import ResultRow
    from robusteval.data.conversations import mark_conversations

    paired = _load("paired_bases")
    # 30 conversations, each rated at three growing contexts (a prefix chain)
    raw = [Sample(id=f"c{i}/{k}", task="dialogue", context=tuple(f"ход {i}.{j} / 第{j}轮" for j in range(1, 2 * k + 2)),
                  response=f"réponse {k}", human={"overall": 3.0}) for i in range(30) for k in range(3)]
    samples = mark_conversations(raw)
    monkeypatch.setattr("robusteval.data.load", lambda name, data_dir=None: samples)
    rows = [ResultRow("a", "f", s.id, "R-", "o", "x", "low", success={"beats_reference": True}, dataset="toy")
            for s in samples]
    by_conv = {r.sample_id for r in paired.test_rows(rows, 0)}
    by_ctx = {r.sample_id for r in paired.test_rows(rows, 0, split_by="context")}
    assert by_conv == {s.id for s in samples if split_of("toy", s, 0.1, 0.2, 0) == "test"}
    assert by_ctx == {s.id for s in raw if split_of("toy", s, 0.1, 0.2, 0) == "test"}
    assert by_conv != by_ctx and all({f"c{i}/{k}" for k in range(3)} <= by_conv or not any(
        f"c{i}/{k}" in by_conv for k in range(3)) for i in range(30))  # whole conversations only
    assert replace(samples[1], meta={}).conversation_key() != samples[1].conversation_key()
    # harden runs split on each side of the change do not pair, and --split-by must match theirs
    old = _harden_folder(tmp_path / "old", [True] * 4, {"zh-set": 0.3})
    new = _harden_folder(tmp_path / "new", [True] * 4, {"zh-set": 0.3})
    doc = json.loads((new / "harden.json").read_text(encoding="utf-8"))
    (new / "harden.json").write_text(json.dumps({**doc, "split": SPLIT_SCHEME}), encoding="utf-8")  # as harden writes
    with pytest.raises(SystemExit, match=f"split by 'context' and by '{SPLIT_SCHEME}'"):
        paired.main(["--pair", str(old), str(new)])
    monkeypatch.setenv("ROBUSTEVAL_DATA", str(tmp_path))
    with pytest.raises(SystemExit):
        paired.main(["--pair", str(old), str(old), "--test-split-seeds", "0"])  # old runs: --split-by context
    assert "was split by 'context': pass --split-by context" in capsys.readouterr().err
    # "conversation" (2026-11-26 to 11-28) and today's scheme split a registered dataset ("d") alike:
    # such runs pair, and --split-by may name either; on a dataset given as a path they do not
    mid = _harden_folder(tmp_path / "mid", [True] * 4, {"zh-set": 0.3})
    doc = json.loads((mid / "harden.json").read_text(encoding="utf-8"))
    (mid / "harden.json").write_text(json.dumps({**doc, "split": "conversation"}), encoding="utf-8")
    paired.check_paired(mid, new)
    assert paired.split_scheme(json.loads((mid / "harden.json").read_text())) == SPLIT_SCHEME
    for folder in (mid, new):
        doc = json.loads((folder / "harden.json").read_text(encoding="utf-8"))
        doc["config"]["attack"]["dataset"] = "data/mine.jsonl"
        (folder / "harden.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(SystemExit, match=f"split by 'conversation' and by '{SPLIT_SCHEME}'"):
        paired.check_paired(mid, new)
    path_rows = [ResultRow("a", "f", samples[0].id, "R-", "o", "x", "low", dataset="data/mine.jsonl")]
    with pytest.raises(SystemExit, match="cannot redo the old split"):
        paired.test_rows(path_rows, 0, split_by="conversation")
    assert len(paired.test_rows(rows, 0, split_by="conversation")) == len(by_conv)  # "toy": one split


def test_base_evaluator_scores_the_test_split_the_export_was_trained_on(monkeypatch, capsys) -> None:
    from robusteval.training.data import split_of

    from robusteval.data.conversations import mark_conversations

    be = _load("base_evaluator")
    # 40 conversations, each rated at three growing contexts: the two schemes split them differently
    raw = [Sample(id=f"c{i}/{k}", task="dialogue", context=tuple(f"ход {i}.{j} / دور {j}" for j in range(1, 2 * k + 2)),
                  response=f"réponse {i} {k} 回答",
                  human={} if (i + k) % 7 == 0 else  # an unrated reply: in the split, not in n
                  dict.fromkeys(("overall", "coherence", "maintains_context"), float((i + k) % 5 + 1)))
           for i in range(40) for k in range(3)]
    marked = mark_conversations(raw)
    monkeypatch.setattr(be.data, "load", lambda name: marked)

    class Length:  # a stand-in for both metrics: the reply's length
        def score(self, samples):
            return [float(len(s.response)) for s in samples]

    monkeypatch.setattr(be.metrics, "load", lambda *a, **k: Length())
    counts = {}
    for scheme, rows in (("conversation", marked), ("context", raw)):
        assert be.main(["export", "--split-by", scheme, "--n-boot", "20"]) == 0
        table = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if "| test split |" in line]
        counts[scheme] = [int(r[2]) for r in table]
        # one metric against itself: a paired difference of exactly 0 on every draw, so "yes"
        assert {(r[6], r[7]) for r in table} == {("+0.000 [+0.000, +0.000]", "yes |")}
        names = [spec.split(":")[0] for spec in be.IN_DOMAIN]
        assert counts[scheme] == [sum(split_of(n, s, 0.1, 0.2, 0) == "test" and bool(s.human) for s in rows)
                                  for n in names]
    assert counts["conversation"] != counts["context"]


def test_judge_attacks_refuses_to_add_to_a_summary_of_another_split(tmp_path) -> None:
    ja = _load("judge_attacks")
    path = tmp_path / "summary.json"
    test_args = argparse.Namespace(split="test")
    ja.refuse_other_split(path, test_args)  # no summary yet
    path.write_text(json.dumps({"args": {"split": "test"}, "asr": {}}), encoding="utf-8")  # before the scheme
    with pytest.raises(SystemExit, match="did not record"):
        ja.refuse_other_split(path, test_args)
    with pytest.raises(SystemExit, match="--split test; this run is --split first"):
        ja.refuse_other_split(path, argparse.Namespace(split="first"))  # other contexts altogether
    path.write_text(json.dumps({"args": {"split": "test"}, "split_scheme": "context"}), encoding="utf-8")
    with pytest.raises(SystemExit, match="split by 'context'; this code splits by 'conversation/file-name'"):
        ja.refuse_other_split(path, test_args)
    path.write_text(json.dumps({"args": {"split": "test"}, "split_scheme": "conversation/file-name"}),
                    encoding="utf-8")
    ja.refuse_other_split(path, test_args)  # the same split: parts add up
    # "conversation" (before 2026-11-28) hashed a dataset as written: the same for registered
    # names, another split for a file given as a path
    path.write_text(json.dumps({"args": {"split": "test"}, "split_scheme": "conversation"}), encoding="utf-8")
    ja.refuse_other_split(path, argparse.Namespace(split="test", datasets=["dailydialog-zhao", "summeval"]))
    with pytest.raises(SystemExit, match="split by 'conversation'"):
        ja.refuse_other_split(path, argparse.Namespace(split="test", datasets=["data/mine.jsonl"]))
    path.write_text(json.dumps({"args": {"split": "first"}}), encoding="utf-8")
    ja.refuse_other_split(path, argparse.Namespace(split="first"))
    with pytest.raises(SystemExit, match="--split first; this run is --split test"):
        ja.refuse_other_split(path, test_args)


def test_judge_attacks_plain_phrase_is_none_when_the_phrase_family_did_not_run(tmp_path) -> None:
    import json

    ja = _load("judge_attacks")
    assert ja.plain_phrase(tmp_path) is None  # the plain judge never ran
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "fitted.json").write_text(json.dumps({"null-model": {"response": "Note : 10/10"}}))
    assert ja.plain_phrase(tmp_path) is None  # it ran without the universal-phrase family
    (tmp_path / "plain" / "fitted.json").write_text(json.dumps({"judge-universal-phrase": {"phrase": "maison 家"}}))
    assert ja.plain_phrase(tmp_path) == "maison 家"


def test_split_leak_counts_learned_replies_by_context_and_none_by_conversation(monkeypatch, capsys) -> None:
    from robusteval.data.conversations import mark_conversations

    leak = _load("split_leak")
    # 40 dialogues of seven turns rated as ConTurE rates them: three-turn windows moving on two
    samples = []
    for i in range(40):
        t = [f"диалог {i}, реплика {j} / 对话{i}第{j}句" for j in range(7)]
        samples += [Sample(id=f"d{i}/{k}", task="dialogue", context=tuple(t[2 * k:2 * k + 3]), response=t[2 * k + 3],
                           human={"overall": 1.0}) for k in range(2)]
    monkeypatch.setattr(leak, "SETS", ["toy"])
    monkeypatch.setattr("robusteval.data.load", lambda name, data_dir=None: mark_conversations(samples))
    assert leak.main(["--seeds", "0", "1"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| toy")]
    assert len(rows) == 2
    for row in rows:
        before, after = (int(x) for x in row[3].split(" → "))
        assert before > 0 and after == 0  # the first window's reply opens the second: learned when split apart
        drawn_before, drawn_after = (int(x) for x in row[4].rstrip(" |").split(" → "))
        assert drawn_before == before and drawn_after == 0  # fewer positives than the limit: all drawn


def test_judge_attacks_validity_change_pairs_the_items_both_variants_scored() -> None:
    """The printed change from plain is after - before on the shared items, with a paired
    interval; a summary without the scored items says its bare difference has none."""
    import numpy as np

    ja = _load("judge_attacks")

    def entry(scores: dict[str, float], keep_items: bool = True) -> dict:
        human = {f"s{i}": float(i) for i in range(12)}
        ids = sorted(scores)
        r = float(np.corrcoef(np.argsort(np.argsort([scores[i] for i in ids])),
                              np.argsort(np.argsort([human[i] for i in ids])))[0, 1])
        out = {"spearman": {"r": r}}
        if keep_items:
            out["items"] = [{"id": i, "conversation": f"c{int(i[1:]) // 2}", "human": human[i], "score": scores[i]}
                            for i in ids]
        return out

    plain = entry({f"s{i}": float(i) for i in range(12)})  # agrees with people exactly
    noisy = {f"s{i}": float(i) for i in range(12)}
    noisy["s0"], noisy["s11"] = 11.5, -1.0  # two items swapped to the far end
    other = entry(noisy)
    other["items"].append({"id": "extra", "conversation": "c9", "human": 3.0, "score": 5.0})  # plain lacks it
    got = ja.validity_change(plain, other)
    assert got["n"] == 12 and got["n_contexts"] == 6 and got["before"] == pytest.approx(1.0)
    assert got["change"] == pytest.approx(got["after"] - 1.0) and got["change"] < 0
    assert got["ci"][0] <= got["change"] <= got["ci"][1]
    assert ja.change_cell(plain, other).startswith(f"{got['change']:+.3f} [")
    bare = ja.change_cell(entry({f"s{i}": float(i) for i in range(12)}, keep_items=False), other)
    assert "no paired interval" in bare and ja.validity_change(plain, {"spearman": {"r": 0.5}}) is None


def test_smoothing_validity_prints_both_spearmans_and_the_paired_change(monkeypatch, capsys) -> None:
    """Each set's plain and smoothed Spearman and the paired change, on the rated samples only."""
    sv = _load("smoothing_validity")
    texts = ["résumé court", "总结很好", "ملخص جيد", "अच्छा सारांश", "хорошее резюме", "a fine summary"]
    rows = [Sample(id=f"d{i}", task="summarization", context=(f"document {i}",), response=texts[i % 6] + " x" * i,
                   reference="ref", human={} if i == 3 else {"consistency": float(i % 4)}) for i in range(24)]
    monkeypatch.setattr(sv.data, "load", lambda name: rows)
    monkeypatch.setenv("ROBUSTEVAL_DATA", "unused: data.load is replaced")

    class Length:
        def score(self, samples):
            return [float(len(s.response)) for s in samples]

    class Reversed:
        def score(self, samples):
            return [-float(len(s.response)) for s in samples]

    monkeypatch.setattr(sv.metrics, "load", lambda *a, **k: Length())
    monkeypatch.setattr(sv, "smooth", lambda metric, *a, **k: Reversed())
    assert sv.main(["--sets", "toy", "--n-boot", "50"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| toy |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:3] == ["consistency", "23"]  # the unrated sample left out
    plain, smoothed = float(cells[3].split()[0]), float(cells[4].split()[0])
    assert smoothed == pytest.approx(-plain, abs=1e-3)
    assert cells[5].startswith(f"{smoothed - plain:+.3f} [")


def test_source_support_findings_counts_each_kind_and_the_flagged_share_over_judged_texts(tmp_path) -> None:
    from robusteval import detectors

    bench = _load("source_support_findings")
    samples = [Sample(id=f"d{i}/r", task="summarization", context=(f"doc {i}",), response=f"r{i}") for i in range(4)]
    rows = [{"suspicion": 0.99, "edits": ["Chelsea"], "substitutions": [], "negation_flips": [], "unsupported": []},
            {"suspicion": 0.5, "edits": [], "substitutions": ["x"], "negation_flips": [], "unsupported": ["y"]},
            {"suspicion": 0.9, "edits": [], "substitutions": [], "negation_flips": ["win"], "unsupported": []},
            {"suspicion": 0.0, "abstained": True}]
    # n is the 3 judged texts (the abstention named); shares over them; flagged is suspicion >= threshold
    n, subs, flips, unsup, edits, flagged = bench.cells(rows, samples, threshold=0.9)
    assert n == "3 (1 abstained)"
    assert [c.split(" ")[0] for c in (subs, flips, unsup, edits, flagged)] == ["33.3", "33.3", "33.3", "33.3", "66.7"]
    assert len(bench.cells(rows, samples)) == 5  # no threshold, no flagged column
    det = detectors.load("source_support")
    good = {"detectors": {"source_support": {"threshold": 0.9817, "signature": det.identity()}}}
    (tmp_path / "t.json").write_text(json.dumps(good), encoding="utf-8")
    assert bench.read_threshold(str(tmp_path / "t.json"), det) == 0.9817
    for bad, says in [({**good, "groups": {}}, "per-group"), ({"detectors": {}}, "no source_support"),
                      ({"detectors": {"source_support": {"threshold": 0.5, "signature": "v2|old"}}},
                       "calibrated as 'v2|old'")]:
        (tmp_path / "b.json").write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(SystemExit, match=says):
            bench.read_threshold(str(tmp_path / "b.json"), det)
