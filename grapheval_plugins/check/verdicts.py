"""Reading a chat judge's answer (``<number>: <label> <0-100>`` a claim) with one regular expression, never
``eval``: chatter, Markdown, quotes and JSON-ish pairs are tolerated, but a verdict must *start* with a label word
(``1: not supported`` is no verdict); :func:`label_logprobs_at` reads the labels' token log-probabilities."""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ParsedVerdicts", "Verdict", "label_logprobs_at", "parse_verdicts", "stated_probability"]


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict: the label, its span in the answer, and the P(supported) written after it, if any."""

    label: str
    start: int
    end: int
    stated: float | None = None


@dataclass(frozen=True)
class ParsedVerdicts:
    """The verdicts by claim number (1-based), problems of the whole answer, and why a claim has no verdict."""

    verdicts: dict[int, Verdict]
    problems: list[str] = field(default_factory=list)
    claim_problems: dict[int, str] = field(default_factory=dict)


def _pattern(labels: Sequence[str]) -> re.Pattern[str]:
    words = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    return re.compile(
        r"(?<![\w.,])"                            # not the tail of a word or of a decimal number
        r"(?:claim\s*#?\s*)?"                     # "Claim 2", "claim #2"
        r"[\"'*_(\[]{0,8}"                        # opening quote / markdown / bracket (bounded: no quadratic scan)
        r"(\d{1,4})"                              # the claim number
        r"(?:[\"'*_]*[)\]][\"'*_]*\s*(?:[:.=\-\u2013\u2014]+)?"  # "1)", "[1]", "(1):" ...
        r"|[\"'*_]*\s*(?:[:.)=\-\u2013\u2014]+|is\b))"  # ... or "1:", "1.", "**1.**", "1 -", "1 is"
        r"[\s\"'*_`\[]{0,40}"                     # space, quotes, markdown before the label (bounded)
        rf"({words})(?![\w-])",                   # the label, as a whole word
        re.IGNORECASE,
    )


# Right after the label: punctuation, at most one short word ("confidence", "p"), then the figure.
_FIGURE = re.compile(r"[^\w\n]{0,6}(?:[A-Za-z]{1,12}[^\w\n]{0,4})?(\d{1,3}(?:\.\d+)?)(?![\d.]*\d)[ \t]*(%?)")


def stated_probability(segment: str) -> float | None:
    """The figure after a label as a probability (``0``-``100``, or a decimal in ``[0, 1]``), else ``None``.

    >>> [stated_probability(s) for s in (" (85%)", " - confidence: 0.3", " 180", "", " as the text says 2")]
    [0.85, 0.3, None, None, None]
    """
    match = _FIGURE.match(segment)
    if match is None:
        return None
    figure, percent = match.group(1), match.group(2)
    value = float(figure)
    if "." in figure and value <= 1.0 and not percent:
        return value
    return value / 100.0 if value <= 100.0 else None


def parse_verdicts(text: str, n_claims: int, labels: Sequence[str]) -> ParsedVerdicts:
    """The verdicts for claims ``1..n_claims`` in ``text``; two different labels for a claim leave it without one.

    >>> parsed = parse_verdicts("Sure!\\n1: Supported\\n**2.** unknown\\n3: not supported", 3, ["supported", "unknown"])
    >>> {n: v.label for n, v in parsed.verdicts.items()}
    {1: 'supported', 2: 'unknown'}
    >>> parsed.claim_problems
    {3: 'no verdict for claim 3'}
    >>> [v.stated for v in parse_verdicts("1: supported 90\\n2: unknown (15%) 3: contradicted", 3, ["supported", "unknown", "contradicted"]).verdicts.values()]
    [0.9, 0.15, None]
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    canonical = {label.lower(): label for label in labels}
    found: dict[int, list[Verdict]] = {}
    problems: list[str] = []
    matches = list(_pattern(labels).finditer(text))
    for index, match in enumerate(matches):
        number = int(match.group(1))
        label = canonical[match.group(2).lower()]
        if not 1 <= number <= n_claims:
            problems.append(f"verdict for claim {number}, which was not asked (claims 1..{n_claims})")
            continue
        stop = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        segment = text[match.end(2):stop].split("\n", 1)[0]  # the rest of the line, up to the next verdict
        found.setdefault(number, []).append(Verdict(label, match.start(2), match.end(2), stated_probability(segment)))
    verdicts: dict[int, Verdict] = {}
    claim_problems: dict[int, str] = {}
    for number in range(1, n_claims + 1):
        answers = found.get(number)
        if not answers:
            claim_problems[number] = f"no verdict for claim {number}"
        elif len({v.label for v in answers}) > 1:
            claim_problems[number] = (
                f"contradictory verdicts for claim {number}: {sorted({v.label for v in answers})}"
            )
        else:
            verdicts[number] = answers[0]
    return ParsedVerdicts(verdicts=verdicts, problems=problems, claim_problems=claim_problems)


