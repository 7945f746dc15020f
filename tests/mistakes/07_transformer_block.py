"""Curated wrong answers for notebook 07 (the transformer block); each must lose points."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    # Exercise 1: layer_norm
    Mistake(
        cell="layer_norm",
        name="unbiased variance (torch.var divides by d - 1)", kind="logic",
        rejected_by=("test_layer_norm",),
        replace=(("((x - mean) ** 2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True)"),),
    ),
    Mistake(
        cell="layer_norm",
        name="eps added outside the square root", kind="boundary",
        rejected_by=("test_layer_norm",),
        replace=(("torch.sqrt(var + eps)", "(torch.sqrt(var) + eps)"),),
    ),
    # Exercise 2: feed_forward
    Mistake(
        cell="feed_forward",
        name="ReLU also applied to the output layer", kind="logic",
        rejected_by=("test_feed_forward",),
        replace=(("return hidden @ W2 + b2", "return torch.relu(hidden @ W2 + b2)"),),
    ),
    # Exercise 3: encoder_block
    Mistake(
        cell="encoder_block",
        name="pre-LN residual adds to the normalised x", kind="logic",
        rejected_by=("test_encoder_block",),
        replace=(("x = x + attn(h, h, h, mask=mask)[0]", "x = h + attn(h, h, h, mask=mask)[0]"),),
    ),
    Mistake(
        cell="encoder_block",
        name="post-LN FFN sub-layer without its residual", kind="logic",
        rejected_by=("test_encoder_block",),
        replace=(("x = norm2(x + ffn(x))", "x = norm2(ffn(x))"),),
    ),
    Mistake(
        cell="encoder_block",
        name="padding mask not passed to the attention", kind="argument",
        rejected_by=("test_encoder_block",),
        replace=(("attn(h, h, h, mask=mask)", "attn(h, h, h)"), ("attn(x, x, x, mask=mask)", "attn(x, x, x)")),
    ),
    # Exercise 4: masked_mean_pool
    Mistake(
        cell="masked_mean_pool",
        name="divides by T, counting padded positions", kind="logic",
        rejected_by=("test_masked_mean_pool",),
        replace=(("/ weights.sum(dim=1)", "/ h.size(1)"),),
    ),
    # Exercise 5: prepend_cls
    Mistake(
        cell="prepend_cls",
        name="[CLS] appended at the end", kind="logic",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.cat([first, h], dim=1)", "torch.cat([h, first], dim=1)"),),
    ),
    Mistake(
        cell="prepend_cls",
        name="mask extended with False for [CLS]", kind="logic",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.ones(B, 1, dtype=torch.bool, device=h.device)", "torch.zeros(B, 1, dtype=torch.bool, device=h.device)"),),
    ),
    Mistake(
        cell="prepend_cls",
        name="mask column created on the CPU (no device=), breaks on a GPU", kind="device",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.ones(B, 1, dtype=torch.bool, device=h.device)", "torch.ones(B, 1, dtype=torch.bool)"),),
    ),
]

# Red-team pass (issue 12): wrong answers written blind from the release notebook that kept full marks
# before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell="layer_norm", name='casts to float32', kind="dtype",
            rejected_by=("test_layer_norm",), source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    x = x.float()
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return gamma.float() * (x - mu) / torch.sqrt(var + eps) + beta.float()
'''),
    Mistake(cell="layer_norm", name='torch.native_layer_norm (ban evaded)', kind="ban",
            rejected_by=("test_layer_norm",), source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    return torch.native_layer_norm(x, x.shape[-1:], gamma, beta, eps)[0]
'''),
    Mistake(cell="layer_norm", name='imports course_utils.blocks.layer_norm', kind="reference",
            rejected_by=("test_layer_norm",), source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    from course_utils.blocks import layer_norm as _ln
    return _ln(x, gamma, beta, eps)
'''),
    Mistake(cell="feed_forward", name='max with torch.zeros(h.shape) (no device)', kind="device",
            rejected_by=("test_feed_forward",), source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    h = x @ W1 + b1
    h = torch.max(h, torch.zeros(h.shape))
    return h @ W2 + b2
'''),
    Mistake(cell="feed_forward", name='relu through .data (grads not masked)', kind="autograd",
            rejected_by=("test_feed_forward",), source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    h = x @ W1 + b1
    h.data.clamp_(min=0)
    return h @ W2 + b2
'''),
    Mistake(cell="feed_forward", name='float32 cast', kind="dtype",
            rejected_by=("test_feed_forward",), source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    h = F.relu(x.float() @ W1.float() + b1.float())
    return h @ W2.float() + b2.float()
'''),
    Mistake(cell="feed_forward", name='reference FeedForward via functional_call', kind="reference",
            rejected_by=("test_feed_forward",), source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    from torch.func import functional_call
    ff = FeedForward(W1.shape[0], W1.shape[1])
    params = {"fc1.weight": W1.T, "fc1.bias": b1, "fc2.weight": W2.T, "fc2.bias": b2}
    return functional_call(ff, params, (x,))
'''),
    Mistake(cell="encoder_block", name='reference EncoderBlock with the given modules', kind="reference",
            rejected_by=("test_encoder_block",), source='''def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:
    """One transformer encoder block. (B, T, d) -> (B, T, d)."""

    from course_utils.blocks import EncoderBlock as _EB
    blk = _EB.__new__(_EB)
    nn.Module.__init__(blk)
    blk.attn, blk.ffn, blk.norm1, blk.norm2, blk.norm_first = attn, ffn, norm1, norm2, norm_first
    blk.dropout = nn.Identity()
    return blk(x, mask)
'''),
    Mistake(cell="masked_mean_pool", name='h[~real] = 0 mutates the input', kind="autograd",
            rejected_by=("test_masked_mean_pool",), source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    h[~real] = 0
    return h.sum(1) / real.sum(1, keepdim=True)
'''),
    Mistake(cell="masked_mean_pool", name='output buffer torch.zeros(B, d) (device, dtype)', kind="device",
            rejected_by=("test_masked_mean_pool",), source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    B, T, d = h.shape
    out = torch.zeros(B, d)
    for b in range(B):
        out[b] = h[b, real[b]].mean(0)
    return out
'''),
    Mistake(cell="masked_mean_pool", name='float32 mask and result', kind="dtype",
            rejected_by=("test_masked_mean_pool",), source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    m = real.float().unsqueeze(-1)
    return ((h * m).sum(1) / m.sum(1)).float()
'''),
    Mistake(cell="masked_mean_pool", name="imports the package's masked_mean_pool", kind="reference",
            rejected_by=("test_masked_mean_pool",), source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    from course_utils.sentiment_models import masked_mean_pool as _pool
    return _pool(h, real)
'''),
    Mistake(cell="prepend_cls", name='new mask column copied from real[:, :1] (empty sentence)', kind="boundary",
            rejected_by=("test_prepend_cls",), source='''def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""

    B = h.shape[0]
    return torch.cat([cls.expand(B, 1, -1), h], 1), torch.cat([real[:, :1], real], 1)
'''),
    Mistake(cell="prepend_cls", name="imports the package's prepend_cls", kind="reference",
            rejected_by=("test_prepend_cls",), source='''def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""

    from course_utils.sentiment_models import prepend_cls as _p
    return _p(h, real, cls)
'''),
]

# Right answers in other styles than the solution: each must pass every test (issue 12).
ACCEPTED = [
    Accepted(cell="layer_norm", name='mean/var(unbiased=False)/rsqrt', source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return gamma * (x - mu) * torch.rsqrt(var + eps) + beta
'''),
    Accepted(cell="layer_norm", name='centred squares by hand', source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    centred = x - x.mean(-1, keepdim=True)
    var = (centred ** 2).mean(-1, keepdim=True)
    return centred / torch.sqrt(var + eps) * gamma + beta
'''),
    Accepted(cell="layer_norm", name='var_mean correction=0', source='''def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""

    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    assert gamma.shape == beta.shape == x.shape[-1:]
    return (x - mean) / (var + eps).sqrt() * gamma + beta
'''),
    Accepted(cell="feed_forward", name='relu matmul', source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    return torch.relu(x @ W1 + b1) @ W2 + b2
'''),
    Accepted(cell="feed_forward", name='einsum + clamp', source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    hidden = torch.einsum("...d,df->...f", x, W1) + b1
    return torch.einsum("...f,fd->...d", hidden.clamp(min=0), W2) + b2
'''),
    Accepted(cell="feed_forward", name='F.linear with transposes', source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    return F.linear(F.relu(F.linear(x, W1.T, b1)), W2.T, b2)
'''),
    Accepted(cell="feed_forward", name='max with zeros_like', source='''def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""

    h = torch.matmul(x, W1) + b1
    h = torch.maximum(h, torch.zeros_like(h))
    return torch.matmul(h, W2) + b2
'''),
    Accepted(cell="encoder_block", name='straightforward if/else', source='''def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:
    """One transformer encoder block. (B, T, d) -> (B, T, d)."""

    if norm_first:
        h = norm1(x)
        x = x + attn(h, h, h, mask=mask)[0]
        x = x + ffn(norm2(x))
    else:
        x = norm1(x + attn(x, x, x, mask=mask)[0])
        x = norm2(x + ffn(x))
    return x
'''),
    Accepted(cell="encoder_block", name='sublayer helper', source='''def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:
    """One transformer encoder block. (B, T, d) -> (B, T, d)."""

    def self_attention(t):
        out, _weights = attn(t, t, t, mask=mask)
        return out

    for sublayer, norm in ((self_attention, norm1), (ffn, norm2)):
        x = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
    return x
'''),
    Accepted(cell="encoder_block", name='positional mask, tuple unpack', source='''def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:
    """One transformer encoder block. (B, T, d) -> (B, T, d)."""

    residual = x
    if norm_first:
        q = norm1(residual)
        a, _ = attn(q, q, q, mask)
        residual = residual + a
        return residual + ffn(norm2(residual))
    a, _ = attn(residual, residual, residual, mask)
    o = norm1(residual + a)
    return norm2(o + ffn(o))
'''),
    Accepted(cell="encoder_block", name='in-place adds on the sublayer outputs', source='''def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:
    """One transformer encoder block. (B, T, d) -> (B, T, d)."""

    if norm_first:
        h = norm1(x)
        a = attn(h, h, h, mask=mask)[0]
        a += x
        f = ffn(norm2(a))
        f += a
        return f
    a = attn(x, x, x, mask=mask)[0]
    a += x
    o = norm1(a)
    f = ffn(o)
    f += o
    return norm2(f)
'''),
    Accepted(cell="masked_mean_pool", name='multiply by mask / count', source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    m = real.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(dim=1) / m.sum(dim=1)
'''),
    Accepted(cell="masked_mean_pool", name='einsum + clamp', source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    weights = real.to(h.dtype)
    total = torch.einsum("btd,bt->bd", h, weights)
    return total / weights.sum(-1, keepdim=True).clamp(min=1)
'''),
    Accepted(cell="masked_mean_pool", name='loop over sentences with boolean index', source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    return torch.stack([h[b][real[b]].mean(dim=0) for b in range(h.shape[0])])
'''),
    Accepted(cell="masked_mean_pool", name='masked_fill then divide', source='''def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of h (B, T, d) over the real tokens -> (B, d)."""

    summed = h.masked_fill(~real[..., None], 0.0).sum(1)
    return summed / real.sum(1, keepdim=True)
