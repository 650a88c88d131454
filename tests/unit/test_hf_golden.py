"""Golden tests: the scorers against the real tokenizers of their checkpoints and what their reference code does.

The tokenizer files are the real ones (``tests/fixtures/tokenizers``, provenance in ``tests/fixtures/README.md``),
checked first against the hub tokenizers' own recorded outputs. The models are tiny and random, with the real
vocabulary sizes, special tokens and label maps; each test asserts the exact input ids of a known pair, the answer
token ids or label index read, and the prompt text, each quoted from the model's reference code or model card.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import hf_models as H  # noqa: E402
import real_models as R  # noqa: E402

from grapheval_plugins.check import hf  # noqa: E402
from grapheval_plugins.check import minicheck as mc  # noqa: E402

PREMISE, HYPOTHESIS = "The capital of France is Paris.", "Paris is in France."
GOLDEN = R.golden_ids()


_one_thread = pytest.fixture(autouse=True, scope="module")(H.one_torch_thread)


@pytest.fixture(scope="module")
def t5_tok():  # type: ignore[no-untyped-def]
    return R.t5_tokenizer()


@pytest.fixture(scope="module")
def deberta_tok():  # type: ignore[no-untyped-def]
    return R.deberta_v3_tokenizer()


@pytest.fixture(scope="module")
def roberta_tok():  # type: ignore[no-untyped-def]
    return R.roberta_tokenizer()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


# --------------------------------------------------------------------------- the files are the hub's
@pytest.mark.parametrize(("loader", "hub_model"), [
    ("t5_tokenizer", "google--flan-t5-base"),
    ("deberta_v3_tokenizer", "microsoft--deberta-v3-base"),
    ("roberta_tokenizer", "roberta-large-mnli"),
])
def test_fixture_tokenizers_reproduce_the_hub_tokenizers(loader: str, hub_model: str) -> None:
    tokenizer = getattr(R, loader)()
    recorded = R.fib(hub_model)
    assert len(recorded["datasets"]) == 37
    # Every case must agree except two kinds, which differ by transformers' tokenizer class, not by vocabulary
    # (see the fixtures' README): a fast tokenizer appends "</s>" to text that already ends in "</s>", and
    # DeBERTa-v3's converted tokenizer reads byte-fallback and some Unicode characters differently.
    cases = [c for c in recorded["datasets"] if "</s>" not in c["input"]]
    if loader == "deberta_v3_tokenizer":
        cases = [c for c in cases if c["input"].isascii()]
    assert len(cases) >= 22
    for case in cases:
        assert tokenizer(case["input"])["input_ids"] == case["ids"], case["input"]
    for token, token_id in recorded["special_tokens"].items():
        assert tokenizer.convert_tokens_to_ids(token) == token_id, token
    assert tokenizer("a a", "b b b b")["input_ids"] == recorded["pair_encode"]["input_ids"]


def test_t5_vocabulary_facts_behind_the_answer_tokens(t5_tok) -> None:  # type: ignore[no-untyped-def]
    facts = GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["no_special"]
    assert t5_tok("1", add_special_tokens=False)["input_ids"] == facts["1"] == [209]
    assert t5_tok("0", add_special_tokens=False)["input_ids"] == facts["0"] == [3, 632]  # "▁" + "0": no "▁0" piece
    assert t5_tok.convert_ids_to_tokens([3, 209, 632]) == ["▁", "▁1", "0"]
    assert hf.first_answer_token(t5_tok, "1") == 209 and hf.first_answer_token(t5_tok, "0") == 3


# --------------------------------------------------------------------------- HHEM-2.1-Open
@pytest.fixture(scope="module")
def hhem_parts(root: Path, t5_tok):  # type: ignore[no-untyped-def]
    foundation = R.hhem_foundation(root / "flan-t5-base", t5_tok)
    model = R.hhem_token_classifier(foundation)
    folder = H.save_hhem(root / "hhem", model, foundation)
    return folder, model, foundation


def test_hhem_prompt_ids_and_label_read(hhem_parts, t5_tok) -> None:  # type: ignore[no-untyped-def]
    """HHEMv2Config (configuration_hhem_v2.py of vectara/hallucination_evaluation_model):

        prompt = "<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise: {text1}\\n\\nHypothesis: {text2}"

    and HHEMv2ForSequenceClassification.predict (modeling_hhem_v2.py): the tokenizer called with its default special
    tokens and ``padding=True``, the score ``softmax(logits[:, 0, :])[:, 1]`` (label 1 = consistent).
    """
    folder, model, _ = hhem_parts
    assert hf.HHEM_PROMPT.replace("{premise}", "{text1}").replace("{hypothesis}", "{text2}") == (
        "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
    )
    scorer = hf.HHEMScorer(folder, device="cpu")
    ids = scorer._encode([(PREMISE, HYPOTHESIS)])[0]["input_ids"]
    expected = GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["hhem_prompt_ids"]
    assert ids == expected
    assert ids[:2] == [0, 30197] and ids[-1] == 1  # the literal "<pad>" is the special id 0; "</s>" appended
    assert t5_tok.convert_ids_to_tokens(ids) == GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["hhem_prompt_tokens"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([expected])).logits
    reference = torch.softmax(logits[:, 0, :], dim=-1)[:, 1].item()
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(reference, abs=1e-6)
    assert reference != pytest.approx(torch.softmax(logits[:, 0, :], dim=-1)[:, 0].item(), abs=1e-3)


def test_hhem_reads_the_prompt_field_of_its_config(hhem_parts, root: Path, t5_tok) -> None:  # type: ignore[no-untyped-def]
    _, model, foundation = hhem_parts
    folder = H.save_hhem(root / "hhem-custom-prompt", model, foundation)
    config = json.loads((folder / "config.json").read_text())
    config["prompt"] = "<pad> Is it true? Premise: {text1} || Hypothesis: {text2}"
    (folder / "config.json").write_text(json.dumps(config))
    scorer = hf.HHEMScorer(folder, device="cpu")
    ids = scorer._encode([(PREMISE, HYPOTHESIS)])[0]["input_ids"]
    assert scorer.prompt == "<pad> Is it true? Premise: {premise} || Hypothesis: {hypothesis}"
    assert ids == t5_tok(f"<pad> Is it true? Premise: {PREMISE} || Hypothesis: {HYPOTHESIS}")["input_ids"]
    assert ids != GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["hhem_prompt_ids"]


def test_hhem_scores_a_long_premise_whole(hhem_parts) -> None:  # type: ignore[no-untyped-def]
    """HHEM-2.1-Open has no 512-token limit (T5 relative positions); its ``predict`` reads the whole premise."""
    folder, _, _ = hhem_parts
    scorer = hf.HHEMScorer(folder, device="cpu")
    premise = " ".join(f"Sentence number {i} says that the river flows north." for i in range(60))
    assert scorer.count_tokens(premise) > 600
    assert scorer.chunks(premise) == [premise]
    assert scorer.max_length == hf.HHEM_MAX_TOKENS == 2048
    huge = premise * 4  # ~2,900 tokens: above the documented bound, chunked
    assert len(scorer.chunks(huge)) > 1


# --------------------------------------------------------------------------- TRUE / TrueTeacher
@pytest.fixture(scope="module")
def trueteacher(root: Path, t5_tok):  # type: ignore[no-untyped-def]
    model = R.t5_seq2seq(seed=3, feed_forward_proj="relu", tie_word_embeddings=True)  # T5 v1 (11B) layout
    return R.save_t5_folder(root / "t5-trueteacher", model, t5_tok), model


def test_trueteacher_input_answer_tokens_and_score(trueteacher, t5_tok) -> None:  # type: ignore[no-untyped-def]
    """google/t5_11b_trueteacher_and_anli model card:

        The input format for the model is: "premise: GROUNDING_DOCUMENT hypothesis: HYPOTHESIS_SUMMARY".
        The model predicts a binary label ('1' - Factualy Consistent, '0' - Factualy Inconsistent).

    and its scoring example::

        input_ids = tokenizer(f'premise: {premise} hypothesis: {hypothesis}', return_tensors='pt').input_ids
        decoder_input_ids = torch.tensor([[tokenizer.pad_token_id]])
        outputs = model(input_ids=input_ids, decoder_input_ids=decoder_input_ids)
        logits = outputs.logits
        probs = torch.softmax(logits[0], dim=-1)
        one_token_id = tokenizer('1').input_ids[0]
        entailment_prob = probs[0, one_token_id].item()
    """
    folder, model = trueteacher
    scorer = hf.T5NLIScorer(folder, tokenizer=t5_tok, device="cpu").load()
    # "0" starts with "▁" (3) at decoder step 1; before, the scorer compared 209 with 632 (a second-step token).
    assert scorer.label_token_ids == (209, 3)
    assert t5_tok("1").input_ids[0] == 209
    ids = scorer._encode([(PREMISE, HYPOTHESIS)])[0]["input_ids"]
    assert ids == GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["true_prompt_ids"]
    assert ids == t5_tok(f"premise: {PREMISE} hypothesis: {HYPOTHESIS}").input_ids
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([[t5_tok.pad_token_id]])).logits
    probs = torch.softmax(logits[0], dim=-1)
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(probs[0, 209].item(), abs=1e-6)

    pair = hf.T5NLIScorer(folder, tokenizer=t5_tok, device="cpu", answer_softmax="pair")
    two_way = torch.softmax(logits[0, 0, [209, 3]], dim=-1)[0].item()
    assert pair.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(two_way, abs=1e-6)
    wrong = torch.softmax(logits[0, 0, [209, 632]], dim=-1)[0].item()
    assert two_way != pytest.approx(wrong, rel=0.5)  # the old pair [209, 632] reads another number


# --------------------------------------------------------------------------- MNLI cross-encoders
def test_nli_deberta_v3_pair_ids_and_entailment_index(root: Path, deberta_tok) -> None:  # type: ignore[no-untyped-def]
    """cross-encoder/nli-deberta-v3-base model card::

        scores = model.predict([('A man is eating pizza', 'A man eats something'), ...])
        label_mapping = ['contradiction', 'entailment', 'neutral']
    """
    model = R.deberta_v3_classifier(R.NLI_DEBERTA_V3_LABELS)
    folder = R.save_folder(root / "nli-deberta-v3", model, deberta_tok)
    scorer = hf.CrossEncoderNLIScorer(folder, tokenizer=deberta_tok, device="cpu").load()
    assert scorer.entailment_index == 1
    feature = scorer._encode([(PREMISE, HYPOTHESIS)])[0]
    assert feature["input_ids"] == GOLDEN["deberta_v3"]["pair_input_ids"]
    assert feature["token_type_ids"] == GOLDEN["deberta_v3"]["pair_token_type_ids"]
    with torch.no_grad():
        logits = model(**{k: torch.tensor([v]) for k, v in feature.items()}).logits
    expected = torch.softmax(logits, dim=-1)[0, 1].item()
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(expected, abs=1e-5)


def test_roberta_large_mnli_pair_ids_and_entailment_index(root: Path, roberta_tok) -> None:  # type: ignore[no-untyped-def]
    """roberta-large-mnli config.json: ``"id2label": {"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}``;
    pairs encode as ``<s> A </s></s> B </s>``."""
    model = R.roberta_classifier(R.ROBERTA_LARGE_MNLI_LABELS)
    folder = R.save_folder(root / "roberta-mnli", model, roberta_tok)
    scorer = hf.CrossEncoderNLIScorer(folder, tokenizer=roberta_tok, device="cpu").load()
    assert scorer.entailment_index == 2
    feature = scorer._encode([(PREMISE, HYPOTHESIS)])[0]
    assert feature["input_ids"] == GOLDEN["roberta"]["pair_input_ids"]
    with torch.no_grad():
        logits = model(**{k: torch.tensor([v]) for k, v in feature.items()}).logits
    expected = torch.softmax(logits, dim=-1)[0, 2].item()
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(expected, abs=1e-5)


# --------------------------------------------------------------------------- MiniCheck
MINICHECK_T5_QUOTE = """Liyan06/MiniCheck, minicheck/inference.py:

    original_text = [self.tokenizer.eos_token.join([one_doc, one_claim]) for one_doc, one_claim in zip(doc, claim)]
    ...
    model_inputs = self.tokenizer(['predict: ' + text for text in mini_batch], max_length=self.max_model_len,
                                  truncation=True, padding=True, return_tensors="pt")
    ...
    decoder_input_ids = torch.zeros((mini_batch_input['input_ids'].size(0), 1), dtype=torch.long)
    ...
    # 3 for no support and 209 for support
    label_logits = logits[:, torch.tensor([3, 209])].cpu()
    label_probs = torch.nn.functional.softmax(label_logits, dim=-1)
    ...
    max_support_prob = label_probs[:, 1].max().item()
"""


@pytest.fixture(scope="module")
def minicheck_t5(root: Path, t5_tok):  # type: ignore[no-untyped-def]
    model = R.t5_seq2seq(seed=5)
    return R.save_t5_folder(root / "minicheck-flan-t5", model, t5_tok), model


def test_minicheck_flan_t5_input_and_answer_tokens(minicheck_t5, t5_tok) -> None:  # type: ignore[no-untyped-def]
    assert "3 for no support and 209 for support" in MINICHECK_T5_QUOTE
    folder, model = minicheck_t5
    scorer = mc.load_minicheck(str(folder), tokenizer=t5_tok, device="cpu")
    assert isinstance(scorer, mc.MiniCheckT5Scorer) and scorer.max_length == 2048 and scorer.chunk_size == 500
    ids = scorer._encode([(PREMISE, HYPOTHESIS)])[0]["input_ids"]
    predict = t5_tok("predict:", add_special_tokens=False)["input_ids"]
    doc = GOLDEN["t5_flan_t5"]["T5Tokenizer_slow"]["true_prompt_ids"][3:10]  # "▁The capital of France is Paris."
    claim = [1919, 19, 16, 1410, 5]  # "▁Paris ▁is ▁in ▁France ." (from the same golden prompt)
    assert doc == [37, 1784, 13, 1410, 19, 1919, 5]
    assert ids == predict + doc + [1] + claim + [1]  # "</s>" between document and claim is the eos id, not text
    scorer.load()
    assert scorer.label_token_ids == (209, 3) and scorer.answer_softmax == "pair"
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits
    reference = torch.softmax(logits.squeeze(1)[:, torch.tensor([3, 209])], dim=-1)[:, 1].item()
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(reference, abs=1e-6)


def test_minicheck_encoders_input_and_label(root: Path, roberta_tok, deberta_tok) -> None:  # type: ignore[no-untyped-def]
    """inference.py, for roberta-large / deberta-v3-large: ``config = AutoConfig.from_pretrained(ckpt,
    num_labels=2, ...)``, the text ``eos_token.join([doc, claim])`` tokenized alone (not as a pair), and
    ``label_probs = F.softmax(logits, dim=1)``; ``max_support_prob = label_probs[:, 1].max()``."""
    two = {0: "LABEL_0", 1: "LABEL_1"}
    roberta = R.save_folder(root / "minicheck-roberta", R.roberta_classifier(two), roberta_tok)
    scorer = mc.load_minicheck(str(roberta), tokenizer=roberta_tok, device="cpu")
    assert isinstance(scorer, mc.MiniCheckEncoderScorer) and scorer.max_length == 512
    pair = GOLDEN["roberta"]["pair_input_ids"]  # <s> doc </s></s> claim </s>
    assert scorer._encode([(PREMISE, HYPOTHESIS)])[0]["input_ids"] == pair[:9] + pair[10:]  # one </s> between
    scorer.load()
    assert scorer.entailment_index == 1

    deberta_model = R.deberta_v3_classifier(two)
    deberta = R.save_folder(root / "minicheck-deberta", deberta_model, deberta_tok)
    scorer = mc.load_minicheck(str(deberta), tokenizer=deberta_tok, device="cpu")
    assert scorer.max_length == 2048 and scorer.chunk_size == 400
    feature = scorer._encode([(PREMISE, HYPOTHESIS)])[0]
    assert feature["input_ids"] == GOLDEN["deberta_v3"]["pair_input_ids"]  # [CLS] doc [SEP] claim [SEP]
    assert set(feature["token_type_ids"]) == {0}  # one text, not a pair
    with torch.no_grad():
        logits = deberta_model(**{k: torch.tensor([v]) for k, v in feature.items()}).logits
    assert scorer.predict_support([(PREMISE, HYPOTHESIS)])[0] == pytest.approx(
        torch.softmax(logits, dim=1)[0, 1].item(), abs=1e-5)


def test_minicheck_chunks_like_the_reference(minicheck_t5, t5_tok) -> None:  # type: ignore[no-untyped-def]
    """inference.py: sentences (each line on its own) packed while ``current_word_count + sentence_word_count <=
    n`` (n = 500 words for flan-t5-large), chunks joined by ' ', ``chunk.replace(" \\n ", '\\n').strip()``."""
    folder, _ = minicheck_t5
    scorer = mc.load_minicheck(str(folder), tokenizer=t5_tok, device="cpu", chunk_size=20)
    doc = "Anna lives in Oslo. She works at the port. " * 4 + "\nThe port handles ships. Ships carry grain. " * 4
    chunks = scorer.chunks(doc)
    assert len(chunks) > 2 and all(len(c.split()) <= 20 for c in chunks)
    assert " ".join(chunks).split() == doc.split()  # every word once, in order
    assert all(c.endswith(".") for c in chunks)  # sentences kept whole
    claims = ["Anna lives in Oslo.", "Ships carry grain."]
    for claim, result in zip(claims, scorer.check([doc, doc], claims)):
        support = scorer.predict_support([(c, claim) for c in chunks])
        assert result.chunk == chunks[support.index(max(support))]  # max over chunks, as the reference
        assert result.p_unsupported == pytest.approx(1.0 - max(support), abs=1e-6)


def test_graph_eval_with_the_minicheck_spec_end_to_end(minicheck_t5, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins import GraphEval
    from grapheval_plugins.testing import ScriptedChatModel

    folder, _ = minicheck_t5
    monkeypatch.setitem(mc.MINICHECK_MODELS, "flan-t5-large", str(folder))  # the hub name -> a local copy
    llm = ScriptedChatModel(responses=['<python>[["Paris", "is in", "France"]]</python>'])
    engine = GraphEval(llm=llm, scorer="minicheck", cache=False)
    report = engine.evaluate(context=[PREMISE, "Berlin is in Germany."], output=HYPOTHESIS)
    assert report.ok, report.errors
    assert engine.scorer.name == f"minicheck:{folder}" and isinstance(engine.scorer, mc.MiniCheckT5Scorer)
    claim = report.claims[0]
    assert claim.claim == "Paris is in France" and claim.evidence in (PREMISE, "Berlin is in Germany.")
    assert 0.0 <= claim.p_unsupported <= 1.0 and report.hallucinated is (claim.p_unsupported > 0.5)


# --------------------------------------------------------------------------- revisions in specs
def test_scorer_specs_take_a_revision(tmp_path: Path) -> None:
    from grapheval_plugins.exceptions import ModelLoadError
    from grapheval_plugins.models import resolve_scorer, split_revision

    hhem = resolve_scorer("hhem@0123abc")
    assert isinstance(hhem, hf.HHEMScorer) and hhem.hub.revision == "0123abc"
    assert hhem.hub.kwargs() == {"revision": "0123abc"}
    assert resolve_scorer("hhem").hub.revision == hf.HHEM_REVISION
    t5 = resolve_scorer("t5:google/t5_11b_trueteacher_and_anli@v2")
    assert isinstance(t5, hf.T5NLIScorer) and (t5.model_name, t5.hub.revision) == ("google/t5_11b_trueteacher_and_anli", "v2")
    nli = resolve_scorer("nli:cross-encoder/nli-deberta-v3-base", revision="main")
    assert nli.hub.revision == "main"
    mini = resolve_scorer("minicheck:roberta-large@refs/pr/1")
    assert isinstance(mini, mc.MiniCheckEncoderScorer) and mini.hub.revision == "refs/pr/1"
    with pytest.raises(ModelLoadError, match="give one"):
        resolve_scorer("hhem@abc", revision="def")
    odd = tmp_path / "model@v1"
    odd.mkdir()
    assert split_revision(str(odd)) == (str(odd), None)  # an existing path keeps its "@"


def test_a_spec_revision_reaches_the_config_the_tokenizer_and_the_weights(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, roberta_tok
) -> None:
    import transformers

    from grapheval_plugins.models import resolve_scorer

    seen: dict[str, dict[str, object]] = {}

    def tokenizer(name: str, **kwargs: object):  # type: ignore[no-untyped-def]
        seen["tokenizer"] = {"name": name, **kwargs}
        return roberta_tok

    def model(name: str, **kwargs: object):  # type: ignore[no-untyped-def]
        seen["model"] = {"name": name, **kwargs}
        return R.roberta_classifier(R.ROBERTA_LARGE_MNLI_LABELS)

    def config(name: str, **kwargs: object):  # type: ignore[no-untyped-def]
        seen["config"] = {"name": name, **kwargs}
        return {"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"]}, {}

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer)
    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", model)
    monkeypatch.setattr(transformers.PretrainedConfig, "get_config_dict", config)
    for spec in ("nli:FacebookAI/roberta-large-mnli@f0e1d2c", "FacebookAI/roberta-large-mnli@f0e1d2c"):
        seen.clear()
        scorer = resolve_scorer(spec, device="cpu").load()
        assert scorer.entailment_index == 2
        for part in ("tokenizer", "model"):
            assert seen[part]["name"] == "FacebookAI/roberta-large-mnli" and seen[part]["revision"] == "f0e1d2c"
    assert seen["config"]["revision"] == "f0e1d2c"  # the bare hub name: its kind read from the config at that revision
