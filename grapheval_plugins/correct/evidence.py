"""What the ``evidence`` correction method tells step 1 about a flagged triple: the sentences closest to the triple,
and why the triple failed.

Nothing here calls a model.

>>> from grapheval_plugins.types import Triple
>>> t = Triple(subject="Marie Curie", relation="won", object="three Nobel Prizes")
>>> passage = "Marie Curie was born in Warsaw. She won two Nobel Prizes. Her daughter Irene won one."
>>> closest_sentences(passage, t, k=1)
'She won two Nobel Prizes.'
>>> failure_reason(0.93, 0.5)
'a fact checker judged it not supported by the context (P(unsupported) = 0.93, above the threshold 0.50)'
"""

from __future__ import annotations

from ..text import closest_sentences

__all__ = ["closest_sentences", "failure_reason"]
# closest_sentences lives in grapheval_plugins.text (the engine's per-claim evidence uses it too); re-exported.


def failure_reason(p_unsupported: float, threshold: float) -> str:
    """Why the triple is being corrected, in words the chat model can act on: above the threshold, or (a stand-in
    triple of an output flagged as a whole) the one of its output's triples the fact checker doubted most.

    >>> failure_reason(0.4, 0.5)
    'its output was judged not supported by the context, and of its triples a fact checker doubted this one most (P(unsupported) = 0.40, within the threshold 0.50)'
    """
    if p_unsupported <= threshold:
        return (
            "its output was judged not supported by the context, and of its triples a fact checker doubted this "
            f"one most (P(unsupported) = {p_unsupported:.2f}, within the threshold {threshold:.2f})"
        )
    return (
        f"a fact checker judged it not supported by the context (P(unsupported) = {p_unsupported:.2f}, "
        f"above the threshold {threshold:.2f})"
    )
