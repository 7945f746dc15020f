"""Curated wrong answers of notebook 04 (multi-head attention); each must be rejected."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(
        cell="split_heads",
        name="views to (B, h, T, d_k) without transpose",
        kind="logic",
        rejected_by=("test_split_heads",),
        replace=(("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.view(B, n_heads, T, d_k)"),),
    ),
    Mistake(
        cell="split_heads",
        name="interleaves heads (features i::h)",
        kind="logic",
        rejected_by=("test_split_heads",),
        replace=(("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.view(B, T, d_k, n_heads).permute(0, 3, 1, 2)"),),
    ),
    Mistake(
        cell="merge_heads",
        name="reshapes without moving heads back",
        kind="logic",
        rejected_by=("test_merge_heads",),
        replace=(("return x.transpose(1, 2).reshape(B, T, h * d_k)", "return x.reshape(B, T, h * d_k)"),),
    ),
    Mistake(
        cell="multi_head_attention",
        name="scales by sqrt(d_model) instead of sqrt(d_k)",
        kind="logic",
        rejected_by=("test_multi_head_attention",),
        replace=(("math.sqrt(d_k)", "math.sqrt(x_q.size(-1))"),),
    ),
    Mistake(
        cell="multi_head_attention",
        name="forgets the output projection W_o",
        kind="logic",
        rejected_by=("test_multi_head_attention",),
        replace=(("return merge_heads(heads) @ W_o, weights", "return merge_heads(heads), weights"),),
    ),
    Mistake(
        cell="mha_parameter_count",
        name="gives every head full d x d projections",
        kind="logic",
        rejected_by=("test_mha_parameter_count",),
        replace=(("per_head = 3 * d_model * d_k", "per_head = 3 * d_model * d_model"),),
    ),
    Mistake(
        cell="mha_parameter_count",
        name="forgets W_O",
        kind="logic",
        rejected_by=("test_mha_parameter_count",),
        replace=(("return n_heads * per_head + w_o + biases", "return n_heads * per_head + biases"),),
    ),
    Mistake(
        cell="load_torch_weights",
        name="takes in_proj_weight chunks in the order K, Q, V",
        kind="logic",
        rejected_by=("test_load_torch_weights",),
        replace=(("w_q, w_k, w_v = torch_mha", "w_k, w_q, w_v = torch_mha"),),
    ),
    Mistake(
        cell="load_torch_weights",
        name="copies the weights but not the biases",
        kind="logic",
        rejected_by=("test_load_torch_weights",),
        replace=(("            layer.bias.copy_(b)\n", ""), ("        ours.out_proj.bias.copy_(torch_mha.out_proj.bias)\n", "")),
    ),
]

# Found by the blind red team of issue 12 (whole answers as a student wrote them); the first of each
# exercise's reference / device / autograd / structure kind kept full marks before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell="split_heads", name="imports course_utils.multihead.split_heads", kind="reference", rejected_by=("test_split_heads",),
            source='''from course_utils.multihead import split_heads
'''),
    Mistake(cell="split_heads", name="no ValueError (view raises RuntimeError)", kind="boundary", rejected_by=("test_split_heads",),
            source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    B, T, d = x.shape
    return x.view(B, T, n_heads, -1).transpose(1, 2)
'''),
    Mistake(cell="split_heads", name="assert instead of ValueError", kind="boundary", rejected_by=("test_split_heads",),
            source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    B, T, d = x.shape
    assert d % n_heads == 0, "d must be divisible by n_heads"
    return x.reshape(B, T, n_heads, d // n_heads).permute(0, 2, 1, 3)
'''),
    Mistake(cell="merge_heads", name="wraps course_utils.multihead.merge_heads", kind="reference", rejected_by=("test_merge_heads",),
            source='''import course_utils.multihead


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    return course_utils.multihead.merge_heads(x)
'''),
    Mistake(cell="merge_heads", name="squeeze() drops a size-1 batch", kind="boundary", rejected_by=("test_merge_heads",),
            source='''def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k).squeeze()
'''),
    Mistake(cell="multi_head_attention", name="default all-True mask built without device", kind="device", rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    T_q, T_k = x_q.shape[1], x_kv.shape[1]
    if mask is None:
        mask = torch.ones(T_q, T_k, dtype=torch.bool)
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="NaN rows patched in place after softmax", kind="autograd", rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights.nan_to_num_(0.0)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="built on course_utils.multihead's split/merge and masked_softmax", kind="reference", rejected_by=("test_multi_head_attention",),
            source='''from course_utils.multihead import split_heads as _split, merge_heads as _merge, masked_softmax


def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q, k, v = _split(x_q @ W_q, n_heads), _split(x_kv @ W_k, n_heads), _split(x_kv @ W_v, n_heads)
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), mask)
    return _merge(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="mask polarity reversed (True = blocked)", kind="logic", rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="mask ignored", kind="argument", rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="keys and values taken from x_q", kind="argument", rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    from course_utils.attention import scaled_dot_product_attention
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_q @ W_k, n_heads)
    v = split_heads(x_q @ W_v, n_heads)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(heads) @ W_o, weights
'''),
    Mistake(cell="mha_parameter_count", name="course_utils.multihead.mha_parameter_count", kind="reference", rejected_by=("test_mha_parameter_count",),
            source='''from course_utils.multihead import mha_parameter_count
'''),
    Mistake(cell="mha_parameter_count", name="bias argument ignored", kind="argument", rejected_by=("test_mha_parameter_count",),
            source='''def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention with d_k = d_v = d_model / n_heads."""
    if d_model % n_heads:
        raise ValueError("d_model must be divisible by n_heads")
    return 4 * d_model * d_model + 4 * d_model