'''),
    Accepted(cell="prepend_cls", name='cat expand + ones on device', source='''def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""

    B, T, d = h.shape
    h2 = torch.cat([cls.expand(B, 1, d), h], dim=1)
    real2 = torch.cat([torch.ones(B, 1, dtype=torch.bool, device=real.device), real], dim=1)
    return h2, real2
'''),
    Accepted(cell="prepend_cls", name='repeat + F.pad', source='''def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""

    first = cls.view(1, 1, -1).repeat(h.size(0), 1, 1)
    return torch.cat((first, h), 1), F.pad(real, (1, 0), value=True)
'''),
    Accepted(cell="prepend_cls", name='new_ones + new_zeros buffer', source='''def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""

    B, T, d = h.shape
    out = h.new_zeros(B, T + 1, d)
    out[:, 0] = cls
    out[:, 1:] = h
    return out, torch.cat([real.new_ones(B, 1), real], dim=1)
'''),
]

# Second blind red-team pass: wrong answers that kept full marks until the hidden tests covered them
# (torch's other normalisations, E[x^2] - mean^2, d = 1, 1-D/4-D and non-contiguous x, bfloat16,
# masks that are not a prefix, a batch of one, T = 0), then right answers in styles of their own.
_LN_DEF = ("def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:\n"
           '    """x (..., d), gamma (d,), beta (d,) -> gamma * (x - mean) / sqrt(var + eps) + beta, over the last axis."""\n')
_FF_DEF = ("def feed_forward(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:\n"
           '    """max(0, x W1 + b1) W2 + b2, applied to every position: (..., d) -> (..., d)."""\n')
_EB_DEF = ("def encoder_block(x, attn, ffn, norm1, norm2, norm_first: bool, mask=None) -> torch.Tensor:\n"
           '    """One transformer encoder block. (B, T, d) -> (B, T, d)."""\n')
_MP_DEF = ("def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:\n"
           '    """Mean of h (B, T, d) over the real tokens -> (B, d)."""\n')
_PC_DEF = ("def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:\n"
           '    """(B, T, d), (B, T), (d,) -> (B, T+1, d), (B, T+1)."""\n')

MISTAKES += [
    Mistake(cell="layer_norm", name="F.group_norm with one group (torch's norm in disguise)", kind="ban",
            rejected_by=("test_layer_norm",), source=_LN_DEF + '''    flat = x.reshape(-1, x.shape[-1])
    return F.group_norm(flat, 1, gamma, beta, eps).reshape(x.shape)
