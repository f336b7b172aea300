"""Several rated turns of one conversation stay in one split (robusteval.data.conversations)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest
from robusteval.training.data import split_of
from robusteval.training.ssl import continuations, learned_replies

from robusteval import Sample, data
from robusteval.data.conversations import conversation_groups, mark_conversations, unmarked

# one conversation rated at three turns, in six scripts; and an unrelated context
TURNS = ("你会投票给谁？", "أود بالتأكيد، إنه رائع جدا.", "मैं निश्चित रूप से कहूंगा।", "За кого бы вы проголосовали?",
         "Pour qui voteriez-vous ?", "Who is Donald Trump?")


def rated(i: int, context: tuple[str, ...], response: str, task: str = "dialogue", **meta) -> Sample:
    return Sample(id=f"s{i}", task=task, response=response, context=context, human={"overall": 1.0}, meta=meta)


def chain() -> list[Sample]:
    return [rated(0, TURNS[:1], TURNS[1]), rated(1, TURNS[:3], TURNS[3]), rated(2, TURNS[:5], TURNS[5]),
            rated(3, TURNS[:3], "another reply to the same context"), rated(4, ("hello?",), "hi")]


def test_prefix_chains_share_the_shortest_context_as_their_key() -> None:
    out = mark_conversations(chain())
    assert [s.conversation_key() for s in out[:4]] == [TURNS[0]] * 4
    assert "conversation" not in out[4].meta  # no prefix relation: unchanged, keyed by its context
    assert out[4].conversation_key() == out[4].context_key() == "hello?"
    assert [s.context_key() for s in out] == [s.context_key() for s in chain()]  # attack keys do not move


def test_groups_join_through_any_member_and_keep_the_shortest_root() -> None:
    a, b, c = ("x",), ("x", "y", "z"), ("x", "y", "z", "w", "v")
    root = conversation_groups([(c, "r"), (b, "r"), (a, "r"), (("q", "r"), "s")])  # order does not matter
    assert root == {a: a, b: a, c: a, ("q", "r"): ("q", "r")}
    # b and c extend each other but their shared opening ("x",) is no rated context: b is the root
    assert conversation_groups([(c, "r"), (b, "r")]) == {b: b, c: b}
    # two contexts that only share an opening turn are two conversations ("hello" opens many)
    assert conversation_groups([(("hello", "a", "b"), "r"), (("hello", "c", "d"), "r")]) == {
        ("hello", "a", "b"): ("hello", "a", "b"), ("hello", "c", "d"): ("hello", "c", "d")}


def test_sliding_windows_are_one_conversation() -> None:
    """ConTurE-turn's shape: three-turn contexts moving on two turns at a time, the rated reply
    opening the next window; a window joins the next through its last turn and its reply."""
    t = [f"turn {i} ({TURNS[i % len(TURNS)]})" for i in range(9)]
    pairs = [((t[0],), t[1]), ((t[0], t[1], t[2]), t[3]), ((t[2], t[3], t[4]), t[5]), ((t[4], t[5], t[6]), t[7])]
    root = conversation_groups(pairs)
    assert set(root.values()) == {(t[0],)}
    # a window whose reply is not the next window's second turn stays apart (another reply rated)
    other = conversation_groups([((t[0], t[1], t[2]), "a different reply"), ((t[2], t[3], t[4]), t[5])])
    assert len(set(other.values())) == 2
    # sharing only the last turn (one turn of overlap, no reply) does not join
    assert len(set(conversation_groups([((t[0], t[1]), "x"), ((t[1], t[2]), "y")]).values())) == 2


def test_a_loader_key_other_tasks_and_contextless_samples_are_left_alone() -> None:
    # a row without the data's id joins its group's id, so one conversation is never split
    given = [rated(0, TURNS[:1], "a", conversation="dialogue-17"), rated(1, TURNS[:3], "b"),
             rated(2, TURNS[:1], "c"), rated(3, ("autre",), "d")]
    out = mark_conversations(given)
    assert [s.conversation_key() for s in out] == ["dialogue-17", "dialogue-17", "dialogue-17", "autre"]
    two = mark_conversations([rated(0, TURNS[:1], "a", conversation="z"), rated(1, TURNS[:3], "b", conversation="y"),
                              rated(2, TURNS[:5], "c")])
    assert [s.conversation_key() for s in two] == ["z", "y", "y"]  # the data's ids are kept; the first for the rest
    docs = [rated(0, ("doc",), "s", task="summarization"), rated(1, ("doc", "more"), "t", task="summarization")]
    assert mark_conversations(docs) == docs
    bare = [rated(0, (), "a"), rated(1, (), "b")]
    assert [s.conversation_key() for s in mark_conversations(bare)] == ["s0", "s1"]


def test_every_turn_of_a_conversation_lands_in_one_split_at_every_seed() -> None:
    out = mark_conversations(chain())
    for seed in range(40):
        assert len({split_of("set", s, 0.3, 0.3, seed) for s in out[:4]}) == 1
    # without the mark the same chain is split apart at some seed: the leak this closes
    assert any(len({split_of("set", s, 0.3, 0.3, seed) for s in chain()[:4]}) > 1 for seed in range(40))


def test_load_marks_files_before_the_limit(tmp_path) -> None:
    path = tmp_path / "rated.jsonl"
    rows = [{"id": s.id, "context": list(s.context), "response": s.response} for s in chain()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    first = data.load(str(path), limit=1, task="dialogue")
    assert first[0].conversation_key() == TURNS[0] and first[0].meta["conversation"] == TURNS[0]


def held_out_pretrained(samples: list[Sample], name: str, seed: int) -> tuple[int, int]:
    """(held-out rated rows, those whose reply pre-training learns after the end of their
    context: any suffix of the context, as a longer train context or window holds it)."""
    split = {s.id: split_of(name, s, 0.1, 0.2, seed) for s in samples}
    held = [s for s in samples if split[s.id] != "train"]
    return len(held), sum(learned_replies(held, continuations([s for s in samples if split[s.id] == "train"])))


@pytest.mark.parametrize("name", ["conture-turn", "fed-turn", "dailydialog-zhao", "persona-zhao"])
def test_no_held_out_reply_is_pretrained_on(data_dir, name: str) -> None:
    """The leak measured in docs/training.md: a rated val/test reply of ConTurE-turn (FED-turn,
    a few Zhao rows) that a train context holds as a turn, so pre-training learns it as a positive
    after its own preceding turns. Without the conversation marks it is there at every seed."""
    marked = data.load(name, data_dir)
    plain = unmarked(marked)
    leaks_before = []
    for seed in (0, 1, 2):
        held, leaked = held_out_pretrained(marked, name, seed)
        assert held and leaked == 0, (name, seed, leaked, held)
        leaks_before.append(held_out_pretrained(plain, name, seed)[1])
    if name in ("conture-turn", "fed-turn"):
        assert min(leaks_before) > 0  # the test has the power to see the leak


@pytest.mark.parametrize("name", ["dailydialog-zhao", "persona-zhao", "fed-turn"])
def test_real_sets_mark_their_chains(data_dir, name: str) -> None:
    samples = data.load(name, data_dir)
    ctxs = {s.context for s in samples}
    for s in samples:  # every context that extends a rated context is marked, with its root
        if any(s.context[:k] in ctxs for k in range(1, len(s.context))):
            assert s.meta["conversation"] != s.context_key()


def test_bootstraps_resample_a_conversation_as_one_cluster(monkeypatch) -> None:
    from robusteval import metaeval
    from robusteval.attacks.runner import context_id

    seen: list[list[str]] = []

    def spy(scores, human, n_boot=1000, seed=0, clusters=None):
        seen.append(list(clusters))
        return {}

    monkeypatch.setattr(metaeval, "correlate", spy)
    out = mark_conversations(chain())
    metaeval.metaevaluate(out, np.arange(len(out), dtype=float), n_boot=10)
    assert seen == [[TURNS[0]] * 4 + ["hello?"]]
    ids = [context_id(s) for s in out]
    assert len(set(ids[:4])) == 1 and ids[4] != ids[0]  # attack rows cluster by conversation too


def test_unmarked_gives_back_the_samples_as_old_runs_split_them() -> None:
    assert unmarked(mark_conversations(chain())) == chain()
    keyed = [rated(0, TURNS[:1], "a", conversation="dialogue-17")]
    assert unmarked(keyed)[0].conversation_key() == TURNS[0]


def test_learned_replies_finds_a_reply_a_later_window_holds_after_its_own_turn() -> None:
    t = [f"turn {i} ({TURNS[i % len(TURNS)]})" for i in range(6)]
    train = [rated(9, (t[2], t[3], t[4]), t[5])]  # pre-training: (t2) -> t3, (t2, t3) -> t4
    held = [rated(0, (t[0], t[1], t[2]), t[3]), rated(1, (t[0], t[1], t[2]), "une autre réponse"),
            rated(2, (t[1], t[3]), t[4]), rated(3, (t[0],), t[1])]
    assert learned_replies(held, continuations(train)) == [True, False, True, False]


def test_the_guards_flag_rate_counts_a_conversation_as_one_cluster() -> None:
    from robusteval.compare.pipeline import flagged_summary

    scale = {"scales": {"overall": {"low": 0, "high": 2}}}
    out = mark_conversations([replace(s, meta=scale) for s in chain()])  # four rows of one conversation, one other
    summary = flagged_summary(out, [True, True, False, False, False])
    assert sorted(summary["contexts"]) == [[1, 0], [4, 2]]


def test_a_files_conversation_column_keys_its_rows(tmp_path) -> None:
    path = tmp_path / "rated.csv"
    path.write_text("dialogue_id,context,response\nA,你好,مرحبا\nA,Как дела?,Très bien\nB,नमस्ते,Bonjour\n",
                    encoding="utf-8")
    rows = data.load(str(path), task="dialogue")
    assert [s.conversation_key() for s in rows] == ["A", "A", "B"]
    assert len({split_of("file", s, 0.3, 0.3, seed) for seed in range(20) for s in rows[:2]}) == 3  # both move
    assert all(split_of("file", rows[0], 0.3, 0.3, seed) == split_of("file", rows[1], 0.3, 0.3, seed)
               for seed in range(20))


def test_random_negatives_come_from_another_conversation() -> None:
    import random

    from robusteval.training.ssl import negative

    # two dialogues of windows: a 'random' negative for a turn of one is never a turn of it
    convs = []
    for d in range(2):
        t = [f"{'AB'[d]}{i} ({TURNS[i % len(TURNS)]})" for i in range(9)]
        convs += [rated(10 * d + k, tuple(t[2 * k:2 * k + 3]), t[2 * k + 3]) for k in range(3)]
    pos = continuations(mark_conversations(convs))
    rng = random.Random(0)
    for p in pos:
        for _ in range(20):
            text = negative("random", p, pos, rng)
            assert text is None or text[0] != p.response[0]  # the other dialogue's turn


def test_a_frames_missing_ids_and_a_context_column_named_conversation(tmp_path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"dialogue_id": [1.0, float("nan"), 2.0], "context": ["你好", "Как дела?", "नमस्ते"],
                          "response": ["مرحبا", "Très bien", "Bonjour"]})
    rows = data.load(frame, task="dialogue")
    assert [s.meta.get("conversation") for s in rows] == ["1", None, "2"]  # NaN is no id; 1.0 is 1
    path = tmp_path / "chat.jsonl"
    lines = [{"conversation": ["Salut", "Ça va ?"], "response": "Oui"}, {"conversation": ["Salut"], "response": "Ça va ?"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    rows = data.load(str(path), columns={"context": "conversation"}, task="dialogue")
    assert [s.context for s in rows] == [("Salut", "Ça va ?"), ("Salut",)]
    assert [s.conversation_key() for s in rows] == ["Salut", "Salut"]  # the mapped column is no id: chains join


def test_a_files_split_does_not_depend_on_where_it_lies() -> None:
    """A dataset given as a path splits by its file name alone: the same user file in two
    folders (a copy, a temporary directory per test run) gives one split, and a registered name
    keeps its own salt. Before, the whole path was hashed, and a six-context file left test
    empty in some pytest temporary folders and not in others (a CI-only failure)."""
    from robusteval.training.data import split_salt

    rows = [Sample(id=f"{lang}-{i}", task="dialogue", response=r, context=(c,)) for i, (lang, c, r) in enumerate(
        [("en", "Hi, how was your trip?", "Great."), ("zh", "你好，周末过得怎么样？", "很好。"),
         ("ar", "مرحبا، كيف حالك؟", "بخير."), ("hi", "आप कहाँ जा रहे हैं?", "बाज़ार।"),
         ("ru", "Что ты читаешь?", "Роман."), ("fr", "Tu viens ce soir ?", "Oui.")])]
    places = ["user.jsonl", "data/user.jsonl", "/tmp/pytest-of-root/pytest-131/e2e0/user.jsonl",
              "/tmp/pytest-of-root/pytest-132/e2e0/user.jsonl", "C:\\Users\\me\\user.jsonl", "data/user.jsonl/",
              "./user.jsonl", "data/./user.jsonl", "data/x/../user.jsonl"]
    assert {split_salt(p) for p in places} == {"user.jsonl"}
    # names that are not paths keep their salt: a registered set, a hub set, a module's loader
    for name in ("dailydialog-zhao", "hf:org/summeval", "hf:other/summeval:config", "mymod:make_rows"):
        assert split_salt(name) == name
    assert split_salt(".") == split_salt(os.getcwd()) == os.path.basename(os.getcwd())
    for seed in range(5):
        splits = {tuple(split_of(p, s, 0.1, 0.5, seed) for s in rows) for p in places}
        assert len(splits) == 1, seed
    # another file name is another salt: at least one context lands elsewhere for some seed
    assert any(split_of("user.jsonl", s, 0.1, 0.5, seed) != split_of("other.jsonl", s, 0.1, 0.5, seed)
               for seed in range(5) for s in rows)
