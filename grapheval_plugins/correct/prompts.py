"""The paper's prompts B, C and D (its wording) and those of the options beyond it, as typed, versioned data.

Swap in your own with ``dataclasses.replace(TRIPLE_CORRECTION_PROMPT, template=..., version=...)`` and
``CorrectionPrompts(triple=...)``; a template missing one of its placeholders is refused at construction.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from .._template import fields as template_fields
from .._template import fill
from ..types import Triple

__all__ = ["BATCH_TRIPLE_CORRECTION_PROMPT", "CORRECTION_PROMPTS", "DIRECT_PROMPT",
    "EVIDENCE_TRIPLE_CORRECTION_PROMPT", "CHOICE_PROMPT", "FOLLOW_UP_PROMPT", "SUBSTITUTION_PROMPT",
    "TRIPLE_CORRECTION_PROMPT", "CorrectionPrompts", "TextPrompt", "render_triple_list"]

def render_triple_list(triple: Triple) -> str:
    """A triple as the paper's prompts show it: ``["entity 1", "relation 1-2", "entity 2"]``.

    >>> render_triple_list(Triple(subject="Paris", relation="capital of", object="France"))
    '["Paris", "capital of", "France"]'
    """
    return json.dumps(triple.as_list(), ensure_ascii=False)


@dataclass(frozen=True)
class TextPrompt:
    """One prompt: a template with ``{placeholders}``, sent as one human message (after an optional system one).

    ``version`` names the wording; change it whenever the wording changes. ``fields`` are the placeholders the
    template must contain.

    >>> p = TextPrompt(version="demo/1", template="Fix <x>{x}</x>", fields=("x",))
    >>> p.render(x="a {x} b")
    'Fix <x>a {x} b</x>'
    >>> [m.type for m in p.messages(x="1")]
    ['human']
    """

    version: str
    template: str
    fields: tuple[str, ...]
    system: str | None = None

    def __post_init__(self) -> None:
        present = template_fields(self.template)
        missing = [f for f in self.fields if f not in present]
        if missing:
            raise ValueError(f"prompt {self.version!r}: the template lacks the placeholder(s) {missing}")

    def render(self, **values: str) -> str:
        """The template with every ``{field}`` replaced in one pass (unknown ``{names}`` are left as they are)."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise ValueError(f"prompt {self.version!r}: no value for {missing}")
        return fill(self.template, **values)

    def messages(self, **values: str) -> list[BaseMessage]:
        """The chat messages: the optional system message, then the rendered template as a human message."""
        human = HumanMessage(self.render(**values))
        return [SystemMessage(self.system), human] if self.system else [human]


_B = (
    "You are an expert at extracting information in structured formats from text.\n"
    "The following triple contains factually incorrect information. Correct it based on the provided context.\n"
    "Important Tips:\n"
    '1. A triple is defined as ["entity 1", "relation 1-2", "entity 2"].\n'
    "2. A triple must only contain three strings! None of the strings should be empty.\n"
    "3. The concatenated triple must make sense as a sentence.\n"
    "4. Only return the corrected triple, nothing else.\n"
    "<triple>{triple}</triple>\n"
    "<context>{context}</context>\n"
    "Remember, it is important that you only return the corrected triple."
)

_B_BATCH = (
    "You are an expert at extracting information in structured formats from text.\n"
    "Each of the following triples contains factually incorrect information. Correct each of them based on the "
    "provided context.\n"
    "Important Tips:\n"
    '1. A triple is defined as ["entity 1", "relation 1-2", "entity 2"].\n'
    "2. A triple must only contain three strings! None of the strings should be empty.\n"
    "3. The concatenated triple must make sense as a sentence.\n"
    "4. Return exactly one corrected triple for each triple given, in the same order, as a list of triples "
    "within <python></python> tags, nothing else.\n"
    "<triples>{triples}</triples>\n"
    "<context>{context}</context>\n"
    "Remember, it is important that you only return the list of corrected triples."
)

