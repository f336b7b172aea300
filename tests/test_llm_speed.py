"""The fast local LLM path (issue 16): batched sampling, the shared prompt prefix encoded
once, early stops, and AdvEval's first-line stop -- each checked against the slow path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robusteval.attacks.adveval import first_line_settled
from robusteval.llm.clean import clean_candidate
from robusteval.llm.decode import Decoding, common_prefix, decode_rows

SHARED = "the cat sat on the mat . the dog ate my homework . is this a good answer ? yes it is ."
PROMPTS = [f"{SHARED} how are you today ?", f"{SHARED} what do you think about the weather ?",
           f"{SHARED} we went to the park .", "hello", f"{SHARED} no"]


@pytest.fixture(scope="module")
def llm(tiny_lm):
    from robusteval.llm.backends import LocalCausalLM

    return LocalCausalLM(model=str(tiny_lm))


def test_common_prefix() -> None:
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix([[5], [6]]) == 0 and common_prefix([]) == 0


def test_shared_prefix_gives_exactly_the_tokens_of_unshared_and_of_generate(llm) -> None:
    """Greedy tokens with the prefix's KV cache reused == without == HF generate, one prompt
    at a time (exact token equality)."""
    import torch

    seqs = llm.token_ids(PROMPTS[:3])
    assert common_prefix(seqs) >= 20
    how = Decoding(temperature=0.0, max_new_tokens=10, eos=llm._eos)
    runs = {}
    for share in (True, False):
        llm.share_prefix = share
        before = llm.batcher.tokens_shared
        with torch.no_grad():
            runs[share] = decode_rows(llm.batcher, seqs, 1, how, None, llm._text)
        assert (llm.batcher.tokens_shared > before) == share
    llm.share_prefix = True
    assert runs[True] == runs[False]
    for seq, rows in zip(seqs, runs[True], strict=True):
        ids = torch.tensor([seq])
        with torch.no_grad():
            ref = llm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=10, pad_token_id=llm.tokenizer.pad_token_id)
        assert rows[0] == ref[0, len(seq):].tolist()


def test_sampled_answers_do_not_depend_on_sharing_batching_or_company(llm) -> None:
    kw = {"n": 4, "temperature": 1.0, "max_new_tokens": 8, "seed": 11}
    batched = llm.generate(PROMPTS, **kw)
    llm.share_prefix = False
    unshared = llm.generate(PROMPTS, **kw)
    llm.share_prefix = True
    alone = [llm.generate([p], **kw)[0] for p in PROMPTS]
    llm.max_batch_rows = 4  # one prompt's samples per batch
    small = llm.generate(PROMPTS[::-1], **kw)[::-1]
    llm.max_batch_rows = 32
    assert batched == unshared == alone == small
    assert len({t for x in batched for t in x}) > 5
    assert llm.generate(PROMPTS + PROMPTS[:1], **kw) == batched + batched[:1]  # duplicates asked once


def test_next_token_probs_with_and_without_the_shared_prefix(llm) -> None:
    import numpy as np

    opts = ["yes", "no", "the"]
    shared = llm.next_token_probs(PROMPTS, opts)
    llm.share_prefix = False
    plain = llm.next_token_probs(PROMPTS, opts)
    llm.share_prefix = True
    alone = np.vstack([llm.next_token_probs([p], opts) for p in PROMPTS])
    # batched vs alone: padding moves float32 sums in the last digits (as in test_hf_classifier)
    assert np.allclose(shared, plain, atol=1e-5) and np.allclose(shared, alone, atol=1e-5)
    assert np.allclose(shared.sum(1), 1.0)


def test_stop_ends_an_answer_early_without_changing_what_came_before(llm) -> None:
    kw = {"n": 3, "temperature": 1.0, "max_new_tokens": 8, "seed": 2}
    full = llm.generate(PROMPTS, **kw)
    cut = llm.generate(PROMPTS, stop=lambda text: len(text.split()) >= 3, **kw)
    for f_rows, c_rows in zip(full, cut, strict=True):
        for f, c in zip(f_rows, c_rows, strict=True):
            assert f.startswith(c) and len(c.split()) == min(3, len(f.split()))


PIECES = [*'ab 1.-:"\n\r', "\r\n", "Response:", "\u2028", "Summary :"]
def test_tiered_attention_gives_the_tokens_of_flat_decoding(llm) -> None:
    """The decode step that reads each prompt's cache once for its n rows (and lets ended rows
    leave) picks exactly the tokens of the plain per-row cache, greedy and sampled."""
    import torch

    from robusteval.llm import tiered
    from robusteval.llm.decode import row_seed

    assert llm.batcher.tiered and llm.model.config._attn_implementation == tiered.NAME
    seqs = llm.token_ids(PROMPTS)
    seeds = [[row_seed(4, p, j) for j in range(3)] for p in PROMPTS]
    greedy = Decoding(temperature=0.0, max_new_tokens=9, eos=llm._eos)
    sampled = Decoding(temperature=1.0, max_new_tokens=9, eos=llm._eos, top_k=llm._top_k)
    stop = lambda text: len(text.split()) >= 2 + len(text) % 5  # noqa: E731 -- rows end at different steps
    runs = {}
    for mode in (True, False):
        llm.batcher.tiered = mode
        with torch.no_grad():
            runs[mode] = (decode_rows(llm.batcher, seqs, 1, greedy, None, llm._text),
                          decode_rows(llm.batcher, seqs, 3, sampled, seeds, llm._text),
                          decode_rows(llm.batcher, seqs, 3, sampled, seeds, llm._text, stop))
    llm.batcher.tiered = True
    assert runs[True] == runs[False]
    lengths = {len(row) for rows in runs[True][2] for row in rows}
    assert len(lengths) > 1  # rows really left the batch at different steps


def test_a_model_that_ignores_the_tiered_step_decodes_flat(tiny_lm) -> None:
    from robusteval.llm.backends import LocalCausalLM

    flat = LocalCausalLM(model=str(tiny_lm), tiered_attention=False)
    assert not flat.batcher.tiered and flat.model.config._attn_implementation == "sdpa"
    want = flat.generate(PROMPTS, n=2, temperature=1.0, max_new_tokens=5, seed=1)
    flat.batcher.tiered = True  # as if installed, but the model's attention is plain sdpa
    assert flat.generate(PROMPTS, n=2, temperature=1.0, max_new_tokens=5, seed=1) == want
    assert not flat.batcher.tiered  # noticed and switched off


TEXT = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@given(TEXT)
def test_first_line_settled_means_the_candidate_is_final(text: str) -> None:
    """Once a generation's first kept line is complete, nothing after it changes the candidate
    (so AdvEval may stop the generator there)."""
    for i in range(len(text) + 1):
        if first_line_settled(text[:i]):
            assert clean_candidate(text[:i].strip()) == clean_candidate(text)
            break
    if text.endswith("\n"):  # every line complete: settled exactly when there is a candidate
        assert first_line_settled(text) == bool(clean_candidate(text))
    assert first_line_settled("Response:\nfine thanks\nmore") and not first_line_settled("Response:\nfine")


def test_adveval_asks_the_generator_to_stop_after_the_first_line() -> None:
    import numpy as np

    from robusteval import Sample, attacks
    from robusteval.attacks.victim import CachedVictim
    from robusteval.metrics.base import Metric

    class Gen:
        name = "gen"
        calls = 0
        cache_hits = 0

        def __init__(self) -> None:
            self.stops: list[object] = []

        def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0, *, ids=None, stop=None):
            self.stops.append(stop)
            return [[f"cand {i}\nmore" for i in range(n)] for _ in prompts]

    class Flat(Metric):
        name = "flat"

        def _score(self, samples):
            return np.full(len(samples), 50.0)

    gen = Gen()
    a = attacks.load("adveval-pos", generator=gen, gold=Flat(), candidates=3, max_iters=2)
    s = Sample(id="d", task="dialogue", response="sure .", context=("lunch ?",))
    r = a.run(s, CachedVictim(Flat()))
    assert gen.stops and all(stop is first_line_settled for stop in gen.stops)
    assert {h["text"] for h in r.trace[1:]} == {"cand 0", "cand 1", "cand 2"}