'''),
    Mistake(cell="layer_norm", name="F.instance_norm on (N, 1, d)", kind="ban",
            rejected_by=("test_layer_norm",), source=_LN_DEF + '''    out = F.instance_norm(x.reshape(-1, 1, x.shape[-1]), eps=eps).reshape(x.shape)
    return gamma * out + beta
'''),
    Mistake(cell="layer_norm", name="F.rms_norm of the centred x", kind="ban",
            rejected_by=("test_layer_norm",), source=_LN_DEF + '''    centred = x - x.mean(-1, keepdim=True)
    return F.rms_norm(centred, (x.shape[-1],), gamma, eps) + beta
'''),
    Mistake(cell="layer_norm", name="F.batch_norm on the transposed (d, N) view", kind="ban",
            rejected_by=("test_layer_norm",), source=_LN_DEF + '''    flat = x.reshape(-1, x.shape[-1]).T
    out = F.batch_norm(flat, None, None, training=True, eps=eps).T
    return out.reshape(x.shape) * gamma + beta
'''),
    Mistake(cell="layer_norm", name="variance as E[x^2] - mean^2 (cancels in float32 for large offsets)", kind="boundary",
            rejected_by=("test_layer_norm",),
            replace=(("((x - mean) ** 2).mean(dim=-1, keepdim=True)", "(x * x).mean(dim=-1, keepdim=True) - mean * mean"),)),
    Mistake(cell="layer_norm", name="unbiased variance rescaled by (d - 1) / d (NaN at d = 1)", kind="boundary",
            rejected_by=("test_layer_norm",),
            replace=(("((x - mean) ** 2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True) * (x.shape[-1] - 1) / x.shape[-1]"),)),
    Mistake(cell="layer_norm", name="gamma and beta viewed as (1, -1): a (d,) x comes back (1, d)", kind="boundary",
            rejected_by=("test_layer_norm",),
            replace=(("return gamma * (x - mean) / torch.sqrt(var + eps) + beta",
                      "return gamma.view(1, -1) * (x - mean) / torch.sqrt(var + eps) + beta.view(1, -1)"),)),
    Mistake(cell="layer_norm", name="x.view(-1, d) fails on a non-contiguous x", kind="boundary",
            rejected_by=("test_layer_norm",), source=_LN_DEF + '''    flat = x.view(-1, x.shape[-1])
    mu = flat.mean(1, keepdim=True)
    var = ((flat - mu) ** 2).mean(1, keepdim=True)
    return (gamma * (flat - mu) / torch.sqrt(var + eps) + beta).view(x.shape)
