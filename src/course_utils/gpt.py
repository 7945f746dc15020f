"""A small GPT, nanoGPT-style, as notebook 10 builds it; the benchmarks import it from here.

Shapes: B batch, T sequence length (T <= block_size), d = d_model, h = n_head, d_k = d / h,
V vocab_size. Masks follow :mod:`course_utils.masking` (boolean, True = allowed).

- :class:`GPTConfig` -- the sizes.
- :class:`KVCache` -- per-layer keys and values of the positions already processed.
- :class:`CausalSelfAttention` -- multi-head causal self-attention; with a cache it appends the
  new keys/values and attends with the *bottom-right* causal mask ``causal_mask(T, T_past + T)``.
- :class:`Block` -- pre-LN: ``x + Attn(LN(x))`` then ``x + FFN(LN(x))`` (GPT-2).
- :class:`GPT` -- token + learned position embeddings, blocks, final LayerNorm, LM head whose
  weight *is* the token embedding (weight tying); GPT-2 initialisation (std 0.02, residual
  projections 0.02 / sqrt(2 n_layer)).
- :func:`generate`, with the temperature, top-k and top-p of :mod:`course_utils.sampling` (whose
  functions notebook 10's tests still import from here).
- training: :func:`lm_batch` (input/target shift), :func:`bigram_log_probs` / :func:`bigram_loss`
  (the baseline), :func:`estimate_loss`, :func:`lm_train_step` (one optimisation step; notebook 10's
  exercise writes its own), :func:`train_lm` (the loop, which takes any such step as ``step_fn``).
- prompting: :func:`continuation_log_likelihood` (how likely a continuation is after a prompt).
- classification: :func:`last_token_pool`, :class:`GPTClassifier`, :func:`encode_padded`.
(Generation speed with and without the KV cache is timed by :func:`course_utils.benchmark.generation_speed`;
the training-speed benchmark lives in ``benchmarks/bench_gpt.py``.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.blocks import FeedForward, LayerNorm
from course_utils.masking import causal_mask
from course_utils.multihead import merge_heads, split_heads
from course_utils.progress import progress
from course_utils.sampling import next_token
from course_utils.sampling import apply_temperature, sample_next, top_k_filter, top_p_filter  # noqa: F401 - notebook 10's tests import them from here

__all__ = [
    "GPTConfig", "KVCache", "CausalSelfAttention", "Block", "GPT", "gpt2_init_",
    "generate",
    "lm_batch", "bigram_log_probs", "bigram_loss", "estimate_loss", "lm_train_step", "warmup_cosine", "train_lm",
    "continuation_log_likelihood",
    "last_token_pool", "GPTClassifier", "encode_padded",
]


# --------------------------------------------------------------------------- model
@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 128  # longest context (learned positions 0 .. block_size-1)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0
    bias: bool = True


class KVCache:
    """Keys and values of the positions seen so far, one ``(B, h, T_past, d_k)`` pair per layer.

    ``keys[layer]`` / ``values[layer]`` are views of the filled prefix of buffers preallocated for
    ``max_len`` positions (allocated at a layer's first :meth:`append`, when B, h, d_k, dtype and
    device are known; ``None`` before). Appending writes the new rows in place: no ``torch.cat`` of
    the whole past per token. Without ``max_len``, or past it, a buffer doubles when full.
    Assigning a shorter prefix (``cache.keys[l] = cache.keys[l][:, :, :-1]``) drops positions; any
    other tensor assigned is copied into the buffer at the next append. While autograd records
    (``k`` or ``v`` requires grad), appends concatenate instead, so gradients flow through the cache.
    """

    def __init__(self, n_layer: int, max_len: int | None = None) -> None:
        self.max_len = max_len
        self.keys: list[torch.Tensor | None] = [None] * n_layer
        self.values: list[torch.Tensor | None] = [None] * n_layer
        self._buffers: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layer

    def __len__(self) -> int:  # T_past: how many positions are cached
        return 0 if self.keys[0] is None else self.keys[0].size(-2)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k, v (B, h, T, d_k)`` after the cached ones; return all keys/values ``(B, h, T_past + T, d_k)``."""
        past_k, past_v = self.keys[layer], self.values[layer]
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):  # keep the autograd graph
            if past_k is not None:
                k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
            self.keys[layer], self.values[layer] = k, v
            return k, v
        n_past = 0 if past_k is None else past_k.size(-2)
        n = n_past + k.size(-2)
        if not self._fits(layer, k, v, n):  # first append, buffer full, or keys/values replaced from outside
            self._reallocate(layer, k, v, n)
        buffers = self._buffers[layer]
        assert buffers is not None  # _reallocate made them
        buf_k, buf_v = buffers
        buf_k.narrow(-2, n_past, n - n_past).copy_(k)  # write the new rows in place
        buf_v.narrow(-2, n_past, n - n_past).copy_(v)
        self.keys[layer], self.values[layer] = buf_k.narrow(-2, 0, n), buf_v.narrow(-2, 0, n)  # views, no copy
        return self.keys[layer], self.values[layer]

    def _fits(self, layer: int, k: torch.Tensor, v: torch.Tensor, n: int) -> bool:
        """Whether the cached keys/values are prefix views of this layer's buffers, which can take
        ``n`` positions of rows like ``k`` and ``v``."""
        buffers = self._buffers[layer]
        if buffers is None or n > buffers[0].size(-2):
            return False
        for buf, past, new in zip(buffers, (self.keys[layer], self.values[layer]), (k, v)):
            if buf.shape[:-2] != new.shape[:-2] or buf.size(-1) != new.size(-1) or buf.dtype != new.dtype \
                    or buf.device != new.device:
                return False
            if past is not None and (past.data_ptr() != buf.data_ptr() or past.stride() != buf.stride()):
                return False
        return True

    def _reallocate(self, layer: int, k: torch.Tensor, v: torch.Tensor, n: int) -> None:
        """New buffers for at least ``n`` positions (``max_len``, or double the old size), holding the past."""
        current = self._buffers[layer]
        old = 0 if current is None else current[0].size(-2)
        capacity = max(n, self.max_len or 0, 2 * old if n > old else old)
        buffers = tuple(t.new_empty(*t.shape[:-2], capacity, t.size(-1)) for t in (k, v))  # (B, h, capacity, d_k)
        for buf, past in zip(buffers, (self.keys[layer], self.values[layer])):
            if past is not None:
                buf.narrow(-2, 0, past.size(-2)).copy_(past)
        self._buffers[layer] = buffers


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention ``(B, T, d) -> (B, T, d)``, optionally with a :class:`KVCache`."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if config.d_model % config.n_head:
            raise ValueError(f"d_model={config.d_model} is not divisible by n_head={config.n_head}")
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)  # W^Q, W^K, W^V side by side
        self.proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)  # W^O, a residual projection
        self.proj.residual_projection = True
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)  # 3 x (B, T, d)
        q, k, v = (split_heads(t, self.n_head) for t in (q, k, v))  # (B, h, T, d_k)
        p = self.dropout if self.training else 0.0
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)  # (B, h, T, d_k)
        else:
            k, v = cache.append(layer, k, v)  # (B, h, T_past + T, d_k)
            T_k = k.size(-2)
            # one new query sees every cached key: no mask needed; otherwise bottom-right causal
            mask = None if T == 1 else causal_mask(T, T_k, device=x.device)  # (T, T_k)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.proj(merge_heads(y))  # (B, T, d)


