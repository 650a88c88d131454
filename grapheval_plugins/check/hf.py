"""HuggingFace scorers: HHEM-2.1-Open, T5 "1"/"0" NLI models (TRUE, TrueTeacher), MNLI-style cross-encoders.

Each loads lazily from a hub name or a folder, on cuda → mps → cpu, and declares its token window so that long
contexts are chunked rather than cut (``pip install 'grapheval-plugins[hf]'``; importing imports no torch)::

    from grapheval_plugins.check.hf import HHEMScorer, T5NLIScorer, load_hf_scorer

    scorer = HHEMScorer()                                   # vectara/hallucination_evaluation_model, pinned
    scorer.predict_support([("The capital of France is Paris.", "Paris is in France.")])   # [0.9...]
    T5NLIScorer("google/t5_11b_trueteacher_and_anli")       # TrueTeacher, 11B parameters
    nli = load_hf_scorer("/path/to/an/mnli-cross-encoder")  # the kind is read from its config.json
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from .._template import fill
from ..exceptions import InputError, ModelLoadError
from ._hf_common import HFScorer, HFScorerOptions
from ._hub import (
    HubOptions,
    find_weights,
    load_error,
    looks_like_path,
    pinned_revision,
    read_config_dict,
    read_state_dict,
)
from ._runtime import _torch, _transformers, logger, select_device

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

__all__ = ["FLAN_T5_BASE", "FLAN_T5_BASE_REVISION", "HHEM_MAX_TOKENS", "HHEM_MODEL", "HHEM_PROMPT",
    "HHEM_REVISION", "CrossEncoderNLIScorer", "HFScorer", "HHEMScorer", "T5NLIScorer", "first_answer_token",
    "load_hf_scorer", "model_kind", "select_device"]

HHEM_MODEL = "vectara/hallucination_evaluation_model"
HHEM_REVISION = "8e4a2e6e96c708cc76c2344f7e4757df2515292c"
"""The commit of :data:`HHEM_MODEL` loaded by default (also in ``_hub.PINNED_REVISIONS``)."""
FLAN_T5_BASE = "google/flan-t5-base"
"""HHEM's foundation model: its tokenizer (and, when the HHEM config lacks one, its T5 config) are HHEM's."""
FLAN_T5_BASE_REVISION = "7bcac572ce56db69c1ea7c8af255c5d7c9672fc2"
HHEM_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {premise}\n\nHypothesis: {hypothesis}"
HHEM_MAX_TOKENS = 2048
"""HHEM's default window: a premise up to about this many tokens is scored whole (see docs/scorers.md)."""
T5_NLI_TEMPLATE = "premise: {premise} hypothesis: {hypothesis}"

_SHARED = "transformer.shared.weight"
_ENCODER_EMBED = "transformer.encoder.embed_tokens.weight"


# --------------------------------------------------------------------------- embedding ties
def verify_tied_embeddings(transformer: Any) -> None:
    """Raise :class:`ModelLoadError` unless every stack's ``embed_tokens`` of a T5 model is its ``shared`` matrix."""
    torch = _torch()
    shared = transformer.shared.weight
    for stack_name in ("encoder", "decoder"):
        stack = getattr(transformer, stack_name, None)
        if stack is None:
            continue
        weight = stack.embed_tokens.weight
        if weight is not shared and not (weight.shape == shared.shape and torch.equal(weight, shared)):
            raise ModelLoadError(
                f"{stack_name}.embed_tokens is not tied to the shared embedding matrix: the model would score "
                "with an embedding it was not trained with. Refusing to use it."
            )


