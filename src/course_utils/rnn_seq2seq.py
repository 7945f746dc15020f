"""RNN encoder-decoders, with and without soft attention (what notebooks 01 and 02 build).

Shapes: B batch, S source length, T target length, E embedding size, H the encoder's
output size (2 x the GRU size when bidirectional), D the decoder's state size, A the
attention size. Masks are boolean, ``True`` where a source position is real (not padding),
the convention of :mod:`course_utils.attention`.

The pieces:

- :class:`Encoder` -- embedding + (bi)GRU; returns every position's state ``(B, S, H)`` and
  one summary vector ``(B, H)`` (the last forward state, joined with the first backward one).
- :class:`ContextDecoder` -- Cho et al. (2014): every step sees the *same* context vector,
  the encoder's summary. This is the bottleneck.
- :func:`additive_score` (Bahdanau), :func:`dot_score` (Luong), :func:`general_score`
  (Luong's bilinear form), :func:`attend` (masked softmax + weighted sum).
- :class:`AttentionDecoder` -- Bahdanau et al. (2015): at step t the previous decoder state
  scores every source position, and the context ``c_t`` is the weighted sum of their states.
- :class:`Seq2Seq` -- teacher-forced training forward and :func:`greedy_decode`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = [
    "shift_right",
    "additive_score",
    "dot_score",
    "general_score",
    "attend",
    "Encoder",
    "ContextDecoder",
    "AttentionDecoder",
    "Seq2Seq",
    "build_seq2seq",
    "greedy_decode",
]


def shift_right(targets: torch.Tensor, bos_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder's inputs are ``<bos>`` followed by the targets minus the last.

    targets (B, T) -> inputs (B, T), with ``inputs[:, 0] = bos_id`` and ``inputs[:, t] = targets[:, t-1]``.
    """
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([bos, targets[:, :-1]], dim=1)


# --------------------------------------------------------------------------- scores
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Bahdanau's score ``e_j = v^T tanh(W s + U h_j)``.

    query s (B, D), keys h (B, S, H), W (A, D), U (A, H), v (A,) -> scores (B, S).
    """
    hidden = torch.tanh((query @ W.T).unsqueeze(1) + keys @ U.T)  # (B, S, A)
    return hidden @ v


def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Luong's dot score ``e_j = s . h_j``. query (B, D), keys (B, S, D) -> (B, S)."""
    return (keys @ query.unsqueeze(-1)).squeeze(-1)


def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Luong's general (bilinear) score ``e_j = s^T W h_j``. query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    return (keys @ (query @ W).unsqueeze(-1)).squeeze(-1)


def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over source positions (padding excluded), then the weighted sum of ``values``.

    scores (B, S), values (B, S, H), mask (B, S) bool, True at real positions.
    Returns context (B, H) and weights (B, S), each row of weights summing to 1.
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = (weights.unsqueeze(1) @ values).squeeze(1)
    return context, weights


class Score(nn.Module):
    """One of the three scores as a module with its parameters."""

    def __init__(self, kind: str, query_size: int, key_size: int, attention_size: int | None = None) -> None:
        super().__init__()
        self.kind = kind
        if kind == "additive":
            attention_size = attention_size or query_size
            self.W = nn.Parameter(torch.empty(attention_size, query_size))
            self.U = nn.Parameter(torch.empty(attention_size, key_size))
            self.v = nn.Parameter(torch.empty(attention_size))
            nn.init.xavier_uniform_(self.W)
            nn.init.xavier_uniform_(self.U)
            nn.init.uniform_(self.v, -attention_size**-0.5, attention_size**-0.5)
        elif kind == "general":
            self.W = nn.Parameter(torch.empty(query_size, key_size))
            nn.init.xavier_uniform_(self.W)
        elif kind == "dot":
            if query_size != key_size:
                raise ValueError(f"dot score needs equal sizes, got query {query_size} and keys {key_size}")
        else:
            raise ValueError(f"unknown score {kind!r}; choose additive, dot or general")

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores (B, S) of query (B, D) against keys (B, S, H), straight from the formula."""
        if self.kind == "additive":
            return additive_score(query, keys, self.W, self.U, self.v)
        if self.kind == "general":
            return general_score(query, keys, self.W)
        return dot_score(query, keys)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """The part of the score that depends on the keys only, computed once per sequence:
        ``U h_j`` (additive) or ``W h_j`` (general). The decoder then calls :meth:`fast`."""
        if self.kind == "additive":
            return keys @ self.U.T  # (B, S, A)
        if self.kind == "general":
            return keys @ self.W.T  # (B, S, D)
        return keys

    def fast(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """Same scores as :meth:`forward`, from :meth:`prepare`'s output."""
        if self.kind == "additive":
            return torch.tanh((query @ self.W.T).unsqueeze(1) + prepared) @ self.v
        return dot_score(query, prepared)