'''),
    Mistake(cell="feed_forward", name="x.view(-1, d) fails on a non-contiguous x", kind="boundary",
            rejected_by=("test_feed_forward",), source=_FF_DEF + '''    flat = x.view(-1, x.shape[-1])
    return (torch.relu(flat @ W1 + b1) @ W2 + b2).view(x.shape)
'''),
    Mistake(cell="feed_forward", name="ReLU as h * (h > 0).float() (bfloat16 input promoted, crashes)", kind="dtype",
            rejected_by=("test_feed_forward",), source=_FF_DEF + '''    h = x @ W1 + b1
    h = h * (h > 0).float()
    return h @ W2 + b2
'''),
    Mistake(cell="masked_mean_pool", name="count as .float() (bfloat16 h gives float32)", kind="dtype",
            rejected_by=("test_masked_mean_pool",), source=_MP_DEF + '''    total = (h * real.unsqueeze(-1)).sum(dim=1)
    return total / real.sum(dim=1, keepdim=True).float()
'''),
    Mistake(cell="masked_mean_pool", name="assumes right padding: mean of the first len tokens", kind="boundary",
            rejected_by=("test_masked_mean_pool",), source=_MP_DEF + '''    lengths = real.sum(1)
    return torch.stack([h[b, : int(lengths[b])].mean(0) for b in range(h.shape[0])])
'''),
    Mistake(cell="masked_mean_pool", name=".squeeze() on the result drops the batch axis when B = 1", kind="boundary",
            rejected_by=("test_masked_mean_pool",), source=_MP_DEF + '''    m = real.unsqueeze(-1).to(h.dtype)
    return ((h * m).sum(1) / m.sum(1)).squeeze()