_B_EVIDENCE = (
    "<context>{context}</context>\n"
    "You are an expert at extracting information in structured formats from text.\n"
    "The following triple contains factually incorrect information: {reason}.\n"
    "Correct it based on the context above: change the part of the triple that the context does not state "
    "(often a name, a number, a date or a place) into what the context says, and keep the rest.\n"
    "Important Tips:\n"
    '1. A triple is defined as ["entity 1", "relation 1-2", "entity 2"].\n'
    "2. A triple must only contain three strings! None of the strings should be empty.\n"
    "3. The concatenated triple must make sense as a sentence.\n"
    "4. The corrected triple must differ from the given one.\n"
    "5. Only return the corrected triple, nothing else.\n"
    "<triple>{triple}</triple>\n"
    "<evidence>{evidence}</evidence>\n"
    "The evidence holds the sentences of the context closest to the triple. "
    "Remember, it is important that you only return the corrected triple."
)

_FOLLOW_UP = (
    "You returned the triple unchanged, but <triple>{triple}</triple> is not supported by the context. "
    "Change it so that it states what the context says, using the words of the evidence.\n"
    "Only return the corrected triple, nothing else."
)

_CHOICE = (
    "<context>{context}</context>\n"
    "The following triple is not supported by the context above: <triple>{triple}</triple>\n"
    "The sentences of the context closest to it: <evidence>{evidence}</evidence>\n"
    'Which value of the context should replace "{value}" in the triple?\n'
    "{options}\n"
    "Answer with the number of the option only."
)

_C = (
    "In the following context, replace the information of the old triple with the information of the new one.\n"
    "Do not make any other modification to the context.\n"
    "Only return the new context.\n"
    "<context>{summary}</context>\n"
    "<old_triple>{old_triple}</old_triple>\n"
    "<new_triple>{new_triple}</new_triple>"
)

_D = (
    "The following summary contains factually incorrect information. Correct it based on the context, but don't "
    "change other parts of the summary.\n"
    "Only return the corrected summary, nothing else.\n"
    "<summary>{summary}</summary>\n"
    "<context>{context}</context>\n"
    "Remember, do minimal changes to the original summary, don't make it longer and keep as much of it as you can "
    "exactly the same."
)

TRIPLE_CORRECTION_PROMPT = TextPrompt(version="correct-b/1", template=_B, fields=("triple", "context"))
"""Prompt B (GraphCorrect step 1): ``{triple}`` (a JSON list) and ``{context}`` (the grounding context)."""

BATCH_TRIPLE_CORRECTION_PROMPT = TextPrompt(
    version="correct-b-batch/1", template=_B_BATCH, fields=("triples", "context")
)
"""Prompt B for several triples at once: ``{triples}`` is a JSON list of triples. Not from the paper."""

EVIDENCE_TRIPLE_CORRECTION_PROMPT = TextPrompt(
    version="correct-b-evidence/1", template=_B_EVIDENCE, fields=("triple", "context", "evidence", "reason")
)
"""Step 1 of ``strategy="evidence"``: prompt B with ``{reason}`` and ``{evidence}``. Not from the paper."""

FOLLOW_UP_PROMPT = TextPrompt(version="correct-b-followup/1", template=_FOLLOW_UP, fields=("triple",))
"""The follow-up when step 1 returned the flagged triple unchanged. Not from the paper."""

CHOICE_PROMPT = TextPrompt(
    version="correct-choice/1", template=_CHOICE, fields=("context", "triple", "evidence", "value", "options")
)
"""Step 3 of ``strategy="constrained"``: a value of the context chosen by number (``docs/guides/correct.md``)."""

SUBSTITUTION_PROMPT = TextPrompt(
    version="correct-c/1", template=_C, fields=("summary", "old_triple", "new_triple")
)
"""Prompt C (GraphCorrect step 2): ``{summary}`` is the output being corrected (the prompt calls it "context")."""

DIRECT_PROMPT = TextPrompt(version="correct-d/1", template=_D, fields=("summary", "context"))
"""Prompt D (the Direct Prompt baseline): ``{summary}`` (the output) and ``{context}`` (the grounding context)."""