# --------------------------------------------------------------------------- encoder
class Encoder(nn.Module):
    """Embedding + GRU over the source. ``hidden_size`` is the size of each output state (H);
    a bidirectional encoder runs two GRUs of ``hidden_size // 2`` and concatenates them."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, *, bidirectional: bool = True, pad_id: int = 0) -> None:
        super().__init__()
        if bidirectional and hidden_size % 2:
            raise ValueError("a bidirectional encoder needs an even hidden_size")
        self.bidirectional = bidirectional
        self.hidden_size = hidden_size
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.gru = nn.GRU(embed_size, hidden_size // 2 if bidirectional else hidden_size, batch_first=True, bidirectional=bidirectional)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_len (B,) -> states (B, S, H) (zeros at padding), summary (B, H).

        The summary is the forward GRU's state after the last *real* token, joined (when
        bidirectional) with the backward GRU's state after reading back to the first token.
        Packing makes both directions skip the padding.
        """
        packed = pack_padded_sequence(self.embed(src), src_len.cpu(), batch_first=True, enforce_sorted=False)
        states, final = self.gru(packed)  # final: (num_directions, B, H / num_directions)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=src.size(1))
        summary = torch.cat([final[0], final[1]], dim=-1) if self.bidirectional else final[0]
        return states, summary


# --------------------------------------------------------------------------- decoders
class ContextDecoder(nn.Module):
    """Decoder that sees one fixed context vector c (the encoder summary) at every step.

    s_0 = tanh(W_init c);  s_t = GRU([emb(y_{t-1}); c], s_{t-1});  logits_t = W_out [s_t; c; emb(y_{t-1})].
    """

    uses_attention = False

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, context_size: int, *, pad_id: int = 0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.init = nn.Linear(context_size, hidden_size)
        self.cell = nn.GRUCell(embed_size + context_size, hidden_size)
        self.out = nn.Linear(hidden_size + context_size + embed_size, vocab_size)

    def init_state(self, states: torch.Tensor, summary: torch.Tensor, mask: torch.Tensor) -> dict:
        return {"s": torch.tanh(self.init(summary)), "context": summary}

    def step(self, y_prev: torch.Tensor, state: dict, states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict, None]:
        """One step. y_prev (B,) ids -> logits (B, V), new state, no attention weights."""
        e = self.embed(y_prev)
        c = state["context"]
        s = self.cell(torch.cat([e, c], dim=-1), state["s"])
        logits = self.out(torch.cat([s, c, e], dim=-1))
        return logits, {"s": s, "context": c}, None


