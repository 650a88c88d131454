"""The model cards' own examples, through our scorers, on the real weights (see conftest.py for when they run)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.hub

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_hhem_2_1_open_reproduces_its_model_card() -> None:
    """vectara/hallucination_evaluation_model, README "Using with AutoModel":

    pairs = [ # Test data, List[Tuple[str, str]]
        ("The capital of France is Berlin.", "The capital of France is Paris."), # factual but hallucinated
        ('I am in California', 'I am in United States.'), # Consistent
        ('I am in United States', 'I am in California.'), # Hallucinated
        ("A person on a horse jumps over a broken down airplane.", "A person is outdoors, on a horse."),
        ("A boy is jumping on skateboard in the middle of a red bridge.", "The boy skates down the sidewalk on a red bridge"),
        ("A man with blond-hair, and a brown shirt drinking out of a public water fountain.", "A blond man wearing a brown shirt is reading a book."),
        ("Mark Wahlberg was a fan of Manny.", "Manny was a fan of Mark Wahlberg.")
    ]
    ...
    model.predict(pairs) # note the predict() method. Do not do model(pairs).
    # tensor([0.0111, 0.6474, 0.1290, 0.8969, 0.1846, 0.0050, 0.0543])
    """
    from grapheval_plugins.check.hf import HHEMScorer

    pairs = [
        ("The capital of France is Berlin.", "The capital of France is Paris."),
        ("I am in California", "I am in United States."),
        ("I am in United States", "I am in California."),
        ("A person on a horse jumps over a broken down airplane.", "A person is outdoors, on a horse."),
        ("A boy is jumping on skateboard in the middle of a red bridge.",
         "The boy skates down the sidewalk on a red bridge"),
        ("A man with blond-hair, and a brown shirt drinking out of a public water fountain.",
         "A blond man wearing a brown shirt is reading a book."),
        ("Mark Wahlberg was a fan of Manny.", "Manny was a fan of Mark Wahlberg."),
    ]
    card = [0.0111, 0.6474, 0.1290, 0.8969, 0.1846, 0.0050, 0.0543]
    scores = HHEMScorer(device="cpu", dtype="float32").predict_support(pairs)
    assert scores == pytest.approx(card, abs=1e-2)


def test_minicheck_flan_t5_large_reproduces_its_readme() -> None:
    """Liyan06/MiniCheck README, "Below is a simple use case":

    doc = "A group of students gather in the school library to study for their upcoming final exams."
    claim_1 = "The students are preparing for an examination."
    claim_2 = "The students are on vacation."
    scorer = MiniCheck(model_name='flan-t5-large', cache_dir='./ckpts')
    pred_label, raw_prob, _, _ = scorer.score(docs=[doc, doc], claims=[claim_1, claim_2])
    print(pred_label) # [1, 0]
    print(raw_prob)   # [0.9805923700332642, 0.007121307775378227]
    """
    from grapheval_plugins.check.minicheck import load_minicheck

    doc = "A group of students gather in the school library to study for their upcoming final exams."
    claims = ["The students are preparing for an examination.", "The students are on vacation."]
    scorer = load_minicheck("flan-t5-large", device="cpu", dtype="float32")
    support = [1.0 - s.p_unsupported for s in scorer.check([doc, doc], claims)]
    assert support == pytest.approx([0.9805923700332642, 0.007121307775378227], abs=1e-2)


@pytest.mark.skipif(os.environ.get("GRAPHEVAL_HUB_LARGE", "") != "1",
                    reason="T5-11B (45 GB): set GRAPHEVAL_HUB_LARGE=1 to download it")
def test_trueteacher_answers_its_model_card_examples() -> None:
    """google/t5_11b_trueteacher_and_anli, README "Usage examples" (its card gives labels, not scores):

    premise = 'the sun is shining'
    for hypothesis, expected in [('the sun is out in the sky', '1'),
                                 ('the cat is shiny', '0')]:

    and, for scoring, ``probs = torch.softmax(logits[0], dim=-1)``; ``one_token_id = tokenizer('1').input_ids[0]``;
    ``entailment_prob = probs[0, one_token_id].item()``.
    """
    from grapheval_plugins.check.hf import T5NLIScorer

    scorer = T5NLIScorer("google/t5_11b_trueteacher_and_anli", device="cpu", dtype="float32")
    sky, cat = scorer.predict_support([("the sun is shining", "the sun is out in the sky"),
                                       ("the sun is shining", "the cat is shiny")])
    assert sky > 0.5 > cat
