"""The encoder-decoder transformer of notebook 08 (Vaswani et al. 2017), small and readable.

Shapes: B batch, S source length, T target length, d = d_model, h heads, V vocabulary,
K beam size. Masks follow :mod:`course_utils.masking`: boolean, True where attention is
*allowed*. Token ids follow :class:`course_utils.seq2seq_data.CharVocab`: ``<pad>`` = 0,
``<bos>`` = 1, ``<eos>`` = 2; every target ends with ``<eos>``.

The pieces, in the order the notebook uses them:

- :func:`source_mask`, :func:`decoder_mask` -- key padding for the encoder and the
  cross-attention; causal AND key padding for the decoder's self-attention.
- :class:`TransformerSeq2Seq` -- embeddings (times sqrt(d)) + sinusoidal positions, a stack of
  :class:`~course_utils.blocks.EncoderBlock`, a stack of :class:`~course_utils.blocks.DecoderBlock`
  (masked self-attention, cross-attention, FFN), a linear head. ``forward`` is teacher-forced
  and computes every target position in one parallel pass.
- :func:`label_smoothed_cross_entropy` -- cross-entropy against ``(1 - eps) one_hot + eps / V``,
  padding ignored (the same as ``F.cross_entropy(..., label_smoothing=eps)``).
- :func:`noam_lr`, :func:`noam_scheduler` -- ``d^-0.5 min(step^-0.5, step warmup^-1.5)``.
- :func:`linear_decay_lr` -- the same warm-up, then a straight line to 0 at the end of a fixed budget.
- :func:`train_transformer` -- Adam(0.9, 0.98, 1e-9) + warm-up + label smoothing, for a number of
  steps or a wall-clock budget.
- :func:`greedy_decode_transformer`, :func:`beam_step`, :func:`beam_search`,
  :func:`translate_transformer` -- generation, with the same outputs as the RNN models'
  (:mod:`course_utils.rnn_seq2seq`, :mod:`course_utils.seq2seq_train`) so the two model families
  share tables and plots (``seq2seq_train.evaluate_by_length(..., translate_with=translate_transformer)``).
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Sequence

import torch
import torch.nn.functional as F
from datasets import Dataset
from torch import nn

from course_utils.blocks import DecoderBlock, EncoderBlock, LayerNorm
from course_utils.masking import causal_mask, combine, key_mask, padding_mask
from course_utils.progress import progress
from course_utils.positional import SinusoidalPositionalEncoding
from course_utils.rnn_seq2seq import shift_right
from course_utils.seq2seq_data import CharVocab, encode_dataset, make_loader
from course_utils.seq2seq_train import decode_strings

__all__ = [
    "source_mask",
    "decoder_mask",
    "TransformerSeq2Seq",
    "label_smoothed_cross_entropy",
    "noam_lr",
    "noam_scheduler",
    "linear_decay_lr",
    "train_transformer",
    "greedy_decode_transformer",
    "beam_step",
    "beam_search",
    "translate_transformer",
]


# --------------------------------------------------------------------------- masks
def source_mask(src_len: torch.Tensor, S: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(B, 1, S)`` mask over source keys: True at real tokens. Broadcasts over queries (and heads)."""
    return key_mask(padding_mask(src_len, S, device=device))


def decoder_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """``(B, T, T)`` mask of the decoder's self-attention: key j is allowed for query i
    when ``j <= i`` (causal) AND token j is not padding."""
    T = tgt_in.size(1)
    keys = key_mask(tgt_in != pad_id)  # (B, 1, T)
    return combine(keys, causal_mask(T, device=tgt_in.device))  # (B, T, T)