'''),
    Mistake(cell="mha_parameter_count", name="no ValueError", kind="boundary", rejected_by=("test_mha_parameter_count",),
            source='''def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention with d_k = d_v = d_model / n_heads."""
    d_k = d_model // n_heads
    total = 4 * d_model * (n_heads * d_k)
    if bias:
        total += 3 * n_heads * d_k + d_model
    return total
'''),
    Mistake(cell="load_torch_weights", name="key bias forgotten (invisible under softmax)", kind="logic", rejected_by=("test_load_torch_weights",),
            source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    W_q, W_k, W_v = torch_mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
    with torch.no_grad():
        ours.q_proj.weight.copy_(W_q); ours.q_proj.bias.copy_(b_q)
        ours.k_proj.weight.copy_(W_k)
        ours.v_proj.weight.copy_(W_v); ours.v_proj.bias.copy_(b_v)
        ours.out_proj.weight.copy_(torch_mha.out_proj.weight)
        ours.out_proj.bias.copy_(torch_mha.out_proj.bias)
    return ours
'''),
    Mistake(cell="load_torch_weights", name="assigns nn.Parameter views (shares storage with torch_mha)", kind="structure", rejected_by=("test_load_torch_weights",),
            source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    W = torch_mha.in_proj_weight.chunk(3)
    b = torch_mha.in_proj_bias.chunk(3)
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        getattr(ours, name).weight = nn.Parameter(W[i])
        getattr(ours, name).bias = nn.Parameter(b[i])
    ours.out_proj = torch_mha.out_proj
    return ours
'''),
    Mistake(cell="load_torch_weights", name=".data assignment (aliases the reference's storage)", kind="structure", rejected_by=("test_load_torch_weights",),
            source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    W = torch_mha.in_proj_weight.data.chunk(3)
    b = torch_mha.in_proj_bias.data.chunk(3)
    ours.q_proj.weight.data, ours.k_proj.weight.data, ours.v_proj.weight.data = W
    ours.q_proj.bias.data, ours.k_proj.bias.data, ours.v_proj.bias.data = b
    ours.out_proj.weight.data = torch_mha.out_proj.weight.data
    ours.out_proj.bias.data = torch_mha.out_proj.bias.data
    return ours
'''),
    Mistake(cell="load_torch_weights", name="returns the packaged from_torch copy", kind="reference", rejected_by=("test_load_torch_weights",),
            source='''from course_utils.multihead import from_torch

def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    ours.load_state_dict(from_torch(torch_mha).state_dict())
    return ours
'''),
    Mistake(cell="load_torch_weights", name="returns a new module instead of ours", kind="structure", rejected_by=("test_load_torch_weights",),
            source='''import copy

def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    new = copy.deepcopy(ours)
    W_q, W_k, W_v = torch_mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
    with torch.no_grad():
        for layer, W, b in ((new.q_proj, W_q, b_q), (new.k_proj, W_k, b_k), (new.v_proj, W_v, b_v)):
            layer.weight.copy_(W); layer.bias.copy_(b)
        new.out_proj.weight.copy_(torch_mha.out_proj.weight)
        new.out_proj.bias.copy_(torch_mha.out_proj.bias)
    return new
'''),
]

# Found by the second blind red team (it read only the release notebook); each kept full marks until the hidden
# tests gained device/dtype and gradient checks for split/merge, very large scores and float16 for the layer,
# the int type for bias=False, and snapshot / identity / dtype / requires_grad checks for the loader.
MISTAKES += [
    Mistake(cell="split_heads", name="loop into torch.zeros without device or dtype", kind="device", rejected_by=("test_split_heads",),
            source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    B, T, d = x.shape
    if d % n_heads != 0:
        raise ValueError("d must be divisible by n_heads")
    d_k = d // n_heads
    out = torch.zeros(B, n_heads, T, d_k)
    for i in range(n_heads):
        out[:, i] = x[:, :, i * d_k:(i + 1) * d_k]
    return out
'''),
    Mistake(cell="split_heads", name="works on x.detach()", kind="autograd", rejected_by=("test_split_heads",),
            replace=(("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.detach().view(B, T, n_heads, d_k).transpose(1, 2)"),)),
    Mistake(cell="merge_heads", name="loop into torch.empty with dtype but no device", kind="device", rejected_by=("test_merge_heads",),
            source='''def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    B, h, T, d_k = x.shape
    out = torch.empty(B, T, h * d_k, dtype=x.dtype)
    for i in range(h):
        out[:, :, i * d_k:(i + 1) * d_k] = x[:, i]
    return out
'''),
    Mistake(cell="merge_heads", name="detach() before the reshape", kind="autograd", rejected_by=("test_merge_heads",),
            replace=(("return x.transpose(1, 2).reshape(B, T, h * d_k)", "return x.detach().transpose(1, 2).reshape(B, T, h * d_k)"),)),
    Mistake(cell="multi_head_attention", name="masked with -1e9 (overflows float16)", kind="dtype", rejected_by=("test_multi_head_attention",),
            replace=(('float("-inf")', "-1e9"),)),
    Mistake(cell="multi_head_attention", name="hand-written softmax without subtracting the max", kind="boundary",
            rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="mask applied after the softmax, then renormalised", kind="boundary",
            rejected_by=("test_multi_head_attention",),
            source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Mistake(cell="multi_head_attention", name="PyTorch's F.multi_head_attention_forward", kind="ban", rejected_by=("test_multi_head_attention",),
            source='''import torch.nn.functional as F


def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    B, T_q, d = x_q.shape
    T_k = x_kv.size(1)
    attn_mask = None
    if mask is not None:
        attn_mask = ~mask.expand(B, n_heads, T_q, T_k).reshape(B * n_heads, T_q, T_k)
    out, weights = F.multi_head_attention_forward(
        x_q.transpose(0, 1), x_kv.transpose(0, 1), x_kv.transpose(0, 1), d, n_heads,
        None, None, None, None, False, 0.0, W_o.T, None, training=False, need_weights=True,
        attn_mask=attn_mask, use_separate_proj_weight=True, q_proj_weight=W_q.T, k_proj_weight=W_k.T,
        v_proj_weight=W_v.T, average_attn_weights=False)
    return out.transpose(0, 1), weights
'''),
    Mistake(cell="mha_parameter_count", name="returns a float when bias=False", kind="structure", rejected_by=("test_mha_parameter_count",),
            source='''def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention with d_k = d_v = d_model / n_heads."""
    if d_model % n_heads != 0:
        raise ValueError("d_model must be divisible by n_heads")
    d_k = d_model / n_heads
    weights = 4 * d_model * n_heads * d_k
    if bias:
        return int(weights + 3 * n_heads * d_k + d_model)
    return weights