class AttentionDecoder(nn.Module):
    """Bahdanau decoder: a fresh context vector at every step.

    e_{t,j} = score(s_{t-1}, h_j);  a_t = softmax_j(e_t) over real positions;  c_t = sum_j a_{t,j} h_j;
    s_t = GRU([emb(y_{t-1}); c_t], s_{t-1});  logits_t = W_out [s_t; c_t; emb(y_{t-1})].
    """

    uses_attention = True

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        hidden_size: int,
        context_size: int,
        *,
        score: str = "additive",
        attention_size: int | None = None,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.init = nn.Linear(context_size, hidden_size)
        self.score = Score(score, hidden_size, context_size, attention_size)
        self.cell = nn.GRUCell(embed_size + context_size, hidden_size)
        self.out = nn.Linear(hidden_size + context_size + embed_size, vocab_size)

    def init_state(self, states: torch.Tensor, summary: torch.Tensor, mask: torch.Tensor) -> dict:
        # the keys' half of the score does not change from step to step: compute it once
        return {"s": torch.tanh(self.init(summary)), "keys": self.score.prepare(states)}

    def step(self, y_prev: torch.Tensor, state: dict, states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict, torch.Tensor]:
        """One step. y_prev (B,) ids -> logits (B, V), new state, attention weights (B, S)."""
        e = self.embed(y_prev)
        if "keys" in state:
            scores = self.score.fast(state["s"], state["keys"])
        else:
            scores = self.score(state["s"], states)
        c, weights = attend(scores, states, mask)
        s = self.cell(torch.cat([e, c], dim=-1), state["s"])
        logits = self.out(torch.cat([s, c, e], dim=-1))
        return logits, {**state, "s": s}, weights


# --------------------------------------------------------------------------- the model
class Seq2Seq(nn.Module):
    """Encoder + decoder. ``forward`` is teacher-forced; :func:`greedy_decode` generates."""

    def __init__(self, encoder: Encoder, decoder: nn.Module, *, bos_id: int = 1, eos_id: int = 2) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.bos_id = bos_id
        self.eos_id = eos_id

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, dict, torch.Tensor]:
        states, summary = self.encoder(src, src_len)
        mask = torch.arange(src.size(1), device=src.device)[None, :] < src_len.to(src.device)[:, None]
        return states, self.decoder.init_state(states, summary, mask), mask

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: the decoder reads the true previous token, not its own guess.

        src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V) predicting tgt, and the
        attention weights (B, T, S) (``None`` without attention).
        """
        states, state, mask = self.encode(src, src_len)
        inputs = shift_right(tgt, self.bos_id)
        logits, weights = [], []
        for t in range(tgt.size(1)):
            step_logits, state, w = self.decoder.step(inputs[:, t], state, states, mask)
            logits.append(step_logits)
            weights.append(w)
        att = torch.stack(weights, dim=1) if weights and weights[0] is not None else None
        return torch.stack(logits, dim=1), att


def build_seq2seq(
    vocab_size: int,
    *,
    attention: str | None = None,
    embed_size: int = 32,
    hidden_size: int = 128,
    bidirectional: bool = True,
    attention_size: int | None = None,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
) -> Seq2Seq:
    """A ready model: ``attention=None`` (one context vector) or ``"additive"``, ``"dot"``, ``"general"``."""
    encoder = Encoder(vocab_size, embed_size, hidden_size, bidirectional=bidirectional, pad_id=pad_id)
    if attention is None:
        decoder: nn.Module = ContextDecoder(vocab_size, embed_size, hidden_size, hidden_size, pad_id=pad_id)
    else:
        decoder = AttentionDecoder(vocab_size, embed_size, hidden_size, hidden_size, score=attention, attention_size=attention_size, pad_id=pad_id)
    return Seq2Seq(encoder, decoder, bos_id=bos_id, eos_id=eos_id)


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Feed back the most likely token until every row has produced ``<eos>`` or ``max_len`` tokens.

    Returns ids (B, T <= max_len) (after a row's ``<eos>`` it is padded with ``<eos>``) and
    attention weights (B, T, S) or ``None``.
    """
    states, state, mask = model.encode(src, src_len)
    y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    out, weights = [], []
    for _ in range(max_len):
        logits, state, w = model.decoder.step(y, state, states, mask)
        y = logits.argmax(dim=-1)
        y = torch.where(done, torch.full_like(y, model.eos_id), y)
        out.append(y)
        weights.append(w)
        done = done | (y == model.eos_id)
        if bool(done.all()):
            break
    att = torch.stack(weights, dim=1) if weights and weights[0] is not None else None
    return torch.stack(out, dim=1), att
