"""HuggingFace scorers on tiny randomly initialised models built offline (loading, ties, labels, batching, chunks).

These check the plumbing, not quality: the models are random.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_models as H  # noqa: E402

from grapheval_plugins.check import hf  # noqa: E402
from grapheval_plugins.check._runtime import resolve_dtype, select_device  # noqa: E402
from grapheval_plugins.exceptions import InputError, ModelLoadError  # noqa: E402

PAIRS = H.PAIRS


# --------------------------------------------------------------------------- fixtures (built once per session)
_one_thread = pytest.fixture(autouse=True, scope="module")(H.one_torch_thread)


@pytest.fixture(scope="session")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_models")


@pytest.fixture(scope="session")
def t5_tok():  # type: ignore[no-untyped-def]
    return H.t5_tokenizer()


@pytest.fixture(scope="session")
def foundation(root: Path, t5_tok) -> Path:  # type: ignore[no-untyped-def]
    return H.save_foundation(root / "flan-t5-tiny", t5_tok)


@pytest.fixture(scope="session")
def hhem_ref(foundation: Path):  # type: ignore[no-untyped-def]
    return H.hhem_reference_model(foundation)


@pytest.fixture(scope="session")
def hhem_dir(root: Path, hhem_ref, foundation: Path) -> Path:  # type: ignore[no-untyped-def]
    return H.save_hhem(root / "hhem", hhem_ref, foundation)


@pytest.fixture(scope="session")
def hhem(hhem_dir: Path) -> hf.HHEMScorer:
    return hf.HHEMScorer(hhem_dir, device="cpu", batch_size=2).load()


@pytest.fixture(scope="session")
def t5_model(root: Path, t5_tok):  # type: ignore[no-untyped-def]
    return H.save_t5_seq2seq(root / "t5-nli", t5_tok)


@pytest.fixture(scope="session")
def t5(t5_model) -> hf.T5NLIScorer:  # type: ignore[no-untyped-def]
    # The two-way reading over the answers' first tokens; the default (the whole vocabulary, as the TrueTeacher
    # card) is checked against the real T5 vocabulary in test_hf_golden.py.
    return hf.T5NLIScorer(t5_model[0], device="cpu", batch_size=2, answer_softmax="pair").load()


@pytest.fixture(scope="session")
def bert_tok():  # type: ignore[no-untyped-def]
    return H.bert_tokenizer()


@pytest.fixture(scope="session")
def bert_ref():  # type: ignore[no-untyped-def]
    return H.bert_classifier({0: "entailment", 1: "neutral", 2: "contradiction"})


@pytest.fixture(scope="session")
def bert_dir(root: Path, bert_ref, bert_tok) -> Path:  # type: ignore[no-untyped-def]
    return H.save_with_tokenizer(root / "bert-mnli", bert_ref, bert_tok)


@pytest.fixture(scope="session")
def bert_reversed_dir(root: Path, bert_ref, bert_tok) -> Path:  # type: ignore[no-untyped-def]
    return H.save_with_tokenizer(root / "bert-mnli-rev", H.permuted_classifier(bert_ref, [2, 1, 0]), bert_tok)


@pytest.fixture(scope="session")
def nli(bert_dir: Path) -> hf.CrossEncoderNLIScorer:
    return hf.CrossEncoderNLIScorer(bert_dir, device="cpu", batch_size=2).load()


def _fresh(scorer: hf.HFScorer) -> hf.HFScorer:
    """An unloaded copy of a scorer, for tests that change the model."""
    kw: dict[str, object] = dict(device="cpu", batch_size=scorer.batch_size)
    if isinstance(scorer, hf.T5NLIScorer):
        kw["answer_softmax"] = scorer.answer_softmax
    return type(scorer)(scorer.model_name, **kw).load()  # type: ignore[arg-type]


# --------------------------------------------------------------------------- HHEM
def test_hhem_matches_the_reference_token_classifier_at_label_1(hhem: hf.HHEMScorer, hhem_ref, t5_tok) -> None:
    premise, hypothesis = PAIRS[0]
    text = hf.HHEM_PROMPT.format(premise=premise, hypothesis=hypothesis)
    assert text.startswith("<pad> Determine if the hypothesis is true given the premise?\n\nPremise: ")
    enc = t5_tok([text], return_tensors="pt")
    with torch.no_grad():
        logits = hhem_ref(**enc).logits[:, 0, :]
    expected = torch.softmax(logits, dim=-1)[0]
    got = hhem.predict_support([(premise, hypothesis)])[0]
    assert got == pytest.approx(float(expected[1]), abs=1e-5)
    assert abs(float(expected[1]) - float(expected[0])) > 1e-3  # label 0 would give a different answer


def test_hhem_reties_the_encoder_embedding_to_the_stored_shared_matrix(hhem: hf.HHEMScorer, hhem_ref) -> None:
    transformer = hhem.model.transformer
    assert transformer.encoder.embed_tokens.weight.data_ptr() == transformer.shared.weight.data_ptr()
    assert torch.equal(transformer.encoder.embed_tokens.weight, hhem_ref.transformer.shared.weight)


def test_hhem_label_mapping_reads_label_1_as_consistent(hhem_dir: Path) -> None:
    scorer = hf.HHEMScorer(hhem_dir, device="cpu").load()
    with torch.no_grad():
        scorer.model.classifier.weight.zero_()
        scorer.model.classifier.bias.copy_(torch.tensor([0.0, 2.0]))
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx([float(torch.sigmoid(torch.tensor(2.0)))] * 2)
    with torch.no_grad():
        scorer.model.classifier.bias.copy_(torch.tensor([2.0, 0.0]))
    assert scorer.predict_support(PAIRS[:1])[0] == pytest.approx(float(torch.sigmoid(torch.tensor(-2.0))))


def test_hhem_refuses_a_checkpoint_with_untied_embeddings(root: Path, hhem_ref, foundation: Path) -> None:
    def untie(state):  # type: ignore[no-untyped-def]
        state = dict(state)
        shared = state["t5.transformer.shared.weight"]
        state["t5.transformer.encoder.embed_tokens.weight"] = torch.randn_like(shared)
        return state

    folder = H.save_hhem(root / "hhem-untied", hhem_ref, foundation, transform=untie)
    with pytest.raises(ModelLoadError, match="differs from 'transformer.shared.weight'"):
        hf.HHEMScorer(folder, device="cpu").load()


def test_hhem_refuses_a_checkpoint_without_embeddings(root: Path, hhem_ref, foundation: Path) -> None:
    def drop(state):  # type: ignore[no-untyped-def]
        return {k: v for k, v in state.items() if "shared" not in k and "embed_tokens" not in k}

    folder = H.save_hhem(root / "hhem-noemb", hhem_ref, foundation, transform=drop)
    with pytest.raises(ModelLoadError, match="no embedding matrix"):
        hf.HHEMScorer(folder, device="cpu").load()


def test_hhem_accepts_equal_copies_or_only_the_encoder_embedding(root: Path, hhem_ref, foundation: Path,
                                                                  hhem: hf.HHEMScorer) -> None:
    def only_encoder(state):  # type: ignore[no-untyped-def]
        state = dict(state)
        state["t5.transformer.encoder.embed_tokens.weight"] = state.pop("t5.transformer.shared.weight")
        return state

    folder = H.save_hhem(root / "hhem-enc", hhem_ref, foundation, transform=only_encoder)
    scorer = hf.HHEMScorer(folder, device="cpu").load()
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx(hhem.predict_support(PAIRS[:2]), abs=1e-6)


def test_tie_verifier_catches_a_broken_tie(hhem_dir: Path) -> None:
    scorer = hf.HHEMScorer(hhem_dir, device="cpu").load()
    transformer = scorer.model.transformer
    hf.verify_tied_embeddings(transformer)
    transformer.encoder.embed_tokens.weight = torch.nn.Parameter(torch.randn_like(transformer.shared.weight))
    with pytest.raises(ModelLoadError, match="not tied"):
        hf.verify_tied_embeddings(transformer)


def test_hhem_nested_t5_config_and_own_tokenizer_give_the_same_scores(root: Path, hhem_ref, t5_tok,
                                                                       hhem: hf.HHEMScorer) -> None:
    folder = H.save_hhem(root / "hhem-nested", hhem_ref, None, nested_config=True, tokenizer=t5_tok)
    scorer = hf.HHEMScorer(folder, device="cpu")
    assert scorer.predict_support(PAIRS) == pytest.approx(hhem.predict_support(PAIRS), abs=1e-6)


def test_hhem_pins_its_revision_and_the_foundation_tokenizer_revision() -> None:
    scorer = hf.HHEMScorer()
    assert scorer.hub.revision == hf.HHEM_REVISION and len(hf.HHEM_REVISION) == 40
    assert scorer.name == "hhem:vectara/hallucination_evaluation_model"
    assert scorer._hub_revision_for(hf.FLAN_T5_BASE) == hf.FLAN_T5_BASE_REVISION
    assert hf.HHEMScorer("org/fine-tuned-hhem").hub.revision is None


# --------------------------------------------------------------------------- T5 "1"/"0"
def test_t5_matches_first_decoder_step_over_1_and_0(t5: hf.T5NLIScorer, t5_model, t5_tok) -> None:
    _, reference = t5_model
    yes, no = t5_tok.convert_tokens_to_ids("1"), t5_tok.convert_tokens_to_ids("0")
    assert t5.label_token_ids == (yes, no)
    premise, hypothesis = PAIRS[1]
    enc = t5_tok([f"premise: {premise} hypothesis: {hypothesis}"], return_tensors="pt")
    with torch.no_grad():
        logits = reference(**enc, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    expected = torch.softmax(logits[[yes, no]], dim=-1)[0]
    assert t5.predict_support([(premise, hypothesis)])[0] == pytest.approx(float(expected), abs=1e-5)


def test_t5_probability_follows_the_1_and_0_logits_only(t5: hf.T5NLIScorer, t5_tok) -> None:
    scorer = _fresh(t5)
    model = scorer.model
    yes, no = scorer.label_token_ids  # type: ignore[misc]
    other = t5_tok.convert_tokens_to_ids("paris")
    head = torch.nn.Linear(model.config.d_model, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[yes], head.bias[no], head.bias[other] = 3.0, 1.0, 50.0  # "paris" wins but is no answer
    model.lm_head = head
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx([float(torch.sigmoid(torch.tensor(2.0)))] * 2)
    with torch.no_grad():
        head.bias[yes], head.bias[no] = 1.0, 3.0
    assert scorer.predict_support(PAIRS[:1])[0] < 0.5


def test_t5_rejects_answers_that_start_with_the_same_token(t5_model) -> None:
    # The answers are told apart at the first decoder step, by their first tokens.
    scorer = hf.T5NLIScorer(t5_model[0], device="cpu", label_tokens=("paris is", "paris"))
    with pytest.raises(ModelLoadError, match="start with the same token"):
        scorer.load()


# --------------------------------------------------------------------------- cross-encoders
def test_cross_encoder_reads_entailment_from_id2label_in_either_order(nli: hf.CrossEncoderNLIScorer,
                                                                     bert_reversed_dir: Path) -> None:
    reversed_ = hf.CrossEncoderNLIScorer(bert_reversed_dir, device="cpu").load()
    assert (nli.entailment_index, reversed_.entailment_index) == (0, 2)
    assert reversed_.predict_support(PAIRS) == pytest.approx(nli.predict_support(PAIRS), abs=1e-5)


def test_cross_encoder_probability_is_softmax_of_entailment_over_all_labels(nli) -> None:  # type: ignore[no-untyped-def]
    scorer = _fresh(nli)
    with torch.no_grad():
        scorer.model.classifier.weight.zero_()
        scorer.model.classifier.bias.copy_(torch.tensor([1.0, 0.0, 2.0]))
    expected = float(torch.softmax(torch.tensor([1.0, 0.0, 2.0]), dim=0)[0])
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx([expected] * 2, abs=1e-6)


def test_binary_labels_need_an_entailment_label(root: Path, bert_tok) -> None:  # type: ignore[no-untyped-def]
    model = H.bert_classifier({0: "LABEL_0", 1: "LABEL_1"})
    folder = H.save_with_tokenizer(root / "bert-binary", model, bert_tok)
    with pytest.raises(ModelLoadError, match="entailment_label="):
        hf.CrossEncoderNLIScorer(folder, device="cpu").load()
    scorer = hf.CrossEncoderNLIScorer(folder, device="cpu", entailment_label="label_1").load()
    assert scorer.entailment_index == 1
    with torch.no_grad():
        scorer.model.classifier.weight.zero_()
        scorer.model.classifier.bias.copy_(torch.tensor([0.0, 1.5]))
    assert scorer.predict_support(PAIRS[:1])[0] == pytest.approx(float(torch.sigmoid(torch.tensor(1.5))))


def test_entailment_index_rules() -> None:
    assert hf.entailment_index({"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}) == 2
    assert hf.entailment_index({0: "not_entailment", 1: "entailment"}) == 1
    assert hf.entailment_index({0: "inconsistent", 1: "consistent"}, label=1) == 1
    with pytest.raises(ModelLoadError):
        hf.entailment_index({0: "inconsistent", 1: "consistent"})
    with pytest.raises(InputError):
        hf.entailment_index({0: "a", 1: "b"}, label=5)


# --------------------------------------------------------------------------- batching and order
@pytest.mark.parametrize("which", ["hhem", "t5", "nli"])
def test_batched_scores_equal_one_by_one_in_input_order(which: str, request: pytest.FixtureRequest) -> None:
    scorer = request.getfixturevalue(which)
    batched = scorer.predict_support(PAIRS)
    singles = [scorer.predict_support([pair])[0] for pair in PAIRS]
    assert batched == pytest.approx(singles, abs=1e-5)
    assert scorer.predict_support(PAIRS[::-1]) == pytest.approx(batched[::-1], abs=1e-5)
    assert len(set(round(s, 6) for s in batched)) > 1  # the pairs really score differently


def test_pairs_are_batched_longest_first(nli: hf.CrossEncoderNLIScorer, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    original = nli._run_batch

    def spy(features):  # type: ignore[no-untyped-def]
        seen.append([len(f["input_ids"]) for f in features])
        return original(features)

    monkeypatch.setattr(nli, "_run_batch", spy)
    nli.predict_support(PAIRS)
    flat = [n for batch in seen for n in batch]
    assert [len(b) for b in seen] == [2, 2, 1]
    assert flat == sorted(flat, reverse=True) and len(set(flat)) > 1


def test_empty_input_and_bad_pairs(nli: hf.CrossEncoderNLIScorer) -> None:
    assert nli.predict_support([]) == []
    with pytest.raises(InputError, match=r"pairs\[1\]"):
        nli.predict_support([("a", "b"), ("only one",)])  # type: ignore[list-item]


# --------------------------------------------------------------------------- token budget and chunking
def test_token_budget_uses_the_real_tokenizer(hhem: hf.HHEMScorer, t5_tok) -> None:
    template_tokens = len(t5_tok(hf.HHEM_PROMPT.format(premise="", hypothesis="")).input_ids)
    assert hhem.max_premise_tokens == hf.HHEM_MAX_TOKENS - template_tokens - 64
    text = "paris is the capital of france , about a million people live in paris ."
    assert hhem.count_tokens(text) == len(t5_tok(text, add_special_tokens=False).input_ids) == 15


def test_long_context_is_chunked_and_the_best_chunk_wins(bert_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    scorer = hf.CrossEncoderNLIScorer(bert_dir, device="cpu", max_length=64, hypothesis_tokens=16)
    assert scorer.max_premise_tokens == 64 - 3 - 16
    sentences = [" ".join(H.WORDS[i: i + 9]) + " ." for i in range(0, 90, 9)]
    context = " ".join(sentences * 2)
    claim = "the eiffel tower is in paris"
    chunks = scorer.chunks(context)
    assert len(chunks) > 2
    assert all(scorer.count_tokens(c) <= scorer.max_premise_tokens for c in chunks)
    with caplog.at_level(logging.WARNING, logger="grapheval_plugins.check.hf"):
        [result] = scorer.check([context], [claim])
    assert not [r for r in caplog.records if "exceeded max_length" in r.getMessage()]  # nothing was cut
    per_chunk = scorer.predict_support([(c, claim) for c in chunks])
    best = max(range(len(chunks)), key=lambda i: (per_chunk[i], -i))
    assert result.chunk_index == best and result.chunk == chunks[best]
    assert result.p_unsupported == pytest.approx(1 - per_chunk[best], abs=1e-6)


def test_premise_budget_can_be_lowered_not_raised(bert_dir: Path) -> None:
    scorer = hf.CrossEncoderNLIScorer(bert_dir, device="cpu", max_length=64, hypothesis_tokens=16)
    scorer.max_premise_tokens = 20
    assert scorer.max_premise_tokens == 20
    scorer.max_premise_tokens = 10_000
    assert scorer.max_premise_tokens == 64 - 3 - 16
    with pytest.raises(InputError):
        scorer.max_premise_tokens = 2


def test_concurrent_checks_from_threads_match_sequential_ones(bert_dir: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    scorer = hf.CrossEncoderNLIScorer(bert_dir, device="cpu", max_length=64, hypothesis_tokens=16)
    contexts = [" ".join(H.WORDS[i:] + H.WORDS[:i]) for i in range(0, 60, 10)]
    claims = ["paris is in france", "the louvre is a museum", "the king founded the city"]
    jobs = [([c] * len(claims), claims) for c in contexts]
    sequential = [scorer.check(*job) for job in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda job: scorer.check(*job), jobs))
    flat = [r.p_unsupported for rs in threaded for r in rs]
    assert flat == pytest.approx([r.p_unsupported for rs in sequential for r in rs], abs=1e-5)
    assert [[r.chunk_index for r in rs] for rs in threaded] == [[r.chunk_index for r in rs] for rs in sequential]


def test_an_overlong_pair_loses_premise_not_hypothesis(bert_dir: Path, bert_tok,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    scorer = hf.CrossEncoderNLIScorer(bert_dir, device="cpu", max_length=48, hypothesis_tokens=8)
    hypothesis = "the louvre holds the mona lisa"
    with caplog.at_level(logging.WARNING, logger="grapheval_plugins.check.hf"):
        [feature] = scorer._encode([(" ".join(H.WORDS), hypothesis)])
    assert len(feature["input_ids"]) <= 48
    tail = bert_tok(hypothesis, add_special_tokens=False).input_ids + [bert_tok.sep_token_id]
    assert feature["input_ids"][-len(tail):] == tail
    assert any("exceeded max_length" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- device, dtype, laziness
def test_device_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert select_device(None).type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert select_device(None).type == "cuda"
    assert select_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert select_device(None).type == "mps"


def test_precision_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype(None, torch.device("cuda")) == torch.float16
    assert resolve_dtype(None, torch.device("cuda"), allow_fp16=False) == torch.float32  # T5 never in fp16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_dtype(None, torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("fp16", torch.device("cpu")) == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("int3", torch.device("cpu"))


def test_models_load_lazily(bert_dir: Path) -> None:
    scorer = hf.CrossEncoderNLIScorer(bert_dir, device="cpu")
    assert scorer._model is None and scorer._tokenizer is None
    assert scorer.count_tokens("paris is in france") == 4
    assert scorer._tokenizer is not None and scorer._model is None  # counting tokens loads no weights
    scorer.predict_support(PAIRS[:1])
    assert scorer._model is not None and scorer.device.type == "cpu"


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, grapheval_plugins.check.hf; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --------------------------------------------------------------------------- dispatch and errors
def test_load_hf_scorer_dispatches_on_the_config(hhem_dir: Path, t5_model, bert_dir: Path, root: Path) -> None:
    assert type(hf.load_hf_scorer(hhem_dir)) is hf.HHEMScorer
    assert type(hf.load_hf_scorer(t5_model[0])) is hf.T5NLIScorer
    scorer = hf.load_hf_scorer(bert_dir, entailment_label="entailment", batch_size=4)
    assert type(scorer) is hf.CrossEncoderNLIScorer and scorer.batch_size == 4
    assert scorer._model is None  # only config.json was read
    other = root / "gpt2-like"
    other.mkdir(exist_ok=True)
    (other / "config.json").write_text('{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}')
    with pytest.raises(ModelLoadError, match="cannot tell which scorer"):
        hf.load_hf_scorer(other)


def test_resolve_scorer_specs_reach_these_classes(bert_dir: Path) -> None:
    from grapheval_plugins.models import resolve_scorer

    scorer = resolve_scorer(f"nli:{bert_dir}", device="cpu")
    assert isinstance(scorer, hf.CrossEncoderNLIScorer) and scorer.name == f"nli:{bert_dir}"
    assert isinstance(resolve_scorer("hhem"), hf.HHEMScorer)


def test_a_missing_folder_is_a_clear_model_load_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="no such folder"):
        hf.HHEMScorer(missing, device="cpu").load()
    with pytest.raises(ModelLoadError, match="no such folder"):
        hf.load_hf_scorer(missing)


def test_an_uncached_hub_model_offline_says_how_to_fix_it(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    scorer = hf.CrossEncoderNLIScorer("someorg/not-cached-nli", device="cpu", local_files_only=True, cache_dir=cache)
    with pytest.raises(ModelLoadError) as info:
        scorer.load()
    message = str(info.value)
    assert "not in the local Hugging Face cache" in message and "folder" in message and "path" in message
    assert info.value.__cause__ is not None
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache"):
        hf.load_hf_scorer("someorg/not-cached-nli", local_files_only=True, cache_dir=cache)
    hhem = hf.HHEMScorer(local_files_only=True, cache_dir=cache)
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache"):
        hhem.load()


def test_bad_settings_are_input_errors(bert_dir: Path) -> None:
    with pytest.raises(InputError, match="batch_size"):
        hf.CrossEncoderNLIScorer(bert_dir, batch_size=0)
    with pytest.raises(InputError, match="hypothesis_tokens"):
        hf.CrossEncoderNLIScorer(bert_dir, max_length=64, hypothesis_tokens=40)
    scorer = hf.HHEMScorer(bert_dir, max_length=40, hypothesis_tokens=16, tokenizer=bert_dir)
    with pytest.raises(InputError, match="max_length"):
        scorer.count_tokens("too small a window for the template")
    with pytest.raises(InputError, match="max_length"):  # still refused on the next use, never a zero budget
        _ = scorer.max_premise_tokens


# --------------------------------------------------------------------------- single-output cross-encoders
def test_a_single_output_cross_encoder_is_refused_unless_opted_in(root: Path, bert_tok) -> None:  # type: ignore[no-untyped-def]
    # A reranker or STS cross-encoder has one output (relevance or similarity, not entailment).
    model = H.bert_classifier({0: "LABEL_0"})
    folder = H.save_with_tokenizer(root / "bert-single", model, bert_tok)
    with pytest.raises(ModelLoadError, match=r"single output.*bert-single.*single_output=True|bert-single.*single"):
        hf.CrossEncoderNLIScorer(folder, device="cpu").load()
    scorer = hf.CrossEncoderNLIScorer(folder, device="cpu", single_output=True).load()
    with torch.no_grad():
        scorer.model.classifier.weight.zero_()
        scorer.model.classifier.bias.copy_(torch.tensor([0.75]))
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx([float(torch.sigmoid(torch.tensor(0.75)))] * 2)
    with pytest.raises(InputError, match="single_output"):
        hf.CrossEncoderNLIScorer(folder, single_output="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- out of memory
def test_out_of_memory_halves_the_batch_after_leaving_the_handler(nli: hf.CrossEncoderNLIScorer,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A batch over the device's limit is retried in halves, and no retry runs while the error is being handled."""
    scorer = _fresh(nli)
    scorer.batch_size = 5
    expected = scorer.predict_support(PAIRS)
    real = scorer._support
    seen: list[tuple[int, bool]] = []

    def limited(model, batch):  # type: ignore[no-untyped-def]
        rows = int(batch["input_ids"].shape[0])
        seen.append((rows, sys.exc_info()[0] is not None))
        if rows > 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model, batch)

    scorer._support = limited  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        got = scorer.predict_support(PAIRS)
    assert got == pytest.approx(expected, abs=1e-5)  # same scores, same order
    assert [rows for rows, _ in seen] == [5, 2, 3, 1, 2]
    assert not any(handling for _, handling in seen), "a retry ran inside the except block of the failed batch"
    assert caplog.text.count("retrying in halves") == 2


def test_out_of_memory_on_one_row_is_raised(nli: hf.CrossEncoderNLIScorer) -> None:
    scorer = _fresh(nli)

    def always(model, batch):  # type: ignore[no-untyped-def]
        raise RuntimeError("CUDA out of memory")

    scorer._support = always  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="out of memory"):
        scorer.predict_support(PAIRS[:1])


def test_hhem_loads_a_sharded_checkpoint(root: Path, hhem_dir: Path, hhem: hf.HHEMScorer) -> None:
    import shutil

    from huggingface_hub import save_torch_state_dict
    from safetensors.torch import load_file

    folder = root / "hhem-sharded"
    shutil.copytree(hhem_dir, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    save_torch_state_dict(load_file(hhem_dir / "model.safetensors"), folder, max_shard_size="60KB")
    assert len(list(folder.glob("model-*.safetensors"))) > 1 and (folder / "model.safetensors.index.json").is_file()
    scorer = hf.HHEMScorer(folder, device="cpu")
    assert scorer.predict_support(PAIRS[:2]) == pytest.approx(hhem.predict_support(PAIRS[:2]), abs=1e-6)