'''),
    Mistake(cell="load_torch_weights", name="copy_ in the wrong direction (overwrites torch_mha)", kind="logic",
            rejected_by=("test_load_torch_weights",),
            replace=(("            layer.weight.copy_(w)\n            layer.bias.copy_(b)\n",
                      "            w.copy_(layer.weight)\n            b.copy_(layer.bias)\n"),
                     ("        ours.out_proj.weight.copy_(torch_mha.out_proj.weight)\n        ours.out_proj.bias.copy_(torch_mha.out_proj.bias)\n",
                      "        torch_mha.out_proj.weight.copy_(ours.out_proj.weight)\n        torch_mha.out_proj.bias.copy_(ours.out_proj.bias)\n"))),
    Mistake(cell="load_torch_weights", name="turns requires_grad off to allow copy_, never back on", kind="autograd",
            rejected_by=("test_load_torch_weights",),
            source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    for p in ours.parameters():
        p.requires_grad_(False)
    W_q, W_k, W_v = torch_mha.in_proj_weight.detach().chunk(3)
    b_q, b_k, b_v = torch_mha.in_proj_bias.detach().chunk(3)
    ours.q_proj.weight.copy_(W_q); ours.q_proj.bias.copy_(b_q)
    ours.k_proj.weight.copy_(W_k); ours.k_proj.bias.copy_(b_k)
    ours.v_proj.weight.copy_(W_v); ours.v_proj.bias.copy_(b_v)
    ours.out_proj.weight.copy_(torch_mha.out_proj.weight.detach())
    ours.out_proj.bias.copy_(torch_mha.out_proj.bias.detach())
    return ours
'''),
    Mistake(cell="load_torch_weights", name="replaces the parameters with new nn.Parameter clones", kind="structure",
            rejected_by=("test_load_torch_weights",),
            source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    W_q, W_k, W_v = torch_mha.in_proj_weight.detach().clone().chunk(3)
    b_q, b_k, b_v = torch_mha.in_proj_bias.detach().clone().chunk(3)
    ours.q_proj.weight, ours.q_proj.bias = nn.Parameter(W_q), nn.Parameter(b_q)
    ours.k_proj.weight, ours.k_proj.bias = nn.Parameter(W_k), nn.Parameter(b_k)
    ours.v_proj.weight, ours.v_proj.bias = nn.Parameter(W_v), nn.Parameter(b_v)
    ours.out_proj.weight = nn.Parameter(torch_mha.out_proj.weight.detach().clone())
    ours.out_proj.bias = nn.Parameter(torch_mha.out_proj.bias.detach().clone())
    return ours
'''),
    # blind red team (issue 34): the float16-safe constant of some libraries passed every test until a
    # hidden case put every allowed score below it
    Mistake(cell="multi_head_attention", name="masked scores filled with -1e4 (fits float16, not below every score)",
            kind="boundary", rejected_by=("test_multi_head_attention",), replace=(('float("-inf")', "-1e4"),)),
    Mistake(cell="multi_head_attention", name="masked scores filled with float16's minimum -65504 hard-coded",
            kind="boundary", rejected_by=("test_multi_head_attention",), replace=(('float("-inf")', "-65504.0"),)),
]

# Right answers in other styles than the solution (the blind red team's); every test must accept them.
ACCEPTED = [
    Accepted(cell="split_heads", name="stack of chunks", source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    if x.shape[-1] % n_heads:
        raise ValueError("the model width must be a multiple of the number of heads")
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)
'''),
    Accepted(cell="split_heads", name="unflatten + permute, contiguous", source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    d = x.size(-1)
    d_k, rest = divmod(d, n_heads)
    if rest:
        raise ValueError(f"{d} features cannot be split into {n_heads} heads")
    return x.unflatten(-1, (n_heads, d_k)).permute(0, 2, 1, 3).contiguous()
'''),
    Accepted(cell="merge_heads", name="cat of unbind", source='''def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    return torch.cat(x.unbind(dim=1), dim=-1)
'''),
    Accepted(cell="merge_heads", name="permute + contiguous + view", source='''def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    B, h, T, d_k = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, -1)