# --------------------------------------------------------------------------- the model
class TransformerSeq2Seq(nn.Module):
    """Encoder-decoder transformer for token ids (Vaswani et al. 2017, Figure 1).

    encode(src (B, S), src_len (B,)) -> memory (B, S, d)
    decode(tgt_in (B, T), memory, self_mask (B, T, T), memory_mask (B, 1, S)) -> logits (B, T, V)
    forward(src, src_len, tgt (B, T)) -> logits (B, T, V) predicting ``tgt``, and the
    cross-attention weights of the last decoder layer averaged over heads (B, T, S).

    One embedding table serves source, target and output (weight tying, as in the paper's
    shared vocabulary); ``norm_first=False`` is the paper's post-LN block, ``True`` pre-LN
    (then a final LayerNorm closes each stack).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        n_heads: int = 4,
        d_ff: int = 256,
        n_layers: int = 2,
        dropout: float = 0.1,
        norm_first: bool = False,
        max_len: int = 512,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        super().__init__()
        self.d_model, self.pad_id, self.bos_id, self.eos_id = d_model, pad_id, bos_id, eos_id
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # times sqrt(d) below: unit-size inputs
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()
        self.pos = SinusoidalPositionalEncoding(d_model, max_len, dropout=dropout)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers))
        self.enc_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.dec_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied: (V, d)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, d)
        return self.pos(self.embed(ids) * math.sqrt(self.d_model))

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns memory (B, S, d) and the source mask (B, 1, S)."""
        mask = source_mask(src_len, src.size(1), device=src.device)  # (B, 1, S)
        x = self._embed(src)  # (B, S, d)
        for block in self.encoder:
            x = block(x, mask)  # every source position reads every real source position
        return self.enc_norm(x), mask

    def decode(
        self, tgt_in: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, memory_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Decoder stack + head: tgt_in (B, T) -> logits (B, T, V)."""
        y = self._embed(tgt_in)  # (B, T, d)
        for block in self.decoder:
            y = block(y, memory, self_mask, memory_mask)  # masked self-attn, cross-attn, FFN
        return self.head(self.dec_norm(y))  # (B, T, V)

    def cross_attention(self, layer: int = -1) -> torch.Tensor | None:
        """Cross-attention weights of one decoder layer from the last forward, (B, h, T, S)."""
        return self.decoder[layer].cross_weights

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing, all T positions at once: the decoder reads ``<bos> y_1 .. y_{T-1}``."""
        memory, mem_mask = self.encode(src, src_len)
        tgt_in = shift_right(tgt, self.bos_id)  # (B, T)
        logits = self.decode(tgt_in, memory, decoder_mask(tgt_in, self.pad_id), mem_mask)
        cross = self.cross_attention()
        if cross is None:  # never: every decoder block keeps its weights in the forward just run
            raise RuntimeError("the last decoder block kept no cross-attention weights")
        return logits, cross.mean(dim=1)  # (B, T, V), (B, T, S)


# --------------------------------------------------------------------------- training
def label_smoothed_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, ignore_index: int = 0
) -> torch.Tensor:
    """Mean over non-ignored positions of ``-sum_v q_v log p_v`` with ``q = (1 - eps) one_hot(y) + eps / V``.

    logits (..., V), target (...) -> scalar. Equals ``F.cross_entropy(logits, target,
    ignore_index=ignore_index, label_smoothing=smoothing)``.
    """
    logp = F.log_softmax(logits.float(), dim=-1)  # (..., V)
    nll = -logp.gather(-1, target.clamp_min(0).unsqueeze(-1)).squeeze(-1)  # (...)
    uniform = -logp.mean(dim=-1)  # (...): cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    keep = target != ignore_index
    return (loss * keep).sum() / keep.sum().clamp_min(1)


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """``factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5)``; steps count from 1.

    Rises linearly for ``warmup`` steps, peaks at ``factor / sqrt(d * warmup)``, then decays
    like ``1 / sqrt(step)``.
    """
    step = max(int(step), 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup: int, factor: float = 1.0):
    """A ``LambdaLR`` giving :func:`noam_lr` (the optimizer's own lr should be 1.0).

    ``LambdaLR`` counts from 0 before the first ``step()``; the schedule counts from 1.
    """
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: noam_lr(i + 1, d_model, warmup, factor))


