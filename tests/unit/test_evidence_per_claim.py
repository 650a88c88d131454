"""The core helper that picks the context sentences bearing on a claim (``text.closest_sentences``), used by the
evidence-per-claim lever and re-exported by the correction package."""

from __future__ import annotations

import pytest

from grapheval_plugins import text
from grapheval_plugins.correct import evidence as correct_evidence
from grapheval_plugins.types import Triple


def test_closest_sentences_lives_in_the_core_and_correction_re_exports_it() -> None:
    assert correct_evidence.closest_sentences is text.closest_sentences
    with pytest.raises(ValueError, match="k must be"):
        text.closest_sentences("A b.", Triple(subject="a", relation="b", object="c"), k=0)
