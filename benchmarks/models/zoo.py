"""The model set: the model code people run, built from configs with random weights (no hub, no data).

Hugging Face `transformers` model classes (GPT-2, BERT, Llama with grouped-query attention, Qwen2, a Mixtral
mixture of experts, ViT, ResNet, T5 as the encoder-decoder) and two of our own (a convolutional net with
batch norm, a GRU language model). Each model is two layers or stages. The decoders' serving case is a
decode step (`gpt2-decode`, `llama-decode`, `qwen2-decode`): one new token per sequence against a key/value
cache (`DECODE`: batch 8 x 1023 cached positions on a GPU, 2 x 128 on the CPU, 1 x 16 in the tests).
Three sizings of the others' inputs: `gpu` (batch 8 x 512 tokens, 32 images of 224^2), `cpu` (2 x 128
tokens, 2 images) and `tiny` (the tests: 1 x 16 tokens, 1 image of 32^2, with configs cut to a few
channels). Dropout is off (eval mode), so a model's output is a function of its inputs.

`build(name, sizing, dtype)` returns the module (evaluation mode, in `dtype`) and its inputs; each module's
forward returns one tensor (the last hidden state), so every contender is compared on the same value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

SIZINGS = {"gpu": (8, 512, 32, 224), "cpu": (2, 128, 2, 224), "tiny": (1, 16, 1, 32)}  # batch, tokens, images, side
DECODE = {"gpu": (8, 1023), "cpu": (2, 128), "tiny": (1, 16)}  # batch, cached positions (GPT-2 holds 1024)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Hidden(nn.Module):
    """A transformers model whose forward returns its last hidden state only."""

    def __init__(self, model: nn.Module, key: str = "last_hidden_state") -> None:
        super().__init__()
        self.model, self.key = model, key

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        kw: dict[str, Any] = {"return_dict": True}
        if hasattr(self.model.config, "use_cache"):
            kw["use_cache"] = False  # no key/value cache built for a whole-sequence forward
        if len(args) == 2:  # an encoder-decoder: the source and the target tokens
            kw.update(input_ids=args[0], decoder_input_ids=args[1])
            args = ()
        return self.model(*args, **kw)[self.key]


class Decode(nn.Module):
    """One generation step of a decoder: the new tokens [batch, 1] against its key/value cache, passed in as
    one tensor [layers, 2 (keys, values), batch, kv heads, positions, head width]; returns the new tokens'
    last hidden state (the cache it would append to is not returned: the step is what is timed)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        from transformers import DynamicCache

        past = DynamicCache.from_legacy_cache(tuple((cache[i, 0], cache[i, 1]) for i in range(cache.shape[0])))
        return self.model(input_ids=ids, past_key_values=past, use_cache=True, return_dict=True).last_hidden_state

    def cache_shape(self, batch: int, positions: int) -> tuple[int, ...]:
        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        width = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        return (cfg.num_hidden_layers, 2, batch, heads, positions, width)


class ConvNet(nn.Module):
    """Our own: two stages of conv + batch norm + ReLU, each then pooled, and a linear head."""

    def __init__(self, width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = 3
        for w in (width, 2 * width):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                       nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2)]
            c = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


class GRULM(nn.Module):
    """Our own: embedding, a two-layer GRU, a linear head over the vocabulary."""

    def __init__(self, vocab: int = 8192, hidden: int = 512) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(self.embed(ids))[0])


def _hf(cls_name: str, config_name: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], nn.Module]:
    def make(is_tiny: bool) -> nn.Module:
        import transformers  # the model set's own dependency (make setup pins it), not akg's

        cfg = getattr(transformers, config_name)(**(tiny if is_tiny else full))
        return Hidden(getattr(transformers, cls_name)(cfg))
    return make


NO_DROPOUT = {"attn_implementation": "eager"}
GPT2 = dict(n_layer=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **NO_DROPOUT)
BERT = dict(num_hidden_layers=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **NO_DROPOUT)
LLAMA = dict(num_hidden_layers=2, vocab_size=32000, **NO_DROPOUT)
MOE = dict(LLAMA, sliding_window=None)  # full causal attention, as the other decoders
VIT = dict(num_hidden_layers=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **NO_DROPOUT)


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str  # "tokens", "images", "seq2seq" or "decode": what its inputs are
    make: Callable[[bool], nn.Module]
    vocab: tuple[int, int] = (32000, 256)  # full, tiny