def linear_decay_lr(step: int, peak: float, warmup: int, progress: float) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, times ``1 - progress`` (``progress`` in [0, 1]:
    the fraction of the run, in steps or in seconds, already done), so the rate ends at 0."""
    return peak * min(max(int(step), 1) / warmup, 1.0) * max(0.0, 1.0 - progress)


def train_transformer(
    model: TransformerSeq2Seq,
    train: Dataset,
    vocab: CharVocab,
    *,
    steps: int,
    batch_size: int = 64,
    warmup: int = 400,
    factor: float = 1.0,
    label_smoothing: float = 0.1,
    clip: float = 1.0,
    seed: int = 0,
    device: torch.device | str = "cpu",
    log_every: int = 0,
    time_budget: float | None = None,
    stats: dict | None = None,
    schedule: str = "noam",
) -> tuple[list[float], list[float]]:
    """Teacher-forced training with label smoothing, Adam(0.9, 0.98, eps 1e-9) and a warm-up schedule.

    ``schedule="noam"``: :func:`noam_lr` (warm-up, then ``1/sqrt(step)``). ``"linear"``: the same
    warm-up to the same peak, then a straight line down to 0 at the end of the run -- the end being
    ``steps`` or ``time_budget`` seconds, whichever comes first (see :func:`linear_decay_lr`).
    ``time_budget`` (seconds) stops training when it is spent; ``stats`` (a dict) receives
    ``steps``, ``seconds``, ``tokens`` (target tokens seen) and ``tokens_per_s``.
    Returns (loss of every step, learning rate of every step). The loss is the smoothed one.
    """
    if schedule not in ("noam", "linear"):
        raise ValueError(f"unknown schedule {schedule!r}; choose 'noam' or 'linear'")
    torch.manual_seed(seed)
    encoded = train if "src_ids" in train.column_names else encode_dataset(train, vocab)
    loader = make_loader(encoded, batch_size, shuffle=True, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    peak = noam_lr(warmup, model.d_model, warmup, factor)
    model.to(device).train()
    losses: list[float] = []
    lrs: list[float] = []
    tokens = 0
    started = time.perf_counter()
    batches = itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps)  # epoch after epoch
    for batch in progress(batches, total=steps, desc="training"):
        src, src_len, tgt = batch["src"].to(device), batch["src_len"], batch["tgt"].to(device)
        logits, _ = model(src, src_len, tgt)  # (B, T, V)
        loss = label_smoothed_cross_entropy(logits, tgt, label_smoothing, vocab.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        step = len(losses) + 1
        if schedule == "noam":
            lr = noam_lr(step, model.d_model, warmup, factor)
        else:
            done = step / steps
            if time_budget:
                done = max(done, (time.perf_counter() - started) / time_budget)
            lr = linear_decay_lr(step, peak, warmup, done)
        for group in optimizer.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        optimizer.step()
        losses.append(loss.item())
        if log_every and len(losses) % log_every == 0:
            print(f"step {len(losses):5d}  loss {sum(losses[-log_every:]) / log_every:.4f}  "
                  f"lr {lrs[-1]:.2e}  ({time.perf_counter() - started:.0f} s)")
        tokens += int((tgt != vocab.pad_id).sum())
        if time_budget is not None and time.perf_counter() - started >= time_budget:
            break  # the budget is spent: stop here
    model.eval()
    if stats is not None:  # what the run did: steps, seconds, target tokens, tokens per second
        seconds = time.perf_counter() - started
        stats.update(steps=len(losses), seconds=seconds, tokens=tokens, tokens_per_s=tokens / max(seconds, 1e-9))
    return losses, lrs


# --------------------------------------------------------------------------- decoding
@torch.no_grad()
def greedy_decode_transformer(
    model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Append the most likely token until every row has written ``<eos>`` (or ``max_len`` tokens).

    Each step re-runs the decoder on the whole prefix (no cache: notebook 10 adds one).
    Returns ids (B, T <= max_len), padded with ``<eos>`` after a row's ``<eos>``, and the
    last layer's cross-attention averaged over heads (B, T, S).
    """
    model.eval()
    memory, mem_mask = model.encode(src, src_len)
    B = src.size(0)
    ys = torch.full((B, 1), model.bos_id, dtype=torch.long, device=src.device)  # (B, 1): <bos>
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, causal_mask(ys.size(1), device=src.device), mem_mask)
        y = logits[:, -1].argmax(dim=-1)  # (B,): the prediction for the next position
        y = torch.where(done, torch.full_like(y, model.eos_id), y)
        ys = torch.cat([ys, y[:, None]], dim=1)
        done = done | (y == model.eos_id)
        if bool(done.all()):
            break
    cross = model.cross_attention()
    if cross is None:  # only with max_len < 1 on a model that never ran (it was None.mean before)
        raise RuntimeError("the last decoder block kept no cross-attention weights")
    weights = cross.mean(dim=1)  # (B, T, S) from the last (full) pass
    return ys[:, 1:], weights