'''),
    Mistake(cell="masked_mean_pool", name="a batch of one special-cased as a plain mean (padding counted)", kind="boundary",
            rejected_by=("test_masked_mean_pool",), source=_MP_DEF + '''    if h.shape[0] == 1:
        return h.mean(1)
    m = real.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1)
'''),
    Mistake(cell="prepend_cls", name="mask column from torch.ones_like(real[:, :1]) (empty when T = 0)", kind="boundary",
            rejected_by=("test_prepend_cls",),
            replace=(("torch.ones(B, 1, dtype=torch.bool, device=h.device)", "torch.ones_like(real[:, :1])"),)),
    Mistake(cell="prepend_cls", name="cls row built as h[:, :1] * 0 + cls (T = 0; NaN where h holds inf)", kind="boundary",
            rejected_by=("test_prepend_cls",),
            replace=(("first = cls.expand(B, 1, h.size(-1))", "first = h[:, :1] * 0 + cls"),)),
]

ACCEPTED += [
    Accepted(cell="layer_norm", name="var_mean(correction=0), rsqrt and addcmul", source=_LN_DEF + '''    var, mu = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return torch.addcmul(beta, gamma, (x - mu) * torch.rsqrt(var + eps))
'''),
    Accepted(cell="layer_norm", name="std(unbiased=False) squared inside the square root", source=_LN_DEF + '''    mu = x.mean(-1, keepdim=True)
    sigma2 = x.std(-1, unbiased=False, keepdim=True) ** 2
    return gamma * ((x - mu) / torch.sqrt(sigma2 + eps)) + beta
'''),
    Accepted(cell="feed_forward", name="h[h < 0] = 0 in place on the fresh hidden layer", source=_FF_DEF + '''    h = x @ W1 + b1
    h[h < 0] = 0
    return h @ W2 + b2
'''),
    Accepted(cell="feed_forward", name="reshape to 2-D, addmm, reshape back", source=_FF_DEF + '''    flat = x.reshape(-1, x.shape[-1])
    h = torch.addmm(b1, flat, W1).relu()
    return torch.addmm(b2, h, W2).reshape(x.shape)
'''),
    Accepted(cell="encoder_block", name="attn.forward with keywords, explicit names", source=_EB_DEF + '''    if not norm_first:
        attn_out, _weights = attn.forward(x, x, x, mask=mask)
        o = norm1(x + attn_out)
        return norm2(o + ffn(o))
    y = norm1(x)
    attn_out, _weights = attn.forward(y, y, y, mask=mask)
    r = x + attn_out
    return r + ffn(norm2(r))
'''),
    Accepted(cell="masked_mean_pool", name="nanmean over NaN-filled padding", source=_MP_DEF + '''    filled = h.masked_fill(~real.unsqueeze(-1), float("nan"))
    return torch.nanmean(filled, dim=1)
'''),
    Accepted(cell="masked_mean_pool", name="bmm with the normalised mask weights", source=_MP_DEF + '''    w = real.to(h.dtype)
    w = w / w.sum(dim=1, keepdim=True)
    return torch.bmm(w.unsqueeze(1), h).squeeze(1)
'''),
    Accepted(cell="masked_mean_pool", name="torch.where, sum and count cast to h's dtype", source=_MP_DEF + '''    kept = torch.where(real[..., None], h, torch.zeros_like(h))
    return kept.sum(1) / real.sum(1, keepdim=True).to(h.dtype)
'''),
    Accepted(cell="prepend_cls", name="empty buffer filled by slice assignment", source=_PC_DEF + '''    B, T, d = h.shape
    out = h.new_empty(B, T + 1, d)
    out[:, 0] = cls
    out[:, 1:] = h
    new_real = torch.ones(B, T + 1, dtype=torch.bool, device=h.device)
    new_real[:, 1:] = real
    return out, new_real
'''),
    Accepted(cell="prepend_cls", name="stack of cls per sentence and real.new_full", source=_PC_DEF + '''    B = h.shape[0]
    head = torch.stack([cls] * B).unsqueeze(1)
    return torch.cat([head, h], 1), torch.cat([real.new_full((B, 1), True), real], 1)
'''),
]

# fourth blind red team (issue 24)
MISTAKES += [
    Mistake(cell="feed_forward", name="computed in float32, cast back to x's dtype", kind="dtype",
            rejected_by=("test_feed_forward",),
            replace=(("    hidden = torch.relu(x @ W1 + b1)\n    return hidden @ W2 + b2\n",
                      "    hidden = torch.relu(x.float() @ W1.float() + b1.float())\n"
                      "    return (hidden @ W2.float() + b2.float()).to(x.dtype)\n"),)),
]
