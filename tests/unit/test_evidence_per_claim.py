"""The core helper that picks the context sentences bearing on a claim (``text.closest_sentences``), used by the
evidence-per-claim lever and by the correction strategies."""

from __future__ import annotations

import pytest

from grapheval_plugins import text
from grapheval_plugins.types import Triple


def test_closest_sentences_refuses_k_below_one() -> None:
    with pytest.raises(ValueError, match="k must be"):
        text.closest_sentences("A b.", Triple(subject="a", relation="b", object="c"), k=0)