class Block(nn.Module):
    """Pre-LN transformer block: ``x = x + Attn(LN1(x)); x = x + FFN(LN2(x))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, 4 * config.d_model, config.dropout, activation="gelu")
        self.ffn.fc2.residual_projection = True
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), cache, layer))
        return x + self.drop(self.ffn(self.ln2(x)))


@torch.no_grad()
def gpt2_init_(model: nn.Module, n_layer: int, std: float = 0.02) -> nn.Module:
    """GPT-2 initialisation, in place: Linear and Embedding weights ~ N(0, std), biases 0,
    residual projections (modules flagged ``residual_projection``) ~ N(0, std / sqrt(2 n_layer)).
    LayerNorms keep ones / zeros."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            scale = std / math.sqrt(2 * n_layer) if getattr(module, "residual_projection", False) else std
            nn.init.normal_(module.weight, mean=0.0, std=scale)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    return model


class GPT(nn.Module):
    """Decoder-only transformer. ``forward(idx (B, T), cache=None) -> logits (B, T, V)``.

    With a :class:`KVCache`, ``idx`` holds only the *new* tokens; their positions start at
    ``len(cache)`` and the cache is extended in place.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)  # token embedding (V, d)
        self.wpe = nn.Embedding(config.block_size, config.d_model)  # position embedding (block, d)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.d_model)  # final LayerNorm (pre-LN leaves the stream un-normalised)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        gpt2_init_(self, config.n_layer)
        self.lm_head.weight = self.wte.weight  # weight tying: one (V, d) matrix, used twice

    def new_cache(self) -> KVCache:
        """An empty :class:`KVCache` with room for ``block_size`` positions per layer."""
        return KVCache(self.config.n_layer, max_len=self.config.block_size)

    def num_parameters(self) -> int:
        """Parameters, counting the tied matrix once."""
        return sum(p.numel() for p in self.parameters())

    def hidden(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Final hidden states after ``ln_f``: ``(B, T) -> (B, T, d)``."""
        B, T = idx.shape
        start = 0 if cache is None else len(cache)
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} positions exceeds block_size={self.config.block_size}")
        x = self.drop(self.wte(idx) + self.wpe.weight[start:start + T])  # (B, T, d): embeddings of positions start..
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        return self.lm_head(self.hidden(idx, cache))  # (B, T, V)