'''),
    Accepted(cell="multi_head_attention", name="three lines, masked_fill -inf, Tensor.softmax", source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(torch.matmul(x_q, W_q), n_heads)
    k = split_heads(torch.matmul(x_kv, W_k), n_heads)
    v = split_heads(torch.matmul(x_kv, W_v), n_heads)
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Accepted(cell="multi_head_attention", name="einsum + torch.where + large negative fill", source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ W_q, x_kv @ W_k, x_kv @ W_v))
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = torch.nn.functional.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
    return merge_heads(out) @ W_o, weights
'''),
    Accepted(cell="mha_parameter_count", name="general per-head form", source='''def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention with d_k = d_v = d_model / n_heads."""
    d_k, rest = divmod(d_model, n_heads)
    if rest != 0:
        raise ValueError(f"{d_model} is not divisible by {n_heads}")
    inner = n_heads * d_k
    weights = 3 * d_model * inner + inner * d_model
    biases = 3 * inner + d_model if bias else 0
    return int(weights + biases)
'''),
    Accepted(cell="mha_parameter_count", name="counts a real nn.MultiheadAttention", source='''def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention with d_k = d_v = d_model / n_heads."""
    if n_heads <= 0 or d_model % n_heads != 0:
        raise ValueError("d_model must be a multiple of n_heads")
    layer = nn.MultiheadAttention(d_model, n_heads, bias=bias, device="meta")
    return sum(p.numel() for p in layer.parameters())
'''),
    Accepted(cell="load_torch_weights", name="slices by embed_dim in a loop", source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    d = torch_mha.embed_dim
    with torch.no_grad():
        for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
            layer = getattr(ours, name)
            layer.weight.copy_(torch_mha.in_proj_weight[i * d:(i + 1) * d])
            layer.bias.copy_(torch_mha.in_proj_bias[i * d:(i + 1) * d])
        ours.out_proj.weight.copy_(torch_mha.out_proj.weight)
        ours.out_proj.bias.copy_(torch_mha.out_proj.bias)
    return ours
'''),
    Accepted(cell="load_torch_weights", name="load_state_dict with a mapped dict", source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    src = torch_mha.state_dict()
    W = src["in_proj_weight"].chunk(3)
    b = src["in_proj_bias"].chunk(3)
    mapped = {"out_proj.weight": src["out_proj.weight"], "out_proj.bias": src["out_proj.bias"]}
    for i, name in enumerate(["q_proj", "k_proj", "v_proj"]):
        mapped[f"{name}.weight"] = W[i]
        mapped[f"{name}.bias"] = b[i]
    with torch.no_grad():
        for key, value in mapped.items():
            ours.get_parameter(key).copy_(value)
    return ours
'''),
]

