"""What a claim score and a fitted weight are keyed by: every setting that changes the numbers.

The scorer's fingerprint holds the HF revision, token window and hypothesis room of the HuggingFace scorers, and the
window and GGUF file of the local judge; the hybrid rule's fitted weights go only to the scorer they were fitted
with (its fingerprint), not to any scorer of that name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grapheval_plugins import GraphEval, aggregate
from grapheval_plugins.check.hf import CrossEncoderNLIScorer, HHEMScorer, T5NLIScorer
from grapheval_plugins.check.minicheck import MiniCheckT5Scorer
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.local.judge import JUDGE_PROMPT, LocalJudgeScorer
from grapheval_plugins.local.runtime import LlamaSession
from grapheval_plugins.models import DEFAULT_SCORER, resolve_scorer
from grapheval_plugins.score_cache import CachedScorer, MemoryScoreCache

ROOT = Path(__file__).resolve().parents[2]
ENV = "GRAPHEVAL_MODEL_QWEN2_5_CODER_1_5B"


def keys(scorer) -> object:  # type: ignore[no-untyped-def]
    return CachedScorer(scorer, MemoryScoreCache())._plan(["The council voted."], ["The council voted"])[0]


def judge(model: str = "qwen2.5-coder-1.5b", n_ctx: int = 4096, **options: object) -> LocalJudgeScorer:
    """A judge over a session of its own, not loaded (a shared session another test loaded says what it read)."""
    return LocalJudgeScorer(model, session=LlamaSession(model, n_ctx=n_ctx), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [CrossEncoderNLIScorer, T5NLIScorer, MiniCheckT5Scorer])
def test_hf_fingerprints_hold_the_revision_the_window_and_the_hypothesis_room(make) -> None:  # type: ignore[no-untyped-def]
    base = make("org/model", revision="aaaa", max_length=512, hypothesis_tokens=64)
    assert base.fingerprint() == make("org/model", revision="aaaa", max_length=512, hypothesis_tokens=64).fingerprint()
    others = [make("org/model", revision="bbbb", max_length=512, hypothesis_tokens=64),
              make("org/model", revision="aaaa", max_length=256, hypothesis_tokens=64),
              make("org/model", revision="aaaa", max_length=512, hypothesis_tokens=32)]
    assert len({base.fingerprint(), *(o.fingerprint() for o in others)}) == 4
    assert all(keys(o) != keys(base) for o in others)  # a cache filled by one never serves the others
    assert HHEMScorer().fingerprint() != HHEMScorer(revision="main").fingerprint()  # the pinned commit counts too


def test_the_local_judges_fingerprint_holds_its_window_and_the_gguf_file_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("GRAPHEVAL_LOCAL_MODEL_PATH", raising=False)
    shipped = judge().fingerprint()
    assert judge("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF").fingerprint() == shipped  # an alias: the same pinned file
    assert judge(n_ctx=2048).fingerprint() != shipped and keys(judge(n_ctx=2048)) != keys(judge())
    assert judge("qwen2.5-coder-0.5b").fingerprint() != shipped
    # Another file under the same name (an environment variable points at it): another scorer.
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF one")
    monkeypatch.setenv(ENV, str(other))
    under_the_name = judge().fingerprint()
    assert under_the_name != shipped
    other.write_bytes(b"GGUF another file")  # replaced in place: another file again
    assert judge().fingerprint() != under_the_name
    # A path: keyed by the file, not by its name.
    assert judge(str(other)).fingerprint() == judge(str(other)).fingerprint()
    before = judge(str(other)).fingerprint()
    other.write_bytes(b"GGUF a third file, longer")
    assert judge(str(other)).fingerprint() != before


def test_fitted_weights_go_only_to_the_scorer_they_were_fitted_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("GRAPHEVAL_LOCAL_MODEL_PATH", raising=False)
    shipped = aggregate.fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "drop")
    assert shipped is not None and shipped.fingerprint == judge().fingerprint()
    assert GraphEval().decision_weights() is shipped and GraphEval().decision_rule()[0].name == "hybrid"  # kept
    assert GraphEval(scorer=judge()).decision_weights() is shipped
    # The same name in the general wording, with another window, or over another file: the paper's rule decides.
    for scorer in (judge(prompt=JUDGE_PROMPT), judge(n_ctx=2048)):
        engine = GraphEval(scorer=scorer)
        assert scorer.name == DEFAULT_SCORER and engine.decision_weights() is None
        assert engine.decision_rule()[0].name == "paper" and engine.fidelity_in_force() == "off"
    other = tmp_path / "finetuned.gguf"
    other.write_bytes(b"GGUF")
    monkeypatch.setenv(ENV, str(other))
    assert GraphEval(scorer=judge()).decision_weights() is None
    # An entry without a fingerprint (your own, or from the deprecated tables) is for any scorer of its name.
    mine = aggregate.HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="test", scorer="judge:mine",
                                   fidelity="off")
    monkeypatch.setattr(aggregate, "FITTED_WEIGHTS", [*aggregate.FITTED_WEIGHTS, mine])
    assert aggregate.fitted_weights("judge:mine", None, "off", "any fingerprint") is mine


def test_the_shipped_entries_record_the_judge_that_scored_their_files() -> None:
    shipped = resolve_scorer(DEFAULT_SCORER).fingerprint()  # nothing loads
    entries = [w for w in aggregate.FITTED_WEIGHTS if w.scorer == DEFAULT_SCORER]
    assert len(entries) == 2 and {w.fingerprint for w in entries} == {shipped}
    for name in ("summeval", "qags_c", "qags_x"):
        path = ROOT / "benchmarks" / "results" / f"judge-prompt-question-first-{name}-judge-local-qwen2.5-coder-1.5b.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert rows and {r["fingerprint"] for r in rows} == {shipped}


def test_a_loaded_judge_is_keyed_by_the_file_it_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from local_fake_llama import FakeLlama, label_logits

    from grapheval_plugins.local.weights import KNOWN_MODELS, ResolvedWeights

    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("GRAPHEVAL_LOCAL_MODEL_PATH", raising=False)

    def loaded(weights: ResolvedWeights) -> LocalJudgeScorer:
        session = LlamaSession(lambda: weights, n_ctx=4096,
                               factory=lambda **params: FakeLlama(label_logits(lambda c, h: (3.0, 0.0, 0.0)), **params))
        scorer = LocalJudgeScorer("qwen2.5-coder-1.5b", session=session)
        before = scorer.fingerprint()
        session.load()
        assert before == judge().fingerprint()  # before the load: the pinned file, which resolve_model checks
        return scorer

    pinned = KNOWN_MODELS["qwen2.5-coder-1.5b"].sha256
    assert loaded(ResolvedWeights(tmp_path / "q.gguf", "parts", pinned)).fingerprint() == judge().fingerprint()
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    assert loaded(ResolvedWeights(other, "env", detail=ENV)).fingerprint() != judge().fingerprint()