def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of beam search.

    scores (B, K) -- total log-probability of each live hypothesis;
    log_probs (B, K, V) -- log-probabilities of the next token for each hypothesis.
    Returns the ``beam_size`` best continuations over all K x V candidates of each row:
    new scores (B, beam_size), the hypothesis each extends (B, beam_size), its new token (B, beam_size).
    """
    B, K, V = log_probs.shape
    candidates = (scores.unsqueeze(-1) + log_probs).reshape(B, K * V)  # (B, K*V)
    best, flat = candidates.topk(beam_size, dim=-1)  # (B, beam_size)
    return best, flat // V, flat % V


@torch.no_grad()
def beam_search(
    model: TransformerSeq2Seq,
    src: torch.Tensor,
    src_len: torch.Tensor,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``beam_size`` most probable prefixes of every row; finished ones only extend with ``<eos>``.

    The winner maximises ``score / length ** length_penalty`` (0: plain log-probability).
    Returns ids (B, T) as :func:`greedy_decode_transformer` does, and the winners' scores (B,).
    """
    model.eval()
    K, device = beam_size, src.device
    memory, mem_mask = model.encode(src, src_len)  # (B, S, d), (B, 1, S)
    B, S, d = memory.shape
    memory = memory.repeat_interleave(K, dim=0)  # (B*K, S, d): K copies of each source
    mem_mask = mem_mask.repeat_interleave(K, dim=0)  # (B*K, 1, S)
    ys = torch.full((B * K, 1), model.bos_id, dtype=torch.long, device=device)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # start from one hypothesis, not K identical ones
    done = torch.zeros(B, K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B, K, device=device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, causal_mask(ys.size(1), device=device), mem_mask)
        logp = F.log_softmax(logits[:, -1].float(), dim=-1).view(B, K, -1)  # (B, K, V)
        V = logp.size(-1)
        # a finished hypothesis may only write <eos> again, at no cost: its score is frozen
        eos_only = torch.full((V,), float("-inf"), device=device)
        eos_only[model.eos_id] = 0.0
        logp = torch.where(done.unsqueeze(-1), eos_only, logp)
        scores, beam, token = beam_step(scores, logp, K)  # (B, K) each
        rows = (torch.arange(B, device=device)[:, None] * K + beam).reshape(-1)  # (B*K,) rows of ys to extend
        ys = torch.cat([ys[rows], token.reshape(-1, 1)], dim=1)
        lengths = torch.gather(lengths, 1, beam) + (~torch.gather(done, 1, beam)).float()
        done = torch.gather(done, 1, beam) | (token == model.eos_id)
        if bool(done.all()):
            break
    ranked = scores / lengths.clamp_min(1.0) ** length_penalty if length_penalty else scores
    best = ranked.argmax(dim=-1)  # (B,)
    ids = ys.view(B, K, -1)[torch.arange(B, device=device), best, 1:]  # drop <bos>
    return ids, scores[torch.arange(B, device=device), best]


@torch.no_grad()
def translate_transformer(
    model: TransformerSeq2Seq,
    sources: Sequence[str],
    vocab: CharVocab,
    *,
    beam_size: int = 1,
    max_len: int | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    return_attention: bool = False,
):
    """Outputs (strings) for ``sources``, greedy (``beam_size=1``) or by beam search.

    With ``return_attention`` also a list of ``(T_out, S)`` cross-attention matrices (last decoder
    layer, mean over heads), as :func:`course_utils.seq2seq_train.translate`; ``None`` per input
    with beam search, which keeps no weights.
    """
    model.eval()

    def decode(src: torch.Tensor, src_len: torch.Tensor, limit: int):
        if beam_size > 1:
            return beam_search(model, src, src_len, limit, beam_size)[0], None
        return greedy_decode_transformer(model, src, src_len, limit)

    return decode_strings(decode, sources, vocab, max_len=max_len, batch_size=batch_size, device=device,
                          return_attention=return_attention)