# --------------------------------------------------------------------------- HHEM
class HHEMScorer(HFScorer):
    """HHEM-2.1-Open, rebuilt from transformers' ``T5ForTokenClassification`` without its remote code (which, on
    transformers 5, leaves the encoder's embedding untied and scores silently wrong); the tie is enforced.

    P(supported) is the softmax over the two labels at the first position of :data:`HHEM_PROMPT` (or the config's
    ``prompt``). Options as for :class:`~._hf_common.HFScorer`; ``max_length`` defaults to :data:`HHEM_MAX_TOKENS`,
    ``tokenizer`` to the folder's own, else the config's ``foundation`` (at ``tokenizer_revision``, or pinned).
    """

    kind = "hhem"
    fingerprint_fields = (*HFScorer.fingerprint_fields, "tokenizer_revision")
    allow_fp16 = False

    def __init__(self, model: str | os.PathLike[str] = HHEM_MODEL, *, tokenizer_revision: str | None = None,
            **options: Unpack[HFScorerOptions]) -> None:
        options.setdefault("max_length", HHEM_MAX_TOKENS)
        super().__init__(model, **options)
        self.tokenizer_revision = tokenizer_revision
        self.prompt = self.template = HHEM_PROMPT
        self._config_dict: dict[str, Any] | None = None

    def _hhem_config(self) -> dict[str, Any]:
        if self._config_dict is None:
            config = read_config_dict(self.model_name, self.hub)
            prompt = config.get("prompt")
            if isinstance(prompt, str) and "{text1}" in prompt and "{text2}" in prompt:
                self.prompt = self.template = fill(prompt, text1="{premise}", text2="{hypothesis}")
            self._config_dict = config
        return self._config_dict

    def _foundation(self) -> str:
        foundation = self._hhem_config().get("foundation")
        return foundation if isinstance(foundation, str) and foundation.strip() else FLAN_T5_BASE

    def _hub_revision_for(self, source: str) -> str | None:
        if self.tokenizer_revision is not None:
            return self.tokenizer_revision
        return {self.model_name: self.hub.revision, FLAN_T5_BASE: FLAN_T5_BASE_REVISION}.get(source)

    def _load_tokenizer(self) -> PreTrainedTokenizerBase:
        self._hhem_config()
        source: Any = self.tokenizer_source
        if source is None:
            folder = Path(self.model_name).expanduser()
            has_own = looks_like_path(self.model_name) and any(
                (folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "spiece.model"))
            source = self.model_name if has_own else self._foundation()
        revision = self._hub_revision_for(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else None
        return self._tokenizer_from(source, replace(self.hub, revision=revision))

    def _t5_config(self) -> Any:
        transformers = _transformers()
        config = self._hhem_config()
        nested = config.get("t5_config")
        if isinstance(nested, Mapping):
            t5_config = transformers.T5Config.from_dict(dict(nested))
        elif str(config.get("model_type", "")).lower() == "t5":
            t5_config = transformers.T5Config.from_dict(config)
        else:
            foundation = self._foundation()
            hub = replace(self.hub, revision=self._hub_revision_for(foundation))
            try:
                t5_config = transformers.AutoConfig.from_pretrained(foundation, **hub.kwargs())
            except Exception as exc:  # noqa: BLE001 - hub / IO errors translated with their cause
                raise load_error("the foundation config", foundation, hub, exc) from exc
        if not isinstance(t5_config, transformers.T5Config):
            raise ModelLoadError(f"model {self.model_name!r}: its foundation is {type(t5_config).__name__}, not T5")
        t5_config.num_labels = 2
        t5_config.id2label = {0: "hallucinated", 1: "consistent"}
        t5_config.label2id = {"hallucinated": 0, "consistent": 1}
        t5_config.update(self.model_kwargs)
        return t5_config

    def _load_model(self, dtype: torch.dtype) -> torch.nn.Module:
        import torch

        transformers = _transformers()
        t5_config = self._t5_config()
        state = read_state_dict(find_weights(self.model_name, self.hub))
        if all(key.startswith("t5.") for key in state):  # the HHEM wrapper's prefix
            state = {key.removeprefix("t5."): value for key, value in state.items()}
        shared, encoder = state.get(_SHARED), state.get(_ENCODER_EMBED)
        if shared is None and encoder is None:
            raise ModelLoadError(f"the checkpoint has no embedding matrix (neither {_SHARED!r} nor {_ENCODER_EMBED!r})")
        if shared is None:
            shared = encoder
        elif encoder is not None and not (encoder.shape == shared.shape and torch.equal(encoder, shared)):
            raise ModelLoadError(
                f"the checkpoint's {_ENCODER_EMBED!r} differs from {_SHARED!r}: it was saved from a model whose "
                "embeddings were untied (e.g. HHEM loaded through its remote code on transformers 5), so its scores "
                "would be wrong. Use the original checkpoint."
            )
        state[_SHARED] = state[_ENCODER_EMBED] = shared
        with torch.device("meta"):
            model = transformers.T5ForTokenClassification(t5_config)
        # Strict: a checkpoint of another shape is refused; the decoder (unused by token classification) is dropped.
        encoder_only = {k: v for k, v in state.items() if not k.startswith("transformer.decoder.")}
        model.load_state_dict(encoder_only, assign=True)
        model.transformer.encoder.embed_tokens.weight = model.transformer.shared.weight
        return model  # type: ignore[no-any-return]  # transformers' models are untyped here (lazy import)

    def _support(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits: torch.Tensor = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return logits[:, 0, :].float().softmax(dim=-1)[:, 1]


# --------------------------------------------------------------------------- T5 "1"/"0"
def first_answer_token(tokenizer: PreTrainedTokenizerBase, text: str, model_name: str = "the model") -> int:
    """The first id of ``text`` without special tokens: what a seq2seq model emits first when it answers ``text``
    (T5: "1" is ``[209]``, "0" is ``[3, 632]``, so the first-step choice is 209 against 3).

    Raises ``ModelLoadError`` when ``text`` encodes to no token at all."""
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ModelLoadError(f"the tokenizer of {model_name!r} encodes the answer {text!r} as no token")
    return int(ids[0])


class T5NLIScorer(HFScorer):
    """A T5 seq2seq NLI model that answers ``1`` (entailed) or ``0``: TRUE, TrueTeacher.

    P(supported) is read at the first decoder step, at the first token of each of ``label_tokens``
    (:func:`first_answer_token`). Options as for :class:`~._hf_common.HFScorer` (never float16 on its own).

    Args:
        label_tokens: the (supported, unsupported) answers; their first tokens must differ.
        answer_softmax: ``"vocab"`` (softmax over the whole vocabulary, the TrueTeacher card's scoring) or
            ``"pair"`` (two-way softmax between the answers' first tokens, as MiniCheck reads its Flan-T5).
    """

    kind = "t5"
    fingerprint_fields = (*HFScorer.fingerprint_fields, "template", "label_tokens", "answer_softmax")
    allow_fp16 = False
    template = T5_NLI_TEMPLATE

    def __init__(self, model: str | os.PathLike[str], *, label_tokens: tuple[str, str] = ("1", "0"),
            answer_softmax: str = "vocab", **options: Unpack[HFScorerOptions]) -> None:
        super().__init__(model, **options)
        if (not isinstance(label_tokens, (tuple, list)) or len(label_tokens) != 2
                or not all(isinstance(t, str) and t.strip() for t in label_tokens)):
            raise InputError("label_tokens", "must be two non-empty strings: (supported, unsupported)")
        self.label_tokens = (label_tokens[0], label_tokens[1])
        if answer_softmax not in ("vocab", "pair"):
            raise InputError("answer_softmax", f"must be 'vocab' or 'pair', got {answer_softmax!r}")
        self.answer_softmax = answer_softmax
        self.label_token_ids: tuple[int, int] | None = None
        self._decoder_start: int | None = None

    def _load_tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer = super()._load_tokenizer()
        yes = first_answer_token(tokenizer, self.label_tokens[0], self.model_name)
        no = first_answer_token(tokenizer, self.label_tokens[1], self.model_name)
        if yes == no:
            raise ModelLoadError(
                f"the answers {self.label_tokens} of {self.model_name!r} start with the same token ({yes}); "
                "pass label_tokens= whose first tokens differ"
            )
        self.label_token_ids = (yes, no)
        return tokenizer

    def _load_model(self, dtype: torch.dtype) -> torch.nn.Module:
        transformers = _transformers()
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(self.model_name, dtype=dtype, **self.model_kwargs,
                                                                   **self.hub.kwargs())
        config = model.config
        start = config.pad_token_id if config.decoder_start_token_id is None else config.decoder_start_token_id
        if start is None:
            raise ModelLoadError(f"model {self.model_name!r} declares no decoder_start_token_id or pad_token_id")
        vocab = model.get_output_embeddings().weight.shape[0]
        if any(i >= vocab for i in self.label_token_ids or ()):
            raise ModelLoadError(f"model {self.model_name!r}: answer token ids {self.label_token_ids} exceed its "
                                 f"vocabulary ({vocab}); tokenizer and model do not match")
        if hasattr(model, "shared") and hasattr(model, "encoder"):
            verify_tied_embeddings(model)
        self._decoder_start = int(start)
        return model  # type: ignore[no-any-return]  # transformers' models are untyped here (lazy import)

    def _support(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        import torch

        input_ids = batch["input_ids"]
        start = torch.full((input_ids.shape[0], 1), self._decoder_start or 0, dtype=torch.long, device=input_ids.device)
        logits: torch.Tensor = model(
            input_ids=input_ids, attention_mask=batch["attention_mask"], decoder_input_ids=start
        ).logits
        yes, no = self.label_token_ids or (0, 0)
        if self.answer_softmax == "vocab":
            return logits[:, 0, :].float().softmax(dim=-1)[:, yes]
        return logits[:, 0, [yes, no]].float().softmax(dim=-1)[:, 0]


# --------------------------------------------------------------------------- cross-encoders
def entailment_index(id2label: Mapping[Any, str], label: int | str | None = None) -> int:
    """The class index meaning "entailed": ``label`` (an index or a name), else the one label containing
    "entail" (not "not_entailment").

    >>> entailment_index({0: "ENTAILMENT", 1: "neutral", 2: "contradiction"})
    0
    >>> entailment_index({0: "not_entailment", 1: "entailment"})
    1
    >>> entailment_index({0: "inconsistent", 1: "consistent"}, label="consistent")
    1
    """
    labels = {int(k): str(v) for k, v in id2label.items()}
    if isinstance(label, int):
        if label not in labels:
            raise InputError("entailment_label", f"index {label} is not one of the model's labels {labels}")
        return label
    if isinstance(label, str):
        matches = [i for i, name in labels.items() if name.lower() == label.strip().lower()]
        if len(matches) != 1:
            raise InputError("entailment_label", f"{label!r} is not one of the model's labels {labels}")
        return matches[0]
    negated = ("not", "non", "no_", "no ")
    found = [i for i, name in labels.items() if "entail" in name.lower() and not name.lower().startswith(negated)]
    if len(found) != 1:
        raise ModelLoadError(
            f"cannot tell which label means 'entailed' from the model's labels {labels}; "
            "pass entailment_label= (its index or name)"
        )
    return found[0]


class CrossEncoderNLIScorer(HFScorer):
    """An MNLI-style sequence-classification cross-encoder: P(supported) is the softmax probability of the
    entailment class (:func:`entailment_index`). Options as for :class:`~._hf_common.HFScorer`; ``max_length`` is
    capped at the tokenizer's ``model_max_length``.

    Args:
        entailment_label: the index or name of the "supported" class when no label says "entailment".
        single_output: read a one-output model's sigmoid as P(supported) (refused by default: such models are
            mostly rerankers, whose score is relevance, not entailment).
    """

    kind = "nli"
    fingerprint_fields = (*HFScorer.fingerprint_fields, "entailment_label", "single_output")
    allow_fp16 = True
    cap_max_length = True  # off for models with relative positions

    def __init__(self, model: str | os.PathLike[str], *, entailment_label: int | str | None = None,
            single_output: bool = False, **options: Unpack[HFScorerOptions]) -> None:
        if not isinstance(single_output, bool):
            raise InputError("single_output", "must be True or False")
        self.single_output = single_output
        super().__init__(model, **options)
        if entailment_label is not None and (isinstance(entailment_label, bool)
                                             or not isinstance(entailment_label, (int, str))):
            raise InputError("entailment_label", "must be an index or a label name")
        self.entailment_label = entailment_label
        self.entailment_index: int | None = None

    def _load_tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer = super()._load_tokenizer()
        limit = getattr(tokenizer, "model_max_length", None)
        if self.cap_max_length and isinstance(limit, int) and 32 <= limit < self.max_length:
            logger.warning("%s: max_length %d capped at the tokenizer's model_max_length %d",
                           self.name, self.max_length, limit)
            self.max_length = limit
        return tokenizer

    def _load_model(self, dtype: torch.dtype) -> torch.nn.Module:
        transformers = _transformers()
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            self.model_name, dtype=dtype, **self.model_kwargs, **self.hub.kwargs()
        )
        if model.config.num_labels == 1:
            if not self.single_output:
                raise ModelLoadError(
                    f"model {self.model_name!r} has a single output (num_labels=1): cross-encoders of that shape "
                    "are usually rerankers or similarity models, whose score is relevance, not entailment, so it "
                    "is not read as P(supported). Use an NLI model (labels such as entailment/neutral/"
                    "contradiction), or, if this model was trained to score whether a hypothesis is supported, "
                    "pass single_output=True"
                )
            self.entailment_index = 0
        else:
            self.entailment_index = entailment_index(model.config.id2label, self.entailment_label)
        return model  # type: ignore[no-any-return]  # transformers' models are untyped here (lazy import)

    def _support(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits: torch.Tensor = model(**batch).logits.float()
        if logits.shape[-1] == 1:
            return logits[:, 0].sigmoid()
        return logits.softmax(dim=-1)[:, self.entailment_index or 0]


# --------------------------------------------------------------------------- dispatch
def model_kind(config: Mapping[str, Any]) -> str:
    """Which scorer fits a model's ``config.json``: ``"hhem"``, ``"t5"`` or ``"nli"``.

    >>> model_kind({"model_type": "HHEMv2Config", "architectures": ["HHEMv2ForSequenceClassification"]})
    'hhem'
    >>> model_kind({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]})
    't5'
    >>> model_kind({"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"]})
    'nli'

    Raises ``ModelLoadError`` when none fits."""
    model_type = str(config.get("model_type") or "").lower()
    architectures = [str(a) for a in config.get("architectures") or []]
    if (model_type.startswith("hhem") or any(a.upper().startswith("HHEM") for a in architectures)
            or "t5_config" in config or "foundation" in config or "T5ForTokenClassification" in architectures):
        return "hhem"
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        return "nli"
    if model_type in ("t5", "mt5", "umt5") and (not architectures or any("ForConditionalGeneration" in a for a in architectures)):
        return "t5"
    id2label = config.get("id2label")
    if isinstance(id2label, Mapping) and any("entail" in str(v).lower() for v in id2label.values()):
        return "nli"
    raise ModelLoadError(
        f"cannot tell which scorer fits this model (model_type={model_type!r}, architectures={architectures}); "
        "use HHEMScorer, T5NLIScorer or CrossEncoderNLIScorer (spec 'hhem:', 't5:' or 'nli:') directly"
    )


_KINDS: dict[str, type[HFScorer]] = {"hhem": HHEMScorer, "t5": T5NLIScorer, "nli": CrossEncoderNLIScorer}


def load_hf_scorer(name: str | os.PathLike[str], **kwargs: Any) -> HFScorer:
    """The scorer that fits the HuggingFace model ``name`` (:func:`model_kind` of its ``config.json``; the weights
    load on first use), built with ``kwargs``.

    Raises ``ModelLoadError`` when the config cannot be read, or no scorer fits the model."""
    if not isinstance(name, (str, os.PathLike)) or not os.fspath(name).strip():
        raise InputError("name", "give a hub name or a local folder path")
    name = os.fspath(name).strip()
    if name == HHEM_MODEL:
        return HHEMScorer(name, **kwargs)
    revision = kwargs.get("revision")
    if revision is None and not looks_like_path(name):
        revision = pinned_revision(name)  # the config is read at the commit the weights will load from
    hub = HubOptions(revision, kwargs.get("local_files_only"), kwargs.get("token"), kwargs.get("cache_dir"))
    kind = model_kind(read_config_dict(name, hub))
    return _KINDS[kind](name, **kwargs)
