"""Stage 1: knowledge-graph extraction (prompt A, a chat model, the safe parser)."""

from .extractor import TripleExtractor, describe_llm
from .parser import ParseResult, parse_single_triple, parse_triples
from .prompts import KG_PROMPT, KG_PROMPT_KEEP_QUALIFIERS, KG_PROMPT_PAPER, FewShotExample, KGPrompt

__all__ = ["KG_PROMPT", "KG_PROMPT_KEEP_QUALIFIERS", "KG_PROMPT_PAPER", "FewShotExample", "KGPrompt",
    "ParseResult", "TripleExtractor", "describe_llm", "parse_single_triple", "parse_triples"]