# --------------------------------------------------------------------------- generation (sampling: course_utils.sampling)
def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend ``idx (B, T0)`` by ``max_new_tokens`` tokens -> ``(B, T0 + max_new_tokens)``.

    ``temperature=0`` is greedy decoding. Without the cache every step runs the model on the
    whole (cropped) context; with it, one prefill on the prompt, then one position per step.
    When the context outgrows ``block_size`` both crop to the last ``block_size`` tokens (the
    cache is rebuilt from the cropped window, so tokens stay identical, but that step is not faster).
    Runs under ``torch.inference_mode`` (less bookkeeping per operation than ``no_grad``, which
    matters for one-position steps); the returned tensor is an ordinary one.
    """
    was_training = model.training
    model.eval()
    block = model.config.block_size
    cache = None
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            if not use_cache:
                logits = model(idx[:, -block:])[:, -1]  # (B, V)
            elif cache is None or len(cache) >= block:
                cache = model.new_cache()
                logits = model(idx[:, -block:], cache)[:, -1]  # prefill
            else:
                logits = model(idx[:, -1:], cache)[:, -1]  # one new position
            nxt = next_token(logits, temperature, top_k, top_p, generator)
            idx = torch.cat([idx, nxt], dim=1)
    model.train(was_training)
    return idx.clone()  # an inference-mode tensor could not be used where autograd records


# --------------------------------------------------------------------------- language-model data and training
def lm_batch(
    data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a 1-d token stream: inputs ``x (B, T)`` and targets ``y = x shifted by one``
    (``y[:, t]`` is the token after ``x[:, t]``), the next-token objective of the FIDLE sequence on transformers."""
    starts = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    x = data[starts[:, None] + offsets]  # (B, T)
    y = data[starts[:, None] + offsets + 1]  # (B, T)
    return x.to(device), y.to(device)


def bigram_log_probs(data: torch.Tensor, vocab_size: int, alpha: float = 0.1) -> torch.Tensor:
    """Counted bigram model ``log P(next | current)`` ``(V, V)`` with add-``alpha`` smoothing."""
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    pairs = data[:-1] * vocab_size + data[1:]
    counts.view(-1).index_add_(0, pairs, torch.ones(len(pairs), dtype=torch.float64))
    counts += alpha
    return (counts / counts.sum(dim=1, keepdim=True)).log().float()


def bigram_loss(log_probs: torch.Tensor, data: torch.Tensor) -> float:
    """Mean cross-entropy (nats per token) of the bigram model on a token stream."""
    return float(-log_probs[data[:-1], data[1:]].mean())


@torch.no_grad()
def estimate_loss(model: GPT, data: torch.Tensor, batches: int = 20, batch_size: int = 32,
                  seed: int = 0, device: torch.device | str = "cpu") -> float:
    """Mean next-token cross-entropy over ``batches`` fixed random windows (same windows every call)."""
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(batches):
        x, y = lm_batch(data, model.config.block_size, batch_size, gen, device)
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()
    model.train(was_training)
    return total / batches


def lm_train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, optimizer: torch.optim.Optimizer,
                  scheduler: torch.optim.lr_scheduler.LRScheduler, max_norm: float = 1.0) -> float:
    """One optimisation step on a batch ``x, y (B, T)`` of a model returning logits ``(B, T, V)``:
    train mode, forward, mean cross-entropy, zero_grad, backward, clip the gradients' global norm
    to ``max_norm``, optimizer step, scheduler step. Returns the batch loss as a Python float."""
    model.train()
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()