@dataclass(frozen=True)
class CorrectionPrompts:
    """The prompt set used by :class:`~grapheval_plugins.correct.GraphCorrect`.

    >>> CORRECTION_PROMPTS.version
    'correct-b/1+correct-c/1+correct-d/1+correct-b-batch/1+correct-b-evidence/1+correct-b-followup/1+correct-choice/1'
    >>> msgs = CORRECTION_PROMPTS.substitute_messages(
    ...     "Paris is in Italy.",
    ...     Triple(subject="Paris", relation="is in", object="Italy"),
    ...     Triple(subject="Paris", relation="is in", object="France"))
    >>> "<old_triple>[\\"Paris\\", \\"is in\\", \\"Italy\\"]</old_triple>" in msgs[-1].content
    True
    """

    triple: TextPrompt = TRIPLE_CORRECTION_PROMPT
    substitute: TextPrompt = SUBSTITUTION_PROMPT
    direct: TextPrompt = DIRECT_PROMPT
    batch: TextPrompt = BATCH_TRIPLE_CORRECTION_PROMPT
    evidence_triple: TextPrompt = EVIDENCE_TRIPLE_CORRECTION_PROMPT
    follow_up: TextPrompt = FOLLOW_UP_PROMPT
    choice: TextPrompt = CHOICE_PROMPT

    def __post_init__(self) -> None:
        for slot in dataclasses.fields(self):  # each prompt declares the placeholders of the default it replaces
            lacking = [f for f in getattr(type(self), slot.name).fields if f not in getattr(self, slot.name).fields]
            if lacking:
                raise ValueError(f"CorrectionPrompts.{slot.name} must declare the placeholder(s) {lacking}")

    @property
    def version(self) -> str:
        """The versions of the prompts joined: names the wording every correction depends on."""
        return "+".join(getattr(self, slot.name).version for slot in dataclasses.fields(self))

    def triple_messages(self, triple: Triple, context: str) -> list[BaseMessage]:
        """Prompt B for one flagged triple."""
        return self.triple.messages(triple=render_triple_list(triple), context=context)

    def batch_messages(self, triples: Sequence[Triple], context: str) -> list[BaseMessage]:
        """Prompt B for several flagged triples in one call."""
        listed = json.dumps([t.as_list() for t in triples], ensure_ascii=False)
        return self.batch.messages(triples=listed, context=context)

    def evidence_triple_messages(self, triple: Triple, context: str, evidence: str, reason: str) -> list[BaseMessage]:
        """Step 1 of ``strategy="evidence"``: prompt B with the reason the triple failed and the evidence sentences."""
        return self.evidence_triple.messages(
            triple=render_triple_list(triple), context=context, evidence=evidence, reason=reason
        )

    def follow_up_messages(self, triple: Triple) -> list[BaseMessage]:
        """The follow-up message(s) sent after an answer that repeated ``triple`` (no system message)."""
        return [HumanMessage(self.follow_up.render(triple=render_triple_list(triple)))]

    def choice_messages(
        self, triple: Triple, context: str, evidence: str, value: str, options: Sequence[str]
    ) -> list[BaseMessage]:
        """Which of ``options`` replaces ``value`` in ``triple``: numbered from 1, ``0`` for none of them."""
        listed = "\n".join(f"{i}. {o}" for i, o in enumerate(options, start=1)) + "\n0. none of them"
        return self.choice.messages(
            context=context, triple=render_triple_list(triple), evidence=evidence, value=value, options=listed
        )

    def substitute_messages(self, summary: str, old: Triple, new: Triple) -> list[BaseMessage]:
        """Prompt C: replace ``old``'s information with ``new``'s in ``summary``."""
        return self.substitute.messages(
            summary=summary, old_triple=render_triple_list(old), new_triple=render_triple_list(new)
        )

    def direct_messages(self, summary: str, context: str) -> list[BaseMessage]:
        """Prompt D: correct ``summary`` from ``context`` in one call."""
        return self.direct.messages(summary=summary, context=context)


CORRECTION_PROMPTS = CorrectionPrompts()
"""The default prompt set: the paper's prompts B, C and D, and the prompts of the options beyond it."""