def _token_text(entry: Mapping[str, Any]) -> str | None:
    token = entry.get("token")
    raw = entry.get("bytes")
    if isinstance(raw, list) and raw and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            pass
    return token if isinstance(token, str) else None


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if not math.isfinite(top):
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def label_logprobs_at(
    tokens: Sequence[Mapping[str, Any]], text: str, verdict: Verdict, labels: Sequence[str]
) -> tuple[dict[str, float] | None, str | None]:
    """The labels' log-probabilities at the token where ``verdict`` starts (OpenAI-style ``tokens`` spelling
    ``text``; alternatives matched to labels by prefix and summed; without ``top_logprobs`` the other labels share
    the rest equally), and a note; ``(None, reason)`` when they cannot be read."""
    pieces = [_token_text(entry) if isinstance(entry, Mapping) else None for entry in tokens]
    spelled = [piece for piece in pieces if piece is not None]
    if len(spelled) != len(pieces):
        return None, "malformed token log-probabilities"
    if "".join(spelled) != text:
        return None, "the token log-probabilities do not spell the answer"
    ends = list(itertools.accumulate(len(piece) for piece in spelled))
    index = bisect.bisect_right(ends, verdict.start)  # the token that holds the verdict's first character
    entry, start = tokens[index], ends[index] - len(spelled[index])
    lead = text[start : verdict.start]  # what the token holds before the label (e.g. " " or ": ")
    lowered = {label: label.lower() for label in labels}

    def match(piece: str) -> str | None:
        if lead.strip() and not piece.startswith(lead):
            return None
        rest = piece[len(lead):] if piece.startswith(lead) else piece
        rest = rest.lstrip(" \t*_\"'`").lower()
        if not rest:
            return None
        hits = [label for label, low in lowered.items() if low.startswith(rest) or rest.startswith(low)]
        return hits[0] if len(hits) == 1 else None

    chosen_lp = entry.get("logprob")
    chosen = match(_token_text(entry) or "")
    if chosen != verdict.label or not isinstance(chosen_lp, (int, float)):
        return None, "the token at the verdict does not spell its label"
    alternatives = entry.get("top_logprobs") or []
    grouped: dict[str, list[float]] = {}
    seen: set[str] = set()
    for alt in [entry, *alternatives] if isinstance(alternatives, list) else [entry]:
        if not isinstance(alt, Mapping):
            continue
        piece = _token_text(alt)
        lp = alt.get("logprob")
        if piece is None or not isinstance(lp, (int, float)) or piece in seen:
            continue
        seen.add(piece)
        label = match(piece)
        if label is not None:
            grouped.setdefault(label, []).append(float(lp))
    if not alternatives:
        p = min(1.0, math.exp(float(chosen_lp)))
        rest = (1.0 - p) / max(1, len(labels) - 1)
        return {label: (float(chosen_lp) if label == chosen else (math.log(rest) if rest > 0 else -math.inf))
                for label in labels}, "no top log-probabilities: the other labels share the rest equally"
    return {label: _logsumexp(values) for label, values in grouped.items()}, None
