"""Curated wrong answers of notebook 13 (attention at scale); each must be rejected.

ACCEPTED lists alternative right answers (other styles, other loop orders) that must pass every test.
"""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    # ---------------------------------------------------------------- online_softmax
    Mistake(
        cell="online_softmax",
        name="running sum not rescaled when the max grows",
        rejected_by=("test_online_softmax",),
        replace=(("l = l * torch.exp(m - shift) + torch.exp", "l = l + torch.exp"),),
        kind="logic",
    ),
    Mistake(
        cell="online_softmax",
        name="max updated after the exponentials",
        rejected_by=("test_online_softmax",),
        source="""\
def online_softmax(x, block):
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        chunk = x[..., start:start + block]
        shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        l = l + torch.exp(chunk - shift[..., None]).sum(dim=-1)
        m = torch.maximum(m, chunk.amax(dim=-1))
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.exp(x - shift[..., None]) / torch.where(l > 0, l, torch.ones_like(l))[..., None]
""",
        kind="logic",
    ),
    Mistake(
        cell="online_softmax",
        name="NaN on an all -inf row (shift by m = -inf)",
        rejected_by=("test_online_softmax",),
        replace=(("shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))\n    return",
                  "shift = m\n    return"),),
        kind="boundary",
    ),
    Mistake(
        cell="online_softmax",
        name="two passes: the row's max first (x.amax over the whole row)",
        rejected_by=("test_online_softmax",),
        source="""\
def online_softmax(x, block):
    m = x.amax(dim=-1)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        l = l + torch.exp(x[..., start:start + block] - shift[..., None]).sum(dim=-1)
    return torch.exp(x - shift[..., None]) / torch.where(l > 0, l, torch.ones_like(l))[..., None]
""",
        kind="argument",
    ),
    Mistake(
        cell="online_softmax",
        name="blockwise but two passes: every block's max, then every sum",
        rejected_by=("test_online_softmax",),
        source="""\
def online_softmax(x, block):
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        m = torch.maximum(m, x[..., start:start + block].amax(dim=-1))
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        l = l + torch.exp(x[..., start:start + block] - shift[..., None]).sum(dim=-1)
    return torch.exp(x - shift[..., None]) / torch.where(l > 0, l, torch.ones_like(l))[..., None]
""",
        kind="argument",
    ),
    Mistake(
        cell="online_softmax",
        name="torch.softmax in disguise",
        rejected_by=("test_online_softmax",),
        source="""\
def online_softmax(x, block):
    y = torch.nn.functional.softmax(x, dim=-1)
    return torch.nan_to_num(y, nan=0.0)
""",
        kind="ban",
    ),
    Mistake(
        cell="online_softmax",
        name="the last, shorter block dropped",
        rejected_by=("test_online_softmax",),
        replace=(("for j0 in range(0, x.shape[-1], block):", "for j0 in range(0, x.shape[-1] - block + 1, block):"),),
        kind="boundary",
    ),
    # ---------------------------------------------------------------- merge_softmax_states
    Mistake(
        cell="merge_softmax_states",
        name="l and o not rescaled (plain sums)",
        rejected_by=("test_merge_softmax_states",),
        replace=(("return m, w1 * l1 + w2 * l2, w1[..., None] * o1 + w2[..., None] * o2", "return m, l1 + l2, o1 + o2"),),
        kind="logic",
    ),
    Mistake(
        cell="merge_softmax_states",
        name="o not rescaled",
        rejected_by=("test_merge_softmax_states",),
        replace=(("w1[..., None] * o1 + w2[..., None] * o2", "o1 + o2"),),
        kind="logic",
    ),
    Mistake(
        cell="merge_softmax_states",
        name="NaN when both states are empty (-inf - -inf)",
        rejected_by=("test_merge_softmax_states",),
        replace=(("shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))", "shift = m"),),
        kind="boundary",
    ),
    Mistake(
        cell="merge_softmax_states",
        name="weights the second state by exp(m - m2) (the wrong sign)",
        rejected_by=("test_merge_softmax_states",),
        replace=(("w2 = torch.exp(m1 - shift), torch.exp(m2 - shift)", "w2 = torch.exp(m1 - shift), torch.exp(shift - m2)"),),
        kind="logic",
    ),
    # ---------------------------------------------------------------- tiled_attention
    Mistake(
        cell="tiled_attention",
        name="no rescaling of l when the max changes",
        rejected_by=("test_tiled_attention",),
        replace=(("l = alpha * l + p.sum(dim=-1)", "l = l + p.sum(dim=-1)"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="no rescaling of o when the max changes",
        rejected_by=("test_tiled_attention",),
        replace=(("o = alpha[..., None] * o + p @", "o = o + p @"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="the final division by l forgotten",
        rejected_by=("test_tiled_attention",),
        replace=(("outs.append((o / safe_l[..., None]).to(q.dtype))", "outs.append(o.to(q.dtype))"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="lse without the max (log l only)",
        rejected_by=("test_tiled_attention",),
        replace=(("torch.where(torch.isfinite(m), m, torch.zeros_like(m)) + torch.log(safe_l)", "torch.log(safe_l)"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="scale 1/sqrt(d) applied twice",
        rejected_by=("test_tiled_attention",),
        replace=(("s = q_blk @ k[..., k0:k1, :].to(acc).transpose(-2, -1)", "s = q_blk @ k[..., k0:k1, :].to(acc).transpose(-2, -1) * scale"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="scale applied to V instead of the scores",
        rejected_by=("test_tiled_attention",),
        replace=(("q_blk = q[..., q0:q1, :].to(acc) * scale", "q_blk = q[..., q0:q1, :].to(acc)"),
                 ("p @ v[..., k0:k1, :].to(acc)", "p @ (v[..., k0:k1, :].to(acc) * scale)")),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="causal skipping off by one (the diagonal block skipped)",
        rejected_by=("test_tiled_attention",),
        replace=(("range(0, min(T_k, q1) if causal else T_k, block_k)", "range(0, min(T_k, q0) if causal else T_k, block_k)"),),
        kind="boundary",
    ),
    Mistake(
        cell="tiled_attention",
        name="diagonal tiles not masked",
        rejected_by=("test_tiled_attention",),
        replace=(("if causal and k1 - 1 > q0:", "if False:"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="NaN in a fully masked block (-inf - -inf)",
        rejected_by=("test_tiled_attention",),
        replace=(("shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))", "shift = m_new"),),
        kind="boundary",
    ),
    Mistake(
        cell="tiled_attention",
        name="accumulates in bfloat16 for bfloat16 inputs",
        rejected_by=("test_tiled_attention",),
        replace=(("acc = torch.promote_types(q.dtype, torch.float32)", "acc = q.dtype"),),
        kind="dtype",
    ),
    Mistake(
        cell="tiled_attention",
        name="float32 hard-coded (float64 inputs give float32 state)",
        rejected_by=("test_tiled_attention",),
        replace=(("acc = torch.promote_types(q.dtype, torch.float32)", "acc = torch.float32"),),
        kind="dtype",
    ),
    Mistake(
        cell="tiled_attention",
        name="padding mask on the query axis",
        rejected_by=("test_tiled_attention",),
        replace=(("s = s.masked_fill(~key_padding_mask[:, None, None, k0:k1], float(\"-inf\"))",
                  "s = s.masked_fill(~key_padding_mask[:, None, q0:q1, None], float(\"-inf\"))"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="causal blocks masked instead of skipped",
        rejected_by=("test_tiled_attention_memory",),
        replace=(("range(0, min(T_k, q1) if causal else T_k, block_k)", "range(0, T_k, block_k)"),),
        kind="argument",
    ),
    Mistake(
        cell="tiled_attention",
        name="builds the full T x T score matrix, then walks its blocks",
        rejected_by=("test_tiled_attention_memory",),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s_all = (q @ k.transpose(-2, -1)) * scale
    T_q, T_k = s_all.shape[-2], s_all.shape[-1]
    if causal:
        s_all = s_all.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    if key_padding_mask is not None:
        s_all = s_all.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
    m = s_all.amax(dim=-1)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s_all - shift[..., None])
    l = p.sum(-1)
    safe = torch.where(l > 0, l, torch.ones_like(l))
    lse = torch.where(l > 0, shift + torch.log(safe), torch.full_like(l, float("-inf")))
    return (p @ v) / safe[..., None], lse
""",
        kind="argument",
    ),
    Mistake(
        cell="tiled_attention",
        name="a full causal mask built once (T x T booleans), then sliced per tile",
        rejected_by=("test_tiled_attention_memory",),
        replace=(("                rows = torch.arange(q0, q1, device=q.device)[:, None]\n"
                  "                cols = torch.arange(k0, k1, device=q.device)[None, :]\n"
                  "                s = s.masked_fill(cols > rows, float(\"-inf\"))",
                  "                future = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1)\n"
                  "                s = s.masked_fill(future[q0:q1, k0:k1], float(\"-inf\"))"),),
        kind="argument",
    ),
    Mistake(
        cell="tiled_attention",
        name="keys not tiled: a whole row of scores per query block",
        rejected_by=("test_tiled_attention_memory",),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    T_q, T_k = q.shape[-2], k.shape[-2]
    outs, lses = [], []
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        s = (q[..., q0:q1, :] @ k.transpose(-2, -1)) * scale
        if causal:
            rows = torch.arange(q0, q1, device=q.device)[:, None]
            s = s.masked_fill(torch.arange(T_k, device=q.device)[None, :] > rows, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        m = s.amax(dim=-1)
        shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(s - shift[..., None])
        l = p.sum(-1)
        safe = torch.where(l > 0, l, torch.ones_like(l))
        outs.append((p @ v) / safe[..., None])
        lses.append(torch.where(l > 0, shift + torch.log(safe), torch.full_like(l, float("-inf"))))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
""",
        kind="argument",
    ),
    # ---------------------------------------------------------------- TiledAttention
    Mistake(
        cell="TiledAttention",
        name="backward forgets d_lse",
        rejected_by=("test_TiledAttention",),
        replace=(("D = (d_out * out.to(acc)).sum(dim=-1) - d_lse.to(acc)", "D = (d_out * out.to(acc)).sum(dim=-1)"),),
        kind="autograd",
    ),
    Mistake(
        cell="TiledAttention",
        name="dS without the D term (softmax Jacobian's row sum)",
        rejected_by=("test_TiledAttention",),
        replace=(("ds = p * (dp - D[..., q0:q1, None])", "ds = p * (dp + d_lse.to(acc)[..., q0:q1, None])"),),
        kind="autograd",
    ),
    Mistake(
        cell="TiledAttention",
        name="dQ and dK without the 1/sqrt(d) scale",
        rejected_by=("test_TiledAttention",),
        replace=(("dq[..., q0:q1, :] += ds @ ka[..., k0:k1, :] * scale", "dq[..., q0:q1, :] += ds @ ka[..., k0:k1, :]"),
                 ("dk[..., k0:k1, :] += ds.transpose(-2, -1) @ qa[..., q0:q1, :] * scale", "dk[..., k0:k1, :] += ds.transpose(-2, -1) @ qa[..., q0:q1, :]")),
        kind="autograd",
    ),
    Mistake(
        cell="TiledAttention",
        name="NaN gradients for fully masked rows (P = exp(S - lse) with lse = -inf)",
        rejected_by=("test_TiledAttention",),
        replace=(("p = torch.exp(s - lse_safe[..., q0:q1, None])", "p = torch.exp(s - lse[..., q0:q1, None])"),),
        kind="boundary",
    ),
    Mistake(
        cell="TiledAttention",
        name="backward recomputes P without the causal mask",
        rejected_by=("test_TiledAttention",),
        replace=(("                if causal and k1 - 1 > q0:\n                    rows", "                if False:\n                    rows"),),
        kind="logic",
    ),
    # ---------------------------------------------------------------- decoder_kv_cache_bytes
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="n_heads instead of n_kv_heads (GQA ignored)",
        rejected_by=("test_kv_cache_bytes",),
        replace=(("n_layers, n_heads, n_kv_heads = config.n_layers, config.n_heads, config.n_kv_heads",
                  "n_layers, n_heads, n_kv_heads = config.n_layers, config.n_heads, config.n_heads"),),
        kind="logic",
    ),
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="K only (the factor 2 forgotten)",
        rejected_by=("test_kv_cache_bytes",),
        replace=(("return 2 * n_layers", "return n_layers"),),
        kind="logic",
    ),
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="4 bytes per element whatever the dtype",
        rejected_by=("test_kv_cache_bytes",),
        replace=(("torch.empty((), dtype=dtype).element_size()", "4"),),
        kind="dtype",
    ),
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="batch ignored",
        rejected_by=("test_kv_cache_bytes",),
        replace=(("2 * n_layers * batch * n_kv_heads", "2 * n_layers * n_kv_heads"),),
        kind="argument",
    ),
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="head_dim taken as d_model // n_kv_heads",
        rejected_by=("test_kv_cache_bytes",),
        replace=(("head_dim = config.d_model // n_heads", "head_dim = config.d_model // n_kv_heads"),),
        kind="logic",
    ),
]

ACCEPTED = [
    Accepted(
        cell="online_softmax",
        name="log-space running state (m, log l) with torch.maximum per column block",
        source="""\
def online_softmax(x, block):
    neg = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    m = neg.expand(x.shape[:-1]).clone()
    total = torch.zeros_like(m)
    for chunk in x.split(block, dim=-1):
        new = torch.maximum(m, chunk.max(dim=-1).values)
        safe = torch.nan_to_num(new, neginf=0.0)
        total = total * torch.exp(m - safe) + torch.exp(chunk - safe.unsqueeze(-1)).sum(-1)
        m = new
    safe = torch.nan_to_num(m, neginf=0.0).unsqueeze(-1)
    return torch.exp(x - safe) / total.clamp_min(torch.finfo(x.dtype).tiny).unsqueeze(-1)
""",
    ),
    Accepted(
        cell="merge_softmax_states",
        name="nan_to_num of the weights",
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.max(m1, m2)
    w1 = torch.nan_to_num(torch.exp(m1 - m), nan=0.0)
    w2 = torch.nan_to_num(torch.exp(m2 - m), nan=0.0)
    return m, w1 * l1 + w2 * l2, w1.unsqueeze(-1) * o1 + w2.unsqueeze(-1) * o2
""",
    ),
    Accepted(
        cell="tiled_attention",
        name="FlashAttention-1 loop order: key blocks outside, a state per query kept across them",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    acc = torch.promote_types(q.dtype, torch.float32)
    scale = q.shape[-1] ** -0.5
    T_q, T_k = q.shape[-2], k.shape[-2]
    m = torch.full((*q.shape[:-1],), float("-inf"), dtype=acc, device=q.device)
    l = torch.zeros((*q.shape[:-1],), dtype=acc, device=q.device)
    o = torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=acc, device=q.device)
    for k0 in range(0, T_k, block_k):
        k1 = min(k0 + block_k, T_k)
        kb, vb = k[..., k0:k1, :].to(acc), v[..., k0:k1, :].to(acc)
        for q0 in range(k0 if causal else 0, T_q, block_q):  # causal: queries before k0 see none of these keys
            q1 = min(q0 + block_q, T_q)
            s = torch.einsum("...id,...jd->...ij", q[..., q0:q1, :].to(acc), kb) * scale
            if causal:
                s = s.masked_fill(torch.arange(k0, k1, device=q.device) > torch.arange(q0, q1, device=q.device)[:, None], float("-inf"))
            if key_padding_mask is not None:
                s = s.masked_fill(~key_padding_mask[:, None, None, k0:k1], float("-inf"))
            mo = m[..., q0:q1]
            mn = torch.maximum(mo, s.amax(-1))
            sh = torch.nan_to_num(mn, neginf=0.0)
            a = torch.exp(mo - sh)
            p = torch.exp(s - sh[..., None])
            l[..., q0:q1] = a * l[..., q0:q1] + p.sum(-1)
            o[..., q0:q1, :] = a[..., None] * o[..., q0:q1, :] + p @ vb
            m[..., q0:q1] = mn
    nonempty = l > 0
    out = o / torch.where(nonempty, l, 1.0)[..., None]
    lse = torch.where(nonempty, torch.nan_to_num(m, neginf=0.0) + torch.log(torch.where(nonempty, l, 1.0)), float("-inf"))
    return out.to(q.dtype), lse
""",
    ),
    Accepted(
        cell="tiled_attention",
        name="the course's merge (own helper) per tile, preallocated outputs written in place",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source="""\
def _merge(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    sh = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    w1, w2 = torch.exp(m1 - sh), torch.exp(m2 - sh)
    return m, w1 * l1 + w2 * l2, w1[..., None] * o1 + w2[..., None] * o2


def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:-1], dtype=acc, device=q.device)
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        qb = q[..., q0:q1, :].to(acc) / math.sqrt(d)
        state = (torch.full(qb.shape[:-1], float("-inf"), dtype=acc, device=q.device),
                 torch.zeros(qb.shape[:-1], dtype=acc, device=q.device),
                 torch.zeros((*qb.shape[:-1], v.shape[-1]), dtype=acc, device=q.device))
        for k0 in range(0, T_k, block_k):
            if causal and k0 >= q1:
                break
            k1 = min(k0 + block_k, T_k)
            s = qb @ k[..., k0:k1, :].to(acc).mT
            keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device)
            if causal:
                keep = torch.arange(k0, k1, device=q.device)[None, :] <= torch.arange(q0, q1, device=q.device)[:, None]
            if key_padding_mask is not None:
                keep = keep & key_padding_mask[:, None, None, k0:k1]
            s = s.masked_fill(~keep, float("-inf"))
            m = s.amax(-1)
            p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m))[..., None])
            state = _merge(state, (m, p.sum(-1), p @ v[..., k0:k1, :].to(acc)))
        m, l, o = state
        good = l > 0
        out[..., q0:q1, :] = (o / torch.where(good, l, torch.ones_like(l))[..., None]).to(q.dtype)
        lse[..., q0:q1] = torch.where(good, torch.where(torch.isfinite(m), m, torch.zeros_like(m)) + torch.log(torch.where(good, l, torch.ones_like(l))), torch.full_like(l, float("-inf")))
    return out, lse
""",
    ),
    Accepted(
        cell="TiledAttention",
        name="FlashAttention-2 backward order: key blocks outside, D per query precomputed",
        replace=(
            ("        for q0 in range(0, T_q, block_q):\n            q1 = min(q0 + block_q, T_q)\n            for k0 in range(0, min(T_k, q1) if causal else T_k, block_k):\n                k1 = min(k0 + block_k, T_k)\n",
             "        for k0 in range(0, T_k, block_k):\n            k1 = min(k0 + block_k, T_k)\n            for q0 in range((k0 // block_q) * block_q if causal else 0, T_q, block_q):\n                q1 = min(q0 + block_q, T_q)\n"),
        ),
    ),
    Accepted(
        cell="decoder_kv_cache_bytes",
        name="getattr with defaults and dtype.itemsize",
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    layers = getattr(config, "n_layers", None) or getattr(config, "n_layer")
    heads = getattr(config, "n_heads", None) or getattr(config, "n_head")
    kv = getattr(config, "n_kv_heads", heads)
    return int(2 * layers * batch * kv * T * (config.d_model // heads) * dtype.itemsize)
""",
    ),
]