# The second red team's right answers (and two written against the new hidden tests): they guard the
# device/dtype, gradient, large-score, float16 and loader checks against over-tightening.
ACCEPTED += [
    Accepted(cell="split_heads", name="loop over heads into x.new_empty", source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    B, T, d = x.shape
    if d % n_heads != 0:
        raise ValueError("d must be divisible by n_heads")
    d_k = d // n_heads
    out = x.new_empty(B, n_heads, T, d_k)
    for i in range(n_heads):
        out[:, i] = x[:, :, i * d_k:(i + 1) * d_k]
    return out
'''),
    Accepted(cell="split_heads", name="unfold the feature axis into non-overlapping blocks", source='''def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads); head i gets features [i*d_k, (i+1)*d_k)."""
    d = x.size(-1)
    if d % n_heads != 0:
        raise ValueError(f"d = {d} is not divisible by n_heads = {n_heads}")
    d_k = d // n_heads
    return x.unfold(-1, d_k, d_k).transpose(1, 2)
'''),
    Accepted(cell="merge_heads", name="loop of slice assignments into x.new_zeros", source='''def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads."""
    B, h, T, d_k = x.shape
    out = x.new_zeros(B, T, h * d_k)
    for i in range(h):
        out[:, :, i * d_k:(i + 1) * d_k] = x[:, i]
    return out
'''),
    Accepted(cell="multi_head_attention", name="hand-written softmax that subtracts the row maximum", source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    q = split_heads(x_q @ W_q, n_heads)
    k = split_heads(x_kv @ W_k, n_heads)
    v = split_heads(x_kv @ W_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    return merge_heads(weights @ v) @ W_o, weights
'''),
    Accepted(cell="multi_head_attention", name="einsum with per-head weight views", source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    d = W_q.shape[0]
    d_k = W_q.shape[1] // n_heads
    q = torch.einsum("btd,dhk->bhtk", x_q, W_q.view(d, n_heads, d_k))
    k = torch.einsum("btd,dhk->bhtk", x_kv, W_k.view(d, n_heads, d_k))
    v = torch.einsum("btd,dhk->bhtk", x_kv, W_v.view(d, n_heads, d_k))
    scores = torch.einsum("bhqk,bhsk->bhqs", q, k) * d_k ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhqs,bhsk->bhqk", weights, v)
    return torch.einsum("bhqk,hkd->bqd", out, W_o.view(n_heads, d_k, -1)), weights
'''),
    Accepted(cell="multi_head_attention", name="loop over heads with the course's attention", source='''def multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head attention; returns (output (B, T_q, d), weights (B, n_heads, T_q, T_k))."""
    from course_utils.attention import scaled_dot_product_attention
    d_k = W_q.size(1) // n_heads
    outs, ws = [], []
    for i in range(n_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        m = None
        if mask is not None:
            m = mask.expand(x_q.size(0), n_heads, x_q.size(1), x_kv.size(1))[:, i]
        o, w = scaled_dot_product_attention(x_q @ W_q[:, cols], x_kv @ W_k[:, cols], x_kv @ W_v[:, cols], m)
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ W_o, torch.stack(ws, dim=1)
'''),
    Accepted(cell="load_torch_weights", name="load_state_dict from a rebuilt dictionary", source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    W = torch_mha.in_proj_weight.detach().chunk(3)
    b = torch_mha.in_proj_bias.detach().chunk(3)
    state = {}
    for name, w_i, b_i in zip(("q_proj", "k_proj", "v_proj"), W, b):
        state[f"{name}.weight"] = w_i
        state[f"{name}.bias"] = b_i
    state["out_proj.weight"] = torch_mha.out_proj.weight.detach()
    state["out_proj.bias"] = torch_mha.out_proj.bias.detach()
    ours.load_state_dict(state)
    return ours
'''),
    Accepted(cell="load_torch_weights", name=".data.copy_ without no_grad", source='''def load_torch_weights(ours: nn.Module, torch_mha: nn.MultiheadAttention) -> nn.Module:
    """Copy nn.MultiheadAttention's weights into q_proj, k_proj, v_proj, out_proj; return ours."""
    d = torch_mha.embed_dim
    for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
        proj.weight.data.copy_(torch_mha.in_proj_weight.data[i * d:(i + 1) * d])
        proj.bias.data.copy_(torch_mha.in_proj_bias.data[i * d:(i + 1) * d])
    ours.out_proj.weight.data.copy_(torch_mha.out_proj.weight.data)
    ours.out_proj.bias.data.copy_(torch_mha.out_proj.bias.data)
    return ours
'''),
]