def warmup_cosine(step: int, warmup: int, steps: int) -> float:
    """Learning-rate factor at ``step``: linear warm-up over ``warmup`` steps to 1, then a cosine
    decay to 0.1 at ``steps`` (multiply the peak learning rate by it; a ``LambdaLR`` does)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


StepFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, float],
                  float]


def train_lm(
    model: GPT,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    warmup: int = 100,
    weight_decay: float = 0.1,
    max_norm: float = 1.0,
    eval_every: int = 100,
    eval_batches: int = 10,
    seed: int = 0,
    device: torch.device | str = "cpu",
    step_fn: StepFn | None = None,
) -> dict:
    """AdamW with linear warm-up and cosine decay to lr/10 (a ``LambdaLR`` of :func:`warmup_cosine`).

    Each step draws a batch and calls ``step_fn(model, x, y, optimizer, scheduler, max_norm)``, which
    must do the whole update (scheduler step included) and return the batch loss as a float; the
    default is :func:`lm_train_step`. Returns a dict with ``steps`` (where losses were evaluated),
    ``train`` and ``val`` losses there, ``train_batch`` (every step's loss), ``lr`` (every step's
    learning rate), ``seconds`` and ``tokens_per_s`` (training tokens per second, evaluation excluded)."""
    step_fn = lm_train_step if step_fn is None else step_fn
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimiser = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: warmup_cosine(step, warmup, steps))

    gen = torch.Generator().manual_seed(seed)
    history: dict = {"steps": [], "train": [], "val": [], "train_batch": [], "lr": []}
    T = model.config.block_size
    train_seconds = 0.0
    model.train()
    for step in progress(range(steps + 1), desc="training"):
        if step % eval_every == 0 or step == steps:
            history["steps"].append(step)
            history["train"].append(estimate_loss(model, train_data, eval_batches, batch_size, seed=1, device=device))
            history["val"].append(estimate_loss(model, val_data, eval_batches, batch_size, seed=2, device=device))
        if step == steps:
            continue  # the last round only evaluates (continue, not break: the bar ends full)
        start = time.perf_counter()
        x, y = lm_batch(train_data, T, batch_size, gen, device)
        history["lr"].append(optimiser.param_groups[0]["lr"])
        history["train_batch"].append(float(step_fn(model, x, y, optimiser, scheduler, max_norm)))
        train_seconds += time.perf_counter() - start
    history["seconds"] = train_seconds
    history["tokens_per_s"] = steps * batch_size * T / max(train_seconds, 1e-9)
    return history


@torch.no_grad()
def continuation_log_likelihood(model: GPT, prompt: torch.Tensor, continuation: torch.Tensor) -> torch.Tensor:
    """``log p(continuation | prompt)``, summed over the continuation's tokens (natural log), in
    evaluation mode: ``prompt (B, P)`` with ``P >= 1``, ``continuation (B, C)``, ``P + C <= block_size + 1``
    -> ``(B,)``."""
    was_training = model.training
    model.eval()
    ids = torch.cat([prompt, continuation], dim=1)  # (B, P + C)
    log_probs = torch.log_softmax(model(ids[:, :-1]).float(), dim=-1)  # (B, P + C - 1, V): position t predicts t + 1
    C = continuation.size(1)
    picked = log_probs[:, -C:].gather(-1, continuation[..., None]).squeeze(-1)  # (B, C)
    model.train(was_training)
    return picked.sum(dim=-1)


# --------------------------------------------------------------------------- classification
def last_token_pool(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``hidden (B, T, d)``, ``lengths (B,)`` -> the state of each sequence's last real token ``(B, d)``.

    In a causal model only the last position has read the whole sequence (right padding comes after it).
    """
    return hidden[torch.arange(hidden.size(0), device=hidden.device), lengths.to(hidden.device) - 1]


class GPTClassifier(nn.Module):
    """A (pretrained) :class:`GPT` body + a linear head on the last real token: ``(B, T), (B,) -> (B, C)``."""

    def __init__(self, gpt: GPT, n_classes: int) -> None:
        super().__init__()
        self.gpt = gpt
        self.head = nn.Linear(gpt.config.d_model, n_classes)

    def forward(self, idx: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.head(last_token_pool(self.gpt.hidden(idx), lengths))


def encode_padded(texts: Sequence[str], tokenizer, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Character ids, right-padded ``(B, T_max)``, and the lengths ``(B,)``."""
    seqs = [tokenizer.encode(t) for t in texts]
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    ids = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, lengths