SPECS = {s.name: s for s in [
    Spec("gpt2", "tokens", _hf("GPT2Model", "GPT2Config", dict(GPT2, n_embd=768, n_head=12),
                               dict(GPT2, n_embd=64, n_head=4, vocab_size=256, n_positions=64)), (50257, 256)),
    Spec("bert", "tokens", _hf("BertModel", "BertConfig", dict(BERT, hidden_size=768, num_attention_heads=12),
                               dict(BERT, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                    vocab_size=256, max_position_embeddings=64)), (30522, 256)),
    Spec("llama", "tokens", _hf("LlamaModel", "LlamaConfig",
                                dict(LLAMA, hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
                                     num_key_value_heads=4),
                                dict(LLAMA, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=256, max_position_embeddings=64))),
    Spec("qwen2", "tokens", _hf("Qwen2Model", "Qwen2Config",
                                dict(LLAMA, hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                                     num_key_value_heads=2),
                                dict(LLAMA, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=256, max_position_embeddings=64))),
    Spec("mixtral", "tokens", _hf("MixtralModel", "MixtralConfig",
                                  dict(MOE, hidden_size=512, intermediate_size=1024, num_attention_heads=8,
                                       num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
                                  dict(MOE, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                       num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                       vocab_size=256, max_position_embeddings=64))),
    Spec("t5", "seq2seq", _hf("T5Model", "T5Config",
                              dict(num_layers=2, num_decoder_layers=2, d_model=512, d_ff=2048, num_heads=8,
                                   dropout_rate=0.0, vocab_size=32128, **NO_DROPOUT),
                              dict(num_layers=2, num_decoder_layers=2, d_model=64, d_ff=128, num_heads=4, d_kv=16,
                                   dropout_rate=0.0, vocab_size=256, **NO_DROPOUT)), (32128, 256)),
    Spec("vit", "images", _hf("ViTModel", "ViTConfig", dict(VIT, hidden_size=768, num_attention_heads=12),
                              dict(VIT, hidden_size=64, num_attention_heads=4, intermediate_size=128, image_size=32,
                                   patch_size=8))),
    Spec("resnet", "images", _hf("ResNetModel", "ResNetConfig",
                                 dict(depths=[2, 2], hidden_sizes=[64, 128], layer_type="basic"),
                                 dict(depths=[1, 1], hidden_sizes=[8, 16], embedding_size=8, layer_type="basic"))),
    Spec("convnet", "images", lambda tiny: ConvNet(8 if tiny else 64, 10 if tiny else 1000)),
    Spec("gru_lm", "tokens", lambda tiny: GRULM(256 if tiny else 8192, 32 if tiny else 512), (8192, 256)),
]}
for _base in ("gpt2", "llama", "qwen2"):  # the serving case: one token against a key/value cache
    SPECS[f"{_base}-decode"] = Spec(f"{_base}-decode", "decode",
                                    lambda tiny, b=_base: Decode(SPECS[b].make(tiny).model), SPECS[_base].vocab)


def build(name: str, sizing: str, dtype: str = "fp32", seed: int = 0) -> tuple[nn.Module, list[torch.Tensor]]:
    """The model (random weights from `seed`, eval mode, in `dtype`) and its inputs at `sizing`."""
    spec = SPECS[name]
    batch, tokens, images, side = SIZINGS[sizing]
    torch.manual_seed(seed)
    model = spec.make(sizing == "tiny").eval().to(DTYPES[dtype])
    vocab = spec.vocab[1] if sizing == "tiny" else spec.vocab[0]
    g = torch.Generator().manual_seed(seed + 1)
    if spec.kind == "images":
        x = torch.randn(images, 3, side, side, generator=g).to(DTYPES[dtype])
        return model, [x]
    if spec.kind == "decode":
        batch, positions = DECODE[sizing]
        cache = torch.randn(model.cache_shape(batch, positions), generator=g).to(DTYPES[dtype])
        return model, [torch.randint(0, vocab, (batch, 1), generator=g), cache]
    ids = torch.randint(0, vocab, (batch, tokens), generator=g)
    if spec.kind == "seq2seq":
        return model, [ids, torch.randint(0, vocab, (batch, tokens), generator=g)]
    return model, [ids]
