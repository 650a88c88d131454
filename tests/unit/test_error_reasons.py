"""InputError carries a machine-readable reason, so callers never tell cases apart by reading the message."""

from __future__ import annotations

import pickle

import pytest

from grapheval_plugins.exceptions import INPUT_ERROR_REASONS, InputError
from grapheval_plugins.inputs import normalize_output, normalize_passages


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (lambda: normalize_output(None), "missing"),
        (lambda: normalize_output("   "), "empty"),
        (lambda: normalize_output(3), "type"),
        (lambda: normalize_passages(None), "missing"),
        (lambda: normalize_passages(["", "  "]), "empty"),
        (lambda: normalize_passages(b"bytes"), "type"),
        (lambda: normalize_passages([3]), "type"),
        (lambda: normalize_passages([{"empty": "a key named empty"}]), "invalid"),
    ],
)
def test_each_input_error_says_why(call, reason: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as info:
        call()
    assert info.value.reason == reason
    assert reason in INPUT_ERROR_REASONS


def test_a_context_window_overflow_is_too_long() -> None:
    pytest.importorskip("numpy")
    from grapheval_plugins.local.runtime import ContextOverflowError

    err = ContextOverflowError("messages", "5000 tokens do not fit")
    assert err.reason == "too_long" and isinstance(err, InputError)


def test_reason_survives_pickling_and_unknown_reasons_are_refused() -> None:
    err = pickle.loads(pickle.dumps(InputError("context", "is empty", reason="empty")))
    assert (type(err), err.field, err.reason, str(err)) == (InputError, "context", "empty", "context: is empty")
    with pytest.raises(ValueError, match="unknown InputError reason"):
        InputError("x", "y", reason="bogus")


def test_deepeval_tells_empty_from_other_errors_by_reason_not_by_message() -> None:
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import _read_test_case

    # A passage whose error message happens to contain the word "empty" is not an empty context.
    case = LLMTestCase.model_construct(input="q", actual_output="An answer.", context=[{"empty": "x"}],
                                       retrieval_context=None, multimodal=False)
    with pytest.raises(InputError, match="page_content") as info:
        _read_test_case(case, "context", "GraphEval")
    assert info.value.reason == "invalid"
