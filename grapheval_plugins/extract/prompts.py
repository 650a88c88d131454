"""Prompt A of the paper (knowledge-graph construction) as typed, versioned data, in the paper's wording
(``shared/paper/PROMPTS.md``) and two message orders (:data:`KG_PROMPT`, :data:`KG_PROMPT_PAPER`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from .._template import fill
from .parser import PARSER_VERSION

__all__ = ["KG_PROMPT", "KG_PROMPT_KEEP_QUALIFIERS", "KG_PROMPT_PAPER", "FewShotExample", "KGPrompt"]


@dataclass(frozen=True)
class FewShotExample:
    """One demonstration: an input text and the triples it should yield."""

    input: str
    triples: tuple[tuple[str, str, str], ...]

    def render(self, number: int) -> str:
        listed = json.dumps([list(t) for t in self.triples], ensure_ascii=False)
        return f'## Example {number}.\nInput: "{self.input}"\nOutput: <python>{listed}</python>'


_SYSTEM = (
    "You are an expert at extracting information in structured formats to build a knowledge graph.\n"
    "Step 1 – Entity detection: Identify all entities in the raw text. Make sure not to miss any out. "
    "Entities should be basic and simple, they are akin to Wikipedia nodes.\n"
    "Step 2 – Coreference resolution: Find all expressions in the text that refer to the same entity. "
    "Make sure entities are not duplicated. In particular do not include entities that are more specific "
    'versions themselves, e.g. "a detailed view of jupiter\'s atmosphere" and "jupiter\'s atmosphere", '
    "only include the most specific version of the entity.\n"
    "Step 3 – Relation extraction: Identify semantic relationships between the entities you have identified.\n"
    'Format: Return the knowledge graph as a list of triples, i.e. ["entity 1", "relation 1-2", "entity 2"], '
    "in Python code."
)

_INSTRUCTION = (
    "Use the given format to extract information from the following input: <input>{input}</input>. "
    "Skip the preamble and output the result as a list within <python></python> tags."
)

_TIPS = (
    "Important Tips:\n"
    "1. Make sure all information is included in the knowledge graph.\n"
    "2. Each triple must only contain three strings! None of the strings should be empty.\n"
    "3. Do not split up related information into separate triples because this could change the meaning.\n"
    "4. Make sure all brackets and quotation marks are matched.\n"
    "5. Before adding a triple to the knowledge graph, check the concatenated triple makes sense as a sentence. "
    "If not, discard it."
)

_EXAMPLES_HEADER = "Here are some example input and output pairs."

_EXAMPLES: tuple[FewShotExample, ...] = (
    FewShotExample(
        "The Walt Disney Company, commonly known as Disney, is an American multinational mass media and "
        "entertainment conglomerate that is headquartered at the Walt Disney Studios complex in Burbank, California.",
        (
            ("The Walt Disney Company", "headquartered at", "Walt Disney Studios complex in Burbank, California"),
            ("The Walt Disney Company", "commonly known as", "Disney"),
            ("The Walt Disney Company", "instance of", "American multinational mass media and entertainment conglomerate"),
        ),
    ),
    FewShotExample(
        "Amanda Jackson was born in Springfield, Ohio, USA on June 1, 1985. She was a basketball player for the "
        "U.S. women's team.",
        (
            ("Amanda Jackson", "born in", "Springfield, Ohio, USA"),
            ("Amanda Jackson", "born on", "June 1, 1985"),
            ("Amanda Jackson", "occupation", "basketball player"),
            ("Amanda Jackson", "played for", "U.S. women's basketball team"),
        ),
    ),
    FewShotExample(
        "Music executive Darius Van Arman was born in Pennsylvania. He attended Gonzaga College High School and "
        "is a human being.",
        (
            ("Darius Van Arman", "occupation", "Music executive"),
            ("Darius Van Arman", "born in", "Pennsylvania"),
            ("Darius Van Arman", "attended", "Gonzaga College High School"),
            ("Darius Van Arman", "instance of", "human being"),
        ),
    ),
    FewShotExample(
        "Italy had 3.6x times more cases of coronavirus than China.",
        (("Italy", "had 3.6x times more cases of coronavirus than", "China"),),
    ),
)

_TIPS_KEEP_QUALIFIERS = (
    "Important Tips:\n"
    "1. Make sure all information is included in the knowledge graph.\n"
    "2. Each triple must only contain three strings! None of the strings should be empty.\n"
    "3. Keep the whole claim in each triple: every number, amount with its unit, date, qualifier (such as "
    '"more than", "about", "at least", "only") and negation (such as "not", "never", "no") of the statement '
    "goes into the relation or the object. Never drop them.\n"
    "4. Only state what the input says: add nothing it does not say, and do not split up related information "
    "into separate triples because this could change the meaning.\n"
    "5. Make sure all brackets and quotation marks are matched.\n"
    "6. Before adding a triple to the knowledge graph, check the concatenated triple makes sense as a sentence "
    "and says what the input says. If not, discard it."
)

_EXAMPLES_KEEP_QUALIFIERS: tuple[FewShotExample, ...] = (
    _EXAMPLES[0],
    _EXAMPLES[1],
    FewShotExample(
        "Electronics carry a 15% restocking fee and cannot be returned after 30 days.",
        (
            ("Electronics", "carry", "a 15% restocking fee"),
            ("Electronics", "cannot be returned after", "30 days"),
        ),
    ),
    FewShotExample(
        "The bridge, opened in 1932, carries about 160,000 vehicles a day and has never been closed for more than "
        "two days.",
        (
            ("The bridge", "opened in", "1932"),
            ("The bridge", "carries", "about 160,000 vehicles a day"),
            ("The bridge", "has never been closed for", "more than two days"),
        ),
    ),
    _EXAMPLES[3],
)

_RETRY = (
    "Your previous answer could not be read as a list of triples ({reason}). Answer again with only the list "
    'of ["entity 1", "relation 1-2", "entity 2"] triples inside <python></python> tags.'
)


@dataclass(frozen=True)
class KGPrompt:
    """Prompt A: the messages that ask a chat model for the knowledge graph of one text.

    ``version`` is a readable label. The knowledge-graph cache is keyed on :attr:`cache_id`, a hash of the
    messages this prompt renders (and of the parser version), so any change of wording, examples or order (e.g.
    ``dataclasses.replace(KG_PROMPT, examples=...)``) misses the graphs cached under the old prompt.

    >>> msgs = KG_PROMPT.messages("Paris is the capital of France.")
    >>> [m.type for m in msgs]
    ['system', 'human', 'human', 'human']
    >>> "Paris is the capital of France." in msgs[-1].content
    True
    """

    version: str
    system: str = _SYSTEM
    instruction: str = _INSTRUCTION
    tips: str = _TIPS
    examples_header: str = _EXAMPLES_HEADER
    examples: tuple[FewShotExample, ...] = _EXAMPLES
    examples_first: bool = True
    retry_instruction: str = _RETRY
    extra: dict[str, str] = field(default_factory=dict)

    def messages(self, text: str) -> list[BaseMessage]:
        """The chat messages for ``text`` (the LLM output to turn into a knowledge graph)."""
        system, ask = SystemMessage(self.system), HumanMessage(fill(self.instruction, input=text))
        shown = [self.examples_header, *(ex.render(i) for i, ex in enumerate(self.examples, start=1))]
        fixed = [HumanMessage(self.tips), *([HumanMessage("\n\n".join(shown))] if self.examples else [])]
        return [system, *fixed, ask] if self.examples_first else [system, ask, *fixed]

    def retry_message(self, reason: str) -> HumanMessage:
        """The follow-up message sent after an answer that could not be parsed."""
        return HumanMessage(fill(self.retry_instruction, reason=reason))

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the rendered messages (for a placeholder input and retry reason) and the parser version.

        >>> import dataclasses
        >>> KG_PROMPT.fingerprint == dataclasses.replace(KG_PROMPT, version="renamed").fingerprint
        True
        >>> KG_PROMPT.fingerprint == dataclasses.replace(KG_PROMPT, examples=()).fingerprint
        False
        """
        rendered = [[m.type, m.content] for m in self.messages("\x00input\x00")]
        rendered.append(["retry", self.retry_message("\x00reason\x00").content])
        payload = json.dumps({"messages": rendered, "extra": self.extra, "parser": PARSER_VERSION},
                             ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def cache_id(self) -> str:
        """The prompt's part of a knowledge-graph cache key: ``"<version>#<fingerprint's first 16 hex digits>"``.

        >>> KG_PROMPT.cache_id.startswith("kg-a/1-examples-first#")
        True
        """
        return f"{self.version}#{self.fingerprint[:16]}"


KG_PROMPT = KGPrompt(version="kg-a/1-examples-first", examples_first=True)
"""Default prompt A: system, tips, examples, then the input last, so that everything before the output is a fixed
prefix that a provider's prompt cache (or llama.cpp's KV cache) reuses across calls."""

KG_PROMPT_PAPER = KGPrompt(version="kg-a/1-paper-order", examples_first=False)
"""Prompt A in the order of the paper's appendix (system, input, tips, examples)."""

KG_PROMPT_KEEP_QUALIFIERS = KGPrompt(
    version="kg-b/1-keep-qualifiers", tips=_TIPS_KEEP_QUALIFIERS, examples=_EXAMPLES_KEEP_QUALIFIERS,
    examples_first=True,
)
"""Prompt A's system message, format and order, with tips and examples that keep numbers, dates, qualifiers and
negations in each triple (lever 2 of the detection study; not the default, so cached graphs stay consistent;
its own :attr:`~KGPrompt.cache_id`)."""
