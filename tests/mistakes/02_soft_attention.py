"""Plausible wrong answers to notebook 02; each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(cell="additive_score", name="forgets the tanh",
            rejected_by=("test_additive_score",), replace=(("hidden = torch.tanh(", "hidden = ("),), kind="logic"),
    Mistake(cell="additive_score", name="tanh after the projection on v",
            rejected_by=("test_additive_score",),
            replace=(("hidden = torch.tanh(", "hidden = ("), ("return hidden @ v", "return torch.tanh(hidden @ v)")), kind="logic"),
    Mistake(cell="dot_general_score", name="dot score divided by sqrt(d)",
            rejected_by=("test_dot_general_score",),
            replace=(("return (keys @ query.unsqueeze(-1)).squeeze(-1)",
                      "return (keys @ query.unsqueeze(-1)).squeeze(-1) / math.sqrt(query.size(-1))"),), kind="logic"),
    Mistake(cell="dot_general_score", name="general score with W transposed",
            rejected_by=("test_dot_general_score",), replace=(("(query @ W)", "(query @ W.T)"),), kind="logic"),
    Mistake(cell="attend", name="softmax over the batch axis",
            rejected_by=("test_attend",), replace=(("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)"),), kind="logic"),
    Mistake(cell="attend", name="mask ignored",
            rejected_by=("test_attend",),
            replace=(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),), kind="argument"),
    Mistake(cell="attend", name="masked scores set to 0 instead of -inf",
            rejected_by=("test_attend",), replace=(('float("-inf")', "0.0"),), kind="logic"),
    Mistake(cell="attention_decoder_step", name="scores with the new state",
            rejected_by=("test_attention_decoder_step",),
            source=(
                "def attention_decoder_step(decoder, y_prev, s_prev, states, mask):\n"
                "    e = decoder.embed(y_prev)\n"
                "    context0, _ = attend(decoder.score(s_prev, states), states, mask)\n"
                "    s = decoder.cell(torch.cat([e, context0], dim=-1), s_prev)\n"
                "    context, weights = attend(decoder.score(s, states), states, mask)\n"
                "    logits = decoder.out(torch.cat([s, context, e], dim=-1))\n"
                "    return logits, s, weights\n"
            ), kind="logic"),
    Mistake(cell="attention_decoder_step", name="forgets to pass the mask",
            rejected_by=("test_attention_decoder_step",),
            replace=(("attend(scores, states, mask)", "attend(scores, states)"),), kind="argument"),
    # found by the blind red team of issue 12 (they kept full marks before)
    Mistake(cell='additive_score', name='in-place *= v on the tanh output', kind='autograd',
            rejected_by=('test_additive_score',), source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    hidden = torch.tanh((query @ W.T)[:, None, :] + keys @ U.T)
    hidden *= v
    return hidden.sum(-1)
'''),
    Mistake(cell='additive_score', name='scores preallocated with torch.zeros (no device/dtype)', kind='device',
            rejected_by=('test_additive_score',), source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    B, S, _ = keys.shape
    scores = torch.zeros(B, S)
    ws = query @ W.T
    for j in range(S):
        scores[:, j] = torch.tanh(ws + keys[:, j] @ U.T) @ v
    return scores
'''),
    Mistake(cell='additive_score', name='float32 forced (.float())', kind='dtype',
            rejected_by=('test_additive_score',), source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    query, keys, W, U, v = (t.float() for t in (query, keys, W, U, v))
    return torch.tanh((query @ W.T)[:, None] + keys @ U.T) @ v
'''),
    Mistake(cell='additive_score', name="the package's additive_score", kind='reference',
            rejected_by=('test_additive_score',), source='''\
from course_utils.rnn_seq2seq import additive_score
'''),
    Mistake(cell='dot_general_score', name='squeeze() without a dim (B=1 or S=1 breaks)', kind='boundary',
            rejected_by=('test_dot_general_score',), source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    return torch.bmm(keys, query.unsqueeze(2)).squeeze()


def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    return torch.bmm(keys, (query @ W).unsqueeze(2)).squeeze()
'''),
    Mistake(cell='dot_general_score', name='float32 accumulator for dot scores', kind='dtype',
            rejected_by=('test_dot_general_score',), source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    out = torch.empty(keys.shape[:2], device=keys.device)
    for j in range(keys.size(1)):
        out[:, j] = (keys[:, j] * query).sum(-1)
    return out

def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    return torch.einsum("bd,dh,bsh->bs", query, W, keys)
'''),
    Mistake(cell='dot_general_score', name="the package's dot and general scores", kind='reference',
            rejected_by=('test_dot_general_score',), source='''\
from course_utils.rnn_seq2seq import dot_score, general_score
'''),
    Mistake(cell='attend', name="in-place masked_fill_ on the caller's scores", kind='autograd',
            rejected_by=('test_attend',), source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(1), weights
'''),
    Mistake(cell='attend', name='-inf tensor made without device', kind='device',
            rejected_by=('test_attend',), source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = torch.where(mask, scores, torch.full(scores.shape, float("-inf")))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bs,bsh->bh", weights, values), weights
'''),
    Mistake(cell='attend', name='softmax forced to float32', kind='dtype',
            rejected_by=('test_attend',), source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1)
    context = torch.einsum("bs,bsh->bh", weights, values.float())
    return context, weights
'''),
    Mistake(cell='attend', name="the package's attend", kind='reference',
            rejected_by=('test_attend',), source='''\
from course_utils.rnn_seq2seq import attend
'''),
    Mistake(cell='attention_decoder_step', name='context and weights detached', kind='autograd',
            rejected_by=('test_attention_decoder_step',), source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    e = decoder.embed(y_prev)
    context, weights = attend(decoder.score(s_prev, states), states, mask)
    s = decoder.cell(torch.cat([e, context.detach()], -1), s_prev)
    return decoder.out(torch.cat([s, context.detach(), e], -1)), s, weights.detach()
'''),
    Mistake(cell='attention_decoder_step', name='calls decoder.step (the reference)', kind='reference',
            rejected_by=('test_attention_decoder_step',), source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    logits, state, weights = decoder.step(y_prev, {"s": s_prev}, states, mask)
    return logits, state["s"], weights
'''),
    # found by the blind red team of the second round (they kept full marks before)
    Mistake(cell='attend', name='mask added as log(mask.float()) (half-precision scores become float32)', kind='dtype',
            rejected_by=('test_attend',), source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = scores + torch.log(mask.float())
    weights = torch.softmax(scores, dim=-1)
    context = torch.einsum("bs,bsh->bh", weights, values)
    return context, weights
'''),
    Mistake(cell='attend', name='bmm then squeeze() without a dim (B=1 or H=1 breaks)', kind='boundary',
            rejected_by=('test_attend',),
            replace=(("context = (weights.unsqueeze(1) @ values).squeeze(1)", "context = (weights.unsqueeze(1) @ values).squeeze()"),)),
    Mistake(cell='attend', name='masked with -1e9 instead of -inf (overflows float16)', kind='dtype',
            rejected_by=('test_attend',),
            replace=(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores.masked_fill(mask == 0, -1e9)"),)),
    Mistake(cell='attention_decoder_step', name='inline masked softmax, context squeezed (B=1 breaks)', kind='boundary',
            rejected_by=('test_attention_decoder_step',), source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    scores = decoder.score(s_prev, states)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    context = torch.bmm(weights.unsqueeze(1), states).squeeze()
    e = decoder.embed(y_prev)
    s = decoder.cell(torch.cat([e, context], dim=-1), s_prev)
    logits = decoder.out(torch.cat([s, context, e], dim=-1))
    return logits, s, weights
'''),
    # fourth blind red team (issue 24): right in exact arithmetic, NaN when a padded score is far above the
    # real ones; the prose now says why the mask goes in before the softmax
    Mistake(cell='attend', name='softmax over every position, then padding zeroed and renormalised', kind='boundary',
            rejected_by=('test_attend',), source='''\
def attend(scores, values, mask=None):
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask.to(weights.dtype)
        weights = weights / weights.sum(-1, keepdim=True)
    context = torch.einsum("bs,bsh->bh", weights, values)
    return context, weights
'''),
]

# right answers in other styles, written blind from the release (issue 12): each must pass its tests
ACCEPTED = [
    Accepted(cell='additive_score', name='broadcast with unsqueeze and matmul', source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    hidden = torch.tanh((query @ W.T).unsqueeze(1) + keys @ U.T)
    return hidden @ v
'''),
    Accepted(cell='additive_score', name='einsum and F.linear', source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    ws = F.linear(query, W)[:, None, :]
    uh = torch.einsum("ah,bsh->bsa", U, keys)
    return torch.einsum("bsa,a->bs", torch.tanh(ws + uh), v)
'''),
    Accepted(cell='additive_score', name='loop over positions, stacked', source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    ws = query @ W.t()
    cols = [torch.tanh(ws + keys[:, j] @ U.t()) @ v for j in range(keys.size(1))]
    return torch.stack(cols, dim=1)
'''),
    Accepted(cell='dot_general_score', name='einsum both', source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    return torch.einsum("bd,bsd->bs", query, keys)

def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    return torch.einsum("bd,dh,bsh->bs", query, W, keys)
'''),
    Accepted(cell='dot_general_score', name='bmm and broadcasting product', source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    return torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)


def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    projected = keys @ W.T            # (B, S, D)
    return (projected * query[:, None, :]).sum(dim=-1)
'''),
    Accepted(cell='dot_general_score', name='general via dot_score of (query @ W)', source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    return (keys @ query[..., None])[..., 0]


def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    return dot_score(query @ W, keys)
'''),
    Accepted(cell='attend', name='masked_fill -inf, softmax, bmm', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)
    return context, weights
'''),
    Accepted(cell='attend', name='torch.where with finfo.min, einsum', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    masked = torch.where(mask, scores, torch.full_like(scores, torch.finfo(scores.dtype).min))
    weights = F.softmax(masked, dim=1)
    return torch.einsum("bs,bsh->bh", weights, values), weights
'''),
    Accepted(cell='attend', name='manual stable exp, multiply by mask, renormalise', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    keep = torch.ones_like(scores) if mask is None else mask.to(scores.dtype)
    shifted = scores - scores.masked_fill(keep == 0, float("-inf")).amax(dim=-1, keepdim=True)
    e = torch.exp(shifted.masked_fill(keep == 0, 0.0)) * keep
    weights = e / e.sum(dim=-1, keepdim=True)
    context = (weights.unsqueeze(-1) * values).sum(dim=1)
    return context, weights
'''),
    Accepted(cell='attention_decoder_step', name='score, attend, cell, out', source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    e = decoder.embed(y_prev)
    context, weights = attend(decoder.score(s_prev, states), states, mask)
    s = decoder.cell(torch.cat([e, context], -1), s_prev)
    logits = decoder.out(torch.cat([s, context, e], -1))
    return logits, s, weights
'''),
    Accepted(cell='attention_decoder_step', name='keyword calls, hstack, explicit shapes', source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    scores = decoder.score(s_prev, states)
    assert scores.shape == states.shape[:2]
    c_t, a_t = attend(scores=scores, values=states, mask=mask)
    emb = decoder.embed(y_prev)
    s_t = decoder.cell(torch.hstack([emb, c_t]), s_prev)
    return decoder.out(torch.hstack([s_t, c_t, emb])), s_t, a_t
'''),
    Accepted(cell='attend', name='torch.where with a CPU scalar -inf tensor', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    weights = scores.softmax(-1)
    return torch.einsum("bs,bsh->bh", weights, values), weights
'''),
    # right answers of the second blind red team: each must pass its tests
    Accepted(cell='additive_score', name='tensordot for both projections, (x * v).sum', source='''\
def additive_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor, U: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """e_j = v^T tanh(W s + U h_j): query (B, D), keys (B, S, H), W (A, D), U (A, H), v (A,) -> (B, S)."""
    ws = torch.tensordot(query, W, dims=([1], [1]))          # (B, A)
    uh = torch.tensordot(keys, U, dims=([2], [1]))           # (B, S, A)
    return (torch.tanh(uh + ws[:, None, :]) * v).sum(dim=-1)
'''),
    Accepted(cell='dot_general_score', name='F.bilinear for general, bmm for dot', source='''\
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """e_j = s . h_j: query (B, D), keys (B, S, D) -> (B, S)."""
    return torch.bmm(keys, query.unsqueeze(2))[:, :, 0]


def general_score(query: torch.Tensor, keys: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """e_j = s^T W h_j: query (B, D), keys (B, S, H), W (D, H) -> (B, S)."""
    q = query.unsqueeze(1).expand(-1, keys.size(1), -1)
    return F.bilinear(q, keys, W.unsqueeze(0)).squeeze(-1)
'''),
    Accepted(cell='attend', name='log of the mask in the scores\' dtype, matmul', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = scores + torch.log(mask.to(scores.dtype))
    weights = scores.softmax(-1)
    context = (weights[:, None, :] @ values)[:, 0, :]
    return context, weights
'''),
    Accepted(cell='attend', name='softmax computed in float32, cast back to the inputs\' dtype', source='''\
def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked softmax over source positions, then the weighted sum -> (context (B, H), weights (B, S))."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
    return torch.einsum("bs,bsh->bh", weights, values), weights
'''),
    Accepted(cell='attention_decoder_step', name='inline masked softmax instead of attend', source='''\
def attention_decoder_step(decoder: AttentionDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                           states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Bahdanau step -> (logits (B, V), new state s (B, D), attention weights (B, S))."""
    scores = decoder.score(s_prev, states)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = torch.einsum("bs,bsh->bh", weights, states)
    e = decoder.embed(y_prev)
    s = decoder.cell(torch.cat([e, context], dim=1), s_prev)
    logits = decoder.out(torch.cat([s, context, e], dim=1))
    return logits, s, weights
'''),
]
