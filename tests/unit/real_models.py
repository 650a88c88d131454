"""The real tokenizers (from ``tests/fixtures/tokenizers``) and tiny random models with the real checkpoints'
vocabulary sizes, special tokens and label maps (two layers, a tiny width), for the golden tests.

Published sizes used: flan-t5 / T5 vocabulary 32128 (32100 tokenizer entries, padded), DeBERTa-v3 128100,
RoBERTa 50265 (max_position_embeddings 514, pad id 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOKENIZERS = FIXTURES / "tokenizers"
GOLDEN = FIXTURES / "golden"

T5_VOCAB = 32128
DEBERTA_V3_VOCAB = 128100
ROBERTA_VOCAB = 50265

NLI_DEBERTA_V3_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}
"""cross-encoder/nli-deberta-v3-*: the card's ``label_mapping = ['contradiction', 'entailment', 'neutral']``."""
ROBERTA_LARGE_MNLI_LABELS = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
"""roberta-large-mnli's config.json ``id2label``."""


def golden_ids() -> dict[str, Any]:
    return json.loads((GOLDEN / "golden_ids.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def fib(model: str) -> dict[str, Any]:
    """The hub tokenizer's outputs recorded by fib-tokenizers, e.g. ``fib("google--flan-t5-base")``."""
    return json.loads((GOLDEN / f"models--{model}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def t5_tokenizer() -> Any:
    """The T5 / Flan-T5 tokenizer built from the real ``spiece.model`` (the class the TrueTeacher card loads)."""
    from transformers import T5Tokenizer

    return T5Tokenizer.from_pretrained(str(TOKENIZERS / "t5"))


def deberta_v3_tokenizer() -> Any:
    from transformers import DebertaV2Tokenizer

    return DebertaV2Tokenizer.from_pretrained(str(TOKENIZERS / "deberta-v3"))


def roberta_tokenizer() -> Any:
    from transformers import RobertaTokenizer

    return RobertaTokenizer.from_pretrained(str(TOKENIZERS / "roberta"))


def t5_config(**overrides: Any) -> Any:
    """flan-t5's layout (gated-gelu, untied head, 32 relative buckets) at a tiny width."""
    from transformers import T5Config

    settings: dict[str, Any] = dict(
        vocab_size=T5_VOCAB, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2,
        relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
        dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, tie_word_embeddings=False,
    )
    settings.update(overrides)
    return T5Config(**settings)


def t5_seq2seq(seed: int = 0, **overrides: Any) -> Any:
    import torch
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(t5_config(**overrides)).eval()
    with torch.no_grad():  # spread the first-step logits so that different inputs give different answers
        model.lm_head.weight.mul_(20.0)
    return model


def save_t5_folder(folder: Path, model: Any, tokenizer: Any) -> Path:
    """A model folder with the real T5 tokenizer saved next to the weights."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hhem_foundation(folder: Path, tokenizer: Any) -> Path:
    """A folder like google/flan-t5-base's: the T5 config and tokenizer, no weights."""
    folder.mkdir(parents=True, exist_ok=True)
    t5_config().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hhem_token_classifier(foundation: Path, seed: int = 0) -> Any:
    import torch
    from transformers import AutoConfig, T5ForTokenClassification

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(foundation)
    config.num_labels = 2
    model = T5ForTokenClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(20.0)
    return model


def deberta_v3_classifier(id2label: dict[int, str], seed: int = 0) -> Any:
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(seed)
    config = DebertaV2Config(
        vocab_size=DEBERTA_V3_VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=512, relative_attention=True, position_buckets=256,
        norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False,
        type_vocab_size=0, pad_token_id=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pooler_hidden_size=16, id2label=dict(id2label), label2id={v: k for k, v in id2label.items()},
    )
    return DebertaV2ForSequenceClassification(config).eval()


def roberta_classifier(id2label: dict[int, str], seed: int = 0) -> Any:
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    torch.manual_seed(seed)
    config = RobertaConfig(
        vocab_size=ROBERTA_VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=514, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        id2label=dict(id2label), label2id={v: k for k, v in id2label.items()},
    )
    return RobertaForSequenceClassification(config).eval()


def save_folder(folder: Path, model: Any, tokenizer: Any) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
