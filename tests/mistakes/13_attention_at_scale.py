"""Curated wrong answers of notebook 13 (attention at scale); each must be rejected.

ACCEPTED lists alternative right answers (other styles, other loop orders) that must pass every test.
"""

from course_grader.authoring.mistakes import Accepted, Mistake

_RED_TEAM_SOFTMAX = """\
def online_softmax(x, block):
    width = x.shape[-1]
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, width, block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(-1))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        l = l * torch.exp(m - shift) + torch.exp(xb - shift[..., None]).sum(-1)
        m = m_new
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    l = torch.where(l == 0, torch.ones_like(l), l)
    return torch.exp(x - shift[..., None]) / l[..., None]
"""

MISTAKES = [
    # ---------------------------------------------------------------- online_softmax
    # blind red team of 13: the prose forbids changing x "not even to mask a row of -inf and restore it";
    # the values come back, the version counter does not (the kernel's agent compares both)
    Mistake(
        cell="online_softmax",
        name="-inf replaced in place in x, then restored",
        rejected_by=("test_online_softmax",),
        source="""\
def online_softmax(x, block):
    neg = torch.isneginf(x)
    x.masked_fill_(neg, -1e30)
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(-1))
        l = l * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(-1)
        m = m_new
    out = torch.exp(x - m[..., None]) / l[..., None]
    out = out.masked_fill(neg.all(-1, keepdim=True), 0.0)
    x.masked_fill_(neg, float("-inf"))
    return out
""",
        kind="autograd",
    ),
    Mistake(
        cell="online_softmax",
        name="block size ignored: one entry at a time (values right)",
        rejected_by=("test_online_softmax",),
        source=_RED_TEAM_SOFTMAX.replace("range(0, width, block)", "range(0, width, 1)").replace(
            "start:start + block]", "start:start + 1]"),
        kind="argument",
    ),
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


# Written blind from the release alone (issue 36): the wrong answers not already above, and the right answers in other styles.
MISTAKES += [
    Mistake(
        cell='online_softmax',
        name='state created on the CPU (no device=) ',
        rejected_by=('test_online_softmax',),
        source="""\
def online_softmax(x, block):
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for start in range(0, x.shape[-1], block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(dim=-1))
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - shift) + torch.exp(xb - shift[..., None]).sum(dim=-1)
        m = m_new
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    l = torch.where(l == 0, torch.ones_like(l), l)
    return torch.exp(x - shift[..., None]) / l[..., None]
""",
        kind='device',
    ),
    Mistake(
        cell='online_softmax',
        name='computes in float32 and returns float32 (x.float(), no cast back)',
        rejected_by=('test_online_softmax',),
        source="""\
def online_softmax(x, block):
    x = x.float()
    m = torch.full(x.shape[:-1], float("-inf"), device=x.device)
    l = torch.zeros(x.shape[:-1], device=x.device)
    for start in range(0, x.shape[-1], block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(dim=-1))
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - shift) + torch.exp(xb - shift[..., None]).sum(dim=-1)
        m = m_new
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    l = torch.where(l == 0, torch.ones_like(l), l)
    return torch.exp(x - shift[..., None]) / l[..., None]
""",
        kind='dtype',
    ),
    Mistake(
        cell='online_softmax',
        name='replaces -inf by -1e9 to dodge the NaN (all -inf row becomes uniform)',
        rejected_by=('test_online_softmax',),
        source="""\
def online_softmax(x, block):
    x = x.masked_fill(torch.isneginf(x), -1e9)
    m = torch.full(x.shape[:-1], -1e30, dtype=x.dtype, device=x.device)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(dim=-1)
        m = m_new
    return torch.exp(x - m[..., None]) / l[..., None]
""",
        kind='boundary',
    ),
    Mistake(
        cell='online_softmax',
        name='per-block torch.logsumexp to update the state (banned call)',
        rejected_by=('test_online_softmax',),
        source="""\
def online_softmax(x, block):
    lse = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        lse = torch.logaddexp(lse, torch.logsumexp(x[..., start:start + block], dim=-1))
    safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    out = torch.exp(x - safe[..., None])
    return out
""",
        kind='ban',
    ),
    Mistake(
        cell='online_softmax',
        name='in-place guard on the input (x[x == -inf] = ...) then restores',
        rejected_by=('test_online_softmax',),
        source="""\
def online_softmax(x, block):
    allneg = torch.isneginf(x).all(dim=-1, keepdim=True)
    x.masked_fill_(allneg, 0.0)
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        xb = x[..., start:start + block]
        m_new = torch.maximum(m, xb.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(dim=-1)
        m = m_new
    return (torch.exp(x - m[..., None]) / l[..., None]).masked_fill(allneg, 0.0)
""",
        kind='structure',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='scale factor not unsqueezed for o (broadcast error)',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    a1 = torch.exp(m1 - shift)
    a2 = torch.exp(m2 - shift)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2
""",
        kind='logic',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='assumes the first state holds the larger max (rescales only b)',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    f = torch.exp(m2 - m1)
    f = torch.nan_to_num(f, nan=0.0)
    return m1, l1 + f * l2, o1 + f[..., None] * o2
""",
        kind='logic',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='returns the normalised output o / l instead of o',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    l = a1 * l1 + a2 * l2
    o = a1[..., None] * o1 + a2[..., None] * o2
    return m, l, o / torch.where(l == 0, torch.ones_like(l), l)[..., None]
""",
        kind='logic',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='clamps the max to -1e30 (empty state no longer -inf)',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2).clamp(min=-1e30)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2
""",
        kind='boundary',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='accumulates into the first state in place (l1.mul_, o1.mul_)',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    l1.mul_(a1).add_(a2 * l2)
    o1.mul_(a1[..., None]).add_(a2[..., None] * o2)
    return m, l1, o1
""",
        kind='structure',
    ),
    Mistake(
        cell='merge_softmax_states',
        name='returns a list, not a tuple',
        rejected_by=('test_merge_softmax_states',),
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    return [m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2]
""",
        kind='structure',
    ),
    Mistake(
        cell='tiled_attention',
        name='ignores key_padding_mask',
        rejected_by=('test_tiled_attention', 'test_tiled_attention_memory'),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / math.sqrt(d)\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1:\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if False:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(~keep[:, None, None, :], float("-inf"))\n            if causal and j1 - 1 > i0:\n                rows = torch.arange(i0, i1, device=q.device)[:, None]\n                cols = torch.arange(j0, j1, device=q.device)[None, :]\n                s = s.masked_fill(cols > rows, float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append((o / l_safe[..., None]).to(q.dtype))\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='argument',
    ),
    Mistake(
        cell='tiled_attention',
        name='padding mask convention inverted (masks the True keys)',
        rejected_by=('test_tiled_attention', 'test_tiled_attention_memory'),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / math.sqrt(d)\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1:\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if key_padding_mask is not None:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(keep[:, None, None, :], float("-inf"))\n            if causal and j1 - 1 > i0:\n                rows = torch.arange(i0, i1, device=q.device)[:, None]\n                cols = torch.arange(j0, j1, device=q.device)[None, :]\n                s = s.masked_fill(cols > rows, float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append((o / l_safe[..., None]).to(q.dtype))\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='logic',
    ),
    Mistake(
        cell='tiled_attention',
        name='scales scores by 1/d instead of 1/sqrt(d)',
        rejected_by=('test_tiled_attention', 'test_tiled_attention_memory'),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / d\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1:\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if key_padding_mask is not None:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(~keep[:, None, None, :], float("-inf"))\n            if causal and j1 - 1 > i0:\n                rows = torch.arange(i0, i1, device=q.device)[:, None]\n                cols = torch.arange(j0, j1, device=q.device)[None, :]\n                s = s.masked_fill(cols > rows, float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append((o / l_safe[..., None]).to(q.dtype))\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='logic',
    ),
    Mistake(
        cell='tiled_attention',
        name='causal mask aligned bottom-right when T_q != T_k',
        rejected_by=('test_tiled_attention',),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / math.sqrt(d)\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1 + (T_k - T_q):\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if key_padding_mask is not None:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(~keep[:, None, None, :], float("-inf"))\n            if causal:\n                rows = torch.arange(i0, i1, device=q.device)[:, None]\n                cols = torch.arange(j0, j1, device=q.device)[None, :]\n                s = s.masked_fill(cols > rows + (T_k - T_q), float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append((o / l_safe[..., None]).to(q.dtype))\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='logic',
    ),
    Mistake(
        cell='tiled_attention',
        name='ignores block_q: all queries at once, loop over key blocks only',
        rejected_by=('test_tiled_attention_memory',),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    B, H, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    qf = q.to(acc) / math.sqrt(d)
    m = torch.full((B, H, T_q), float("-inf"), dtype=acc, device=q.device)
    l = torch.zeros((B, H, T_q), dtype=acc, device=q.device)
    o = torch.zeros((B, H, T_q, d_v), dtype=acc, device=q.device)
    rows = torch.arange(T_q, device=q.device)[:, None]
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        s = qf @ k[:, :, j0:j1].to(acc).transpose(-2, -1)
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1].to(q.device), float("-inf"))
        if causal:
            cols = torch.arange(j0, j1, device=q.device)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - shift)
        p = torch.exp(s - shift[..., None])
        l = alpha * l + p.sum(-1)
        o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)
        m = m_new
    empty = l == 0
    l_safe = torch.where(empty, torch.ones_like(l), l)
    lse = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))
    return (o / l_safe[..., None]).to(q.dtype), (lse if q.dtype in (torch.float16, torch.bfloat16) else lse.to(q.dtype))
""",
        kind='argument',
    ),
    Mistake(
        cell='tiled_attention',
        name='causal mask arange created on the CPU (no device=)',
        rejected_by=('test_tiled_attention',),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / math.sqrt(d)\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1:\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if key_padding_mask is not None:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(~keep[:, None, None, :], float("-inf"))\n            if causal and j1 - 1 > i0:\n                rows = torch.arange(i0, i1)[:, None]\n                cols = torch.arange(j0, j1)[None, :]\n                s = s.masked_fill(cols > rows, float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append((o / l_safe[..., None]).to(q.dtype))\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='device',
    ),
    Mistake(
        cell='tiled_attention',
        name='returns out in float32 for half inputs (no cast back)',
        rejected_by=('test_tiled_attention',),
        source='def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):\n    """FlashAttention forward: (out (B, H, T_q, d_v), lse (B, H, T_q)), one (block_q, block_k) tile of scores at a time."""\n    B, H, T_q, d = q.shape\n    T_k, d_v = k.shape[-2], v.shape[-1]\n    acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n    scale = 1.0 / math.sqrt(d)\n    outs, lses = [], []\n    for i0 in range(0, T_q, block_q):\n        i1 = min(i0 + block_q, T_q)\n        qi = q[:, :, i0:i1].to(acc)\n        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)\n        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)\n        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)\n        for j0 in range(0, T_k, block_k):\n            if causal and j0 > i1 - 1:\n                break\n            j1 = min(j0 + block_k, T_k)\n            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale\n            if key_padding_mask is not None:\n                keep = key_padding_mask[:, j0:j1].to(q.device)\n                s = s.masked_fill(~keep[:, None, None, :], float("-inf"))\n            if causal and j1 - 1 > i0:\n                rows = torch.arange(i0, i1, device=q.device)[:, None]\n                cols = torch.arange(j0, j1, device=q.device)[None, :]\n                s = s.masked_fill(cols > rows, float("-inf"))\n            m_new = torch.maximum(m, s.amax(dim=-1))\n            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)\n            alpha = torch.exp(m - shift)\n            p = torch.exp(s - shift[..., None])\n            l = alpha * l + p.sum(dim=-1)\n            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)\n            m = m_new\n        empty = l == 0\n        l_safe = torch.where(empty, torch.ones_like(l), l)\n        outs.append(o / l_safe[..., None])\n        lse_i = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l_safe))\n        lses.append(lse_i if q.dtype in (torch.float16, torch.bfloat16) else lse_i.to(q.dtype))\n    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)\n',
        kind='dtype',
    ),
    Mistake(
        cell='TiledAttention',
        name='D computed per tile as rowsum(P * dP) instead of rowsum(dO * O)',
        rejected_by=('test_TiledAttention',),
        source='class TiledAttention(torch.autograd.Function):\n    """(out, lse) of tiled attention; the backward recomputes each tile from q, k, v, out, lse."""\n\n    @staticmethod\n    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):\n        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)\n        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)\n        ctx.blocks = (block_q, block_k, causal)\n        return out, lse\n\n    @staticmethod\n    def backward(ctx, d_out, d_lse):\n        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors\n        block_q, block_k, causal = ctx.blocks\n        acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n        B, H, T_q, d = q.shape\n        T_k = k.shape[-2]\n        scale = 1.0 / math.sqrt(d)\n        if d_out is None:\n            d_out = torch.zeros_like(out)\n        if d_lse is None:\n            d_lse = torch.zeros_like(lse)\n        qa, ka, va = q.to(acc), k.to(acc), v.to(acc)\n        d_out, d_lse = d_out.to(acc), d_lse.to(acc)\n        lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse).to(acc)\n        D = (d_out * out.to(acc)).sum(-1)\n        dq, dk, dv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(va)\n        for i0 in range(0, T_q, block_q):\n            i1 = min(i0 + block_q, T_q)\n            qi, doi = qa[:, :, i0:i1], d_out[:, :, i0:i1]\n            li, Di, dli = lse_safe[:, :, i0:i1, None], D[:, :, i0:i1, None], d_lse[:, :, i0:i1, None]\n            for j0 in range(0, T_k, block_k):\n                if causal and j0 > i1 - 1:\n                    break\n                j1 = min(j0 + block_k, T_k)\n                kj, vj = ka[:, :, j0:j1], va[:, :, j0:j1]\n                s = qi @ kj.transpose(-2, -1) * scale\n                if key_padding_mask is not None:\n                    s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1].to(q.device), float("-inf"))\n                if causal and j1 - 1 > i0:\n                    rows = torch.arange(i0, i1, device=q.device)[:, None]\n                    cols = torch.arange(j0, j1, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, float("-inf"))\n                p = torch.exp(s - li)\n                dv[:, :, j0:j1] += p.transpose(-2, -1) @ doi\n                dp = doi @ vj.transpose(-2, -1)\n                ds = p * (dp - (p * dp).sum(-1, keepdim=True) + dli)\n                dq[:, :, i0:i1] += ds @ kj * scale\n                dk[:, :, j0:j1] += ds.transpose(-2, -1) @ qi * scale\n        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None\n',
        kind='logic',
    ),
    Mistake(
        cell='TiledAttention',
        name='backward ignores the padding mask',
        rejected_by=('test_TiledAttention',),
        source='class TiledAttention(torch.autograd.Function):\n    """(out, lse) of tiled attention; the backward recomputes each tile from q, k, v, out, lse."""\n\n    @staticmethod\n    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):\n        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)\n        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)\n        ctx.blocks = (block_q, block_k, causal)\n        return out, lse\n\n    @staticmethod\n    def backward(ctx, d_out, d_lse):\n        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors\n        block_q, block_k, causal = ctx.blocks\n        acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n        B, H, T_q, d = q.shape\n        T_k = k.shape[-2]\n        scale = 1.0 / math.sqrt(d)\n        if d_out is None:\n            d_out = torch.zeros_like(out)\n        if d_lse is None:\n            d_lse = torch.zeros_like(lse)\n        qa, ka, va = q.to(acc), k.to(acc), v.to(acc)\n        d_out, d_lse = d_out.to(acc), d_lse.to(acc)\n        lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse).to(acc)\n        D = (d_out * out.to(acc)).sum(-1)\n        dq, dk, dv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(va)\n        for i0 in range(0, T_q, block_q):\n            i1 = min(i0 + block_q, T_q)\n            qi, doi = qa[:, :, i0:i1], d_out[:, :, i0:i1]\n            li, Di, dli = lse_safe[:, :, i0:i1, None], D[:, :, i0:i1, None], d_lse[:, :, i0:i1, None]\n            for j0 in range(0, T_k, block_k):\n                if causal and j0 > i1 - 1:\n                    break\n                j1 = min(j0 + block_k, T_k)\n                kj, vj = ka[:, :, j0:j1], va[:, :, j0:j1]\n                s = qi @ kj.transpose(-2, -1) * scale\n                if False:\n                    s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1].to(q.device), float("-inf"))\n                if causal and j1 - 1 > i0:\n                    rows = torch.arange(i0, i1, device=q.device)[:, None]\n                    cols = torch.arange(j0, j1, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, float("-inf"))\n                p = torch.exp(s - li)\n                dv[:, :, j0:j1] += p.transpose(-2, -1) @ doi\n                dp = doi @ vj.transpose(-2, -1)\n                ds = p * (dp - Di + dli)\n                dq[:, :, i0:i1] += ds @ kj * scale\n                dk[:, :, j0:j1] += ds.transpose(-2, -1) @ qi * scale\n        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None\n',
        kind='argument',
    ),
    Mistake(
        cell='TiledAttention',
        name='returns only (dq, dk, dv)',
        rejected_by=('test_TiledAttention',),
        source='class TiledAttention(torch.autograd.Function):\n    """(out, lse) of tiled attention; the backward recomputes each tile from q, k, v, out, lse."""\n\n    @staticmethod\n    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):\n        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)\n        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)\n        ctx.blocks = (block_q, block_k, causal)\n        return out, lse\n\n    @staticmethod\n    def backward(ctx, d_out, d_lse):\n        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors\n        block_q, block_k, causal = ctx.blocks\n        acc = torch.float64 if q.dtype == torch.float64 else torch.float32\n        B, H, T_q, d = q.shape\n        T_k = k.shape[-2]\n        scale = 1.0 / math.sqrt(d)\n        if d_out is None:\n            d_out = torch.zeros_like(out)\n        if d_lse is None:\n            d_lse = torch.zeros_like(lse)\n        qa, ka, va = q.to(acc), k.to(acc), v.to(acc)\n        d_out, d_lse = d_out.to(acc), d_lse.to(acc)\n        lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse).to(acc)\n        D = (d_out * out.to(acc)).sum(-1)\n        dq, dk, dv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(va)\n        for i0 in range(0, T_q, block_q):\n            i1 = min(i0 + block_q, T_q)\n            qi, doi = qa[:, :, i0:i1], d_out[:, :, i0:i1]\n            li, Di, dli = lse_safe[:, :, i0:i1, None], D[:, :, i0:i1, None], d_lse[:, :, i0:i1, None]\n            for j0 in range(0, T_k, block_k):\n                if causal and j0 > i1 - 1:\n                    break\n                j1 = min(j0 + block_k, T_k)\n                kj, vj = ka[:, :, j0:j1], va[:, :, j0:j1]\n                s = qi @ kj.transpose(-2, -1) * scale\n                if key_padding_mask is not None:\n                    s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1].to(q.device), float("-inf"))\n                if causal and j1 - 1 > i0:\n                    rows = torch.arange(i0, i1, device=q.device)[:, None]\n                    cols = torch.arange(j0, j1, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, float("-inf"))\n                p = torch.exp(s - li)\n                dv[:, :, j0:j1] += p.transpose(-2, -1) @ doi\n                dp = doi @ vj.transpose(-2, -1)\n                ds = p * (dp - Di + dli)\n                dq[:, :, i0:i1] += ds @ kj * scale\n                dk[:, :, j0:j1] += ds.transpose(-2, -1) @ qi * scale\n        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)\n',
        kind='structure',
    ),
    Mistake(
        cell='TiledAttention',
        name='saves the probability tiles from the forward pass instead of recomputing',
        rejected_by=('test_TiledAttention',),
        source="""\
class TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):
        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        if causal:
            tri = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
            s = s.masked_fill(~tri, float("-inf"))
        p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])
        ctx.save_for_backward(q, k, v, out, p)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, p = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[-1])
        dv = p.transpose(-2, -1) @ d_out
        dp = d_out @ v.transpose(-2, -1)
        D = (d_out * out).sum(-1, keepdim=True)
        ds = p * (dp - D + d_lse[..., None])
        return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, dv, None, None, None, None
""",
        kind='argument',
    ),
    Mistake(
        cell='TiledAttention',
        name='backward recomputes P for the whole sequence at once (exact gradients, T x T memory)',
        rejected_by=('test_TiledAttention',),
        source="""\
class TiledAttention(torch.autograd.Function):
    \"\"\"(out, lse); the backward recomputes P from q, k and lse, but for all keys at once.\"\"\"

    @staticmethod
    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):
        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)
        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)
        ctx.causal = causal
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = 1.0 / math.sqrt(q.shape[-1])
        d_out = torch.zeros_like(out) if d_out is None else d_out
        d_lse = torch.zeros_like(lse) if d_lse is None else d_lse
        qa, ka, va, do, dl = q.to(acc), k.to(acc), v.to(acc), d_out.to(acc), d_lse.to(acc)
        s = qa @ ka.transpose(-2, -1) * scale
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :].to(q.device), float("-inf"))
        if ctx.causal:
            rows = torch.arange(q.shape[-2], device=q.device)[:, None]
            cols = torch.arange(k.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse).to(acc)
        p = torch.exp(s - lse_safe[..., None])
        D = (do * out.to(acc)).sum(-1, keepdim=True)
        ds = p * (do @ va.transpose(-2, -1) - D + dl[..., None])
        dq, dk, dv = ds @ ka * scale, ds.transpose(-2, -1) @ qa * scale, p.transpose(-2, -1) @ do
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None
""",
        kind='structure',
    ),
    Mistake(
        cell='decoder_kv_cache_bytes',
        name='typed-in table of bytes per dtype (no bfloat16)',
        rejected_by=('test_kv_cache_bytes',),
        source="""\
BYTES = {torch.float32: 4, torch.float16: 2, torch.float64: 8}

def decoder_kv_cache_bytes(config, T, batch, dtype):
    if hasattr(config, "n_kv_heads"):
        L, nh, nkv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, nh, nkv = config.n_layer, config.n_head, config.n_head
    return 2 * L * batch * nkv * T * (config.d_model // nh) * BYTES[dtype]
""",
        kind='dtype',
    ),
    Mistake(
        cell='decoder_kv_cache_bytes',
        name='typed-in complete table of bytes per dtype (rule says never)',
        rejected_by=('test_kv_cache_bytes',),
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    size = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2, torch.float64: 8}[dtype]
    if hasattr(config, "n_kv_heads"):
        L, nh, nkv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, nh, nkv = config.n_layer, config.n_head, config.n_head
    return 2 * L * batch * nkv * T * (config.d_model // nh) * size
""",
        kind='dtype',
    ),
    Mistake(
        cell='decoder_kv_cache_bytes',
        name='true division for head_dim: returns a float',
        rejected_by=('test_kv_cache_bytes',),
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    if hasattr(config, "n_kv_heads"):
        L, nh, nkv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, nh, nkv = config.n_layer, config.n_head, config.n_head
    return 2 * L * batch * nkv * T * (config.d_model / nh) * torch.empty((), dtype=dtype).element_size()
""",
        kind='structure',
    ),
    Mistake(
        cell='decoder_kv_cache_bytes',
        name='returns a tensor (numel of an empty cache tensor times element size)',
        rejected_by=('test_kv_cache_bytes',),
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    if hasattr(config, "n_kv_heads"):
        L, nh, nkv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, nh, nkv = config.n_layer, config.n_head, config.n_head
    shape = torch.tensor([2, L, batch, nkv, T, config.d_model // nh])
    return shape.prod() * torch.empty((), dtype=dtype).element_size()
""",
        kind='structure',
    ),
]

ACCEPTED += [
    Accepted(
        cell='online_softmax',
        name='right: float32/float64 accumulator, split() loop, nan_to_num guard, cast back',
        source="""\
def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(acc)
    m = None
    l = None
    for xb in xf.split(block, dim=-1):
        bm = xb.max(dim=-1).values
        if m is None:
            m_new = bm
            safe = torch.nan_to_num(m_new, neginf=0.0)
            l = torch.exp(xb - safe[..., None]).sum(-1)
        else:
            m_new = torch.maximum(m, bm)
            safe = torch.nan_to_num(m_new, neginf=0.0)
            l = torch.exp(m - safe) * l + torch.exp(xb - safe[..., None]).sum(-1)
        m = m_new
    safe = torch.nan_to_num(m, neginf=0.0)
    denom = torch.where(l > 0, l, torch.ones_like(l))
    return (torch.exp(xf - safe[..., None]) / denom[..., None]).to(x.dtype)
""",
        checked_by=('test_online_softmax',),
    ),
    Accepted(
        cell='online_softmax',
        name='right: while loop with index, masked_fill guards',
        source="""\
def online_softmax(x, block):
    n = x.size(-1)
    lead = x.shape[:-1]
    m = x.new_full(lead, float("-inf"))
    s = x.new_zeros(lead)
    i = 0
    while i < n:
        chunk = x[..., i:min(i + block, n)]
        new_m = torch.max(m, chunk.max(-1).values)
        ref = new_m.masked_fill(new_m == float("-inf"), 0.0)
        s = s * (m - ref).exp() + (chunk - ref[..., None]).exp().sum(-1)
        m = new_m
        i += block
    ref = m.masked_fill(m == float("-inf"), 0.0)
    s = s.masked_fill(s == 0, 1.0)
    return (x - ref[..., None]).exp() / s[..., None]
""",
        checked_by=('test_online_softmax',),
    ),
    Accepted(
        cell='merge_softmax_states',
        name='right: nan_to_num on the scale factors',
        source="""\
def merge_softmax_states(a, b):
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.max(m1, m2)
    s1 = torch.nan_to_num(torch.exp(m1 - m), nan=0.0)
    s2 = torch.nan_to_num(torch.exp(m2 - m), nan=0.0)
    return (m, s1 * l1 + s2 * l2, s1[..., None] * o1 + s2[..., None] * o2)
""",
        checked_by=('test_merge_softmax_states',),
    ),
    Accepted(
        cell='tiled_attention',
        name='right: preallocated out/lse written per block, causal key range computed up front',
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    dv = v.shape[3]
    work = q.dtype if q.dtype == torch.float64 else torch.float32
    out = torch.empty(B, H, Tq, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, Tq, dtype=work if q.dtype != torch.float64 and q.dtype != torch.float32 else q.dtype, device=q.device)
    neg = float("-inf")
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        Qi = q[:, :, qs:qe].to(work) / math.sqrt(d)
        m = Qi.new_full((B, H, qe - qs), neg)
        l = Qi.new_zeros((B, H, qe - qs))
        acc = Qi.new_zeros((B, H, qe - qs, dv))
        k_end = min(Tk, qe) if causal else Tk
        for ks in range(0, k_end, block_k):
            ke = min(ks + block_k, Tk)
            S = torch.matmul(Qi, k[:, :, ks:ke].to(work).transpose(2, 3))
            if causal:
                qi = torch.arange(qs, qe, device=q.device).view(-1, 1)
                kj = torch.arange(ks, ke, device=q.device).view(1, -1)
                S = S.masked_fill(kj > qi, neg)
            if key_padding_mask is not None:
                S = S.masked_fill(~key_padding_mask[:, None, None, ks:ke].to(device=q.device, dtype=torch.bool), neg)
            m_new = torch.maximum(m, S.max(dim=-1).values)
            ref = m_new.masked_fill(m_new == neg, 0.0)
            corr = (m - ref).exp()
            P = (S - ref.unsqueeze(-1)).exp()
            l = corr * l + P.sum(-1)
            acc = corr.unsqueeze(-1) * acc + P @ v[:, :, ks:ke].to(work)
            m = m_new
        dead = l == 0
        one = torch.ones_like(l)
        out[:, :, qs:qe] = (acc / torch.where(dead, one, l).unsqueeze(-1)).to(q.dtype)
        lse[:, :, qs:qe] = torch.where(dead, torch.full_like(m, neg), m + torch.where(dead, one, l).log()).to(lse.dtype)
    return out, lse
""",
        checked_by=('test_tiled_attention', 'test_tiled_attention_memory'),
    ),
    Accepted(
        cell='TiledAttention',
        name="right (borderline): backward always computed in float32, gradients cast back to the input dtype (prose: 'float32 at least')",
        source='class TiledAttention(torch.autograd.Function):\n    """(out, lse) of tiled attention; the backward recomputes each tile from q, k, v, out, lse."""\n\n    @staticmethod\n    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):\n        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)\n        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)\n        ctx.blocks = (block_q, block_k, causal)\n        return out, lse\n\n    @staticmethod\n    def backward(ctx, d_out, d_lse):\n        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors\n        block_q, block_k, causal = ctx.blocks\n        acc = torch.float32\n        B, H, T_q, d = q.shape\n        T_k = k.shape[-2]\n        scale = 1.0 / math.sqrt(d)\n        if d_out is None:\n            d_out = torch.zeros_like(out)\n        if d_lse is None:\n            d_lse = torch.zeros_like(lse)\n        qa, ka, va = q.to(acc), k.to(acc), v.to(acc)\n        d_out, d_lse = d_out.to(acc), d_lse.to(acc)\n        lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse).to(acc)\n        D = (d_out * out.to(acc)).sum(-1)\n        dq, dk, dv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(va)\n        for i0 in range(0, T_q, block_q):\n            i1 = min(i0 + block_q, T_q)\n            qi, doi = qa[:, :, i0:i1], d_out[:, :, i0:i1]\n            li, Di, dli = lse_safe[:, :, i0:i1, None], D[:, :, i0:i1, None], d_lse[:, :, i0:i1, None]\n            for j0 in range(0, T_k, block_k):\n                if causal and j0 > i1 - 1:\n                    break\n                j1 = min(j0 + block_k, T_k)\n                kj, vj = ka[:, :, j0:j1], va[:, :, j0:j1]\n                s = qi @ kj.transpose(-2, -1) * scale\n                if key_padding_mask is not None:\n                    s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1].to(q.device), float("-inf"))\n                if causal and j1 - 1 > i0:\n                    rows = torch.arange(i0, i1, device=q.device)[:, None]\n                    cols = torch.arange(j0, j1, device=q.device)[None, :]\n                    s = s.masked_fill(cols > rows, float("-inf"))\n                p = torch.exp(s - li)\n                dv[:, :, j0:j1] += p.transpose(-2, -1) @ doi\n                dp = doi @ vj.transpose(-2, -1)\n                ds = p * (dp - Di + dli)\n                dq[:, :, i0:i1] += ds @ kj * scale\n                dk[:, :, j0:j1] += ds.transpose(-2, -1) @ qi * scale\n        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None\n',
        checked_by=('test_TiledAttention',),
    ),
    Accepted(
        cell='decoder_kv_cache_bytes',
        name='right: bytes from torch.finfo(dtype).bits // 8',
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    from course_utils.llama import LlamaConfig
    if isinstance(config, LlamaConfig):
        L, nh, nkv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, nh, nkv = config.n_layer, config.n_head, config.n_head
    return 2 * L * batch * nkv * T * (config.d_model // nh) * (torch.finfo(dtype).bits // 8)
""",
        checked_by=('test_kv_cache_bytes',),
    ),
]


# Closing the blind red team's escapes (issue 36): work the tests did not measure, and visible hints that blamed the rescaling.
MISTAKES += [
    Mistake(
        cell="online_softmax",
        name="final pass in place on x (x.sub_(...).exp_().div_(...))",
        rejected_by=("test_online_softmax",),
        replace=(("return torch.exp(x - shift[..., None]) / torch.where(l > 0, l, torch.ones_like(l))[..., None]",
                  "return x.sub_(shift[..., None]).exp_().div_(torch.where(l > 0, l, torch.ones_like(l))[..., None])"),),
        kind="autograd",
    ),
    Mistake(
        cell="online_softmax",
        name="block max over all rows (chunk.max() without dim)",
        rejected_by=("test_online_softmax",),
        replace=(("m_new = torch.maximum(m, chunk.amax(dim=-1))", "m_new = torch.maximum(m, chunk.max().expand_as(m))"),),
        kind="logic",
    ),
    Mistake(
        cell="tiled_attention",
        name="scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d)",
        rejected_by=("test_tiled_attention",),
        replace=(("scale = 1.0 / math.sqrt(q.shape[-1])", "scale = 1.0 / math.sqrt(v.shape[-1])"),),
        kind="argument",
    ),
    Mistake(
        cell="tiled_attention",
        name="the last, shorter query block dropped (zeros left in its rows)",
        rejected_by=("test_tiled_attention",),
        replace=(("for q0 in range(0, T_q, block_q):", "for q0 in range(0, T_q - block_q + 1, block_q):"),
                 ("    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)",
                  "    out = q.new_zeros((*lead, T_q, v.shape[-1]))\n"
                  "    lse = torch.full((*lead, T_q), float(\"-inf\"), dtype=acc, device=q.device)\n"
                  "    n = sum(part.shape[-2] for part in outs)\n"
                  "    if outs:\n"
                  "        out[..., :n, :] = torch.cat(outs, dim=-2)\n"
                  "        lse[..., :n] = torch.cat(lses, dim=-1)\n"
                  "    return out, lse")),
        kind="boundary",
    ),
    # the state in bfloat16 but lse cast up: 0.7-0.9% of the output's norm off (float32 state: 0.17%); elementwise, 1 entry of 16384
    Mistake(
        cell="tiled_attention",
        name="state in bfloat16 for bfloat16 inputs, lse cast up to float32 at the end",
        rejected_by=("test_tiled_attention",),
        replace=(("acc = torch.promote_types(q.dtype, torch.float32)  # the state in float32 at least", "acc = q.dtype"),
                 ("return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)",
                  "return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1).to(torch.promote_types(q.dtype, torch.float32))")),
        kind="dtype",
    ),
    # values right, one wholly masked tile per query block computed: 151 of 256 tiles (the bytes stay under 3/4)
    Mistake(
        cell="tiled_attention",
        name="causal skip off by one: the key block just past the diagonal computed, then masked",
        rejected_by=("test_tiled_attention_memory",),
        replace=(("range(0, min(T_k, q1) if causal else T_k, block_k)", "range(0, min(T_k, q1 + 1) if causal else T_k, block_k)"),),
        kind="boundary",
    ),
    Mistake(
        cell="tiled_attention",
        name="lse returned in bfloat16 for bfloat16 inputs",
        rejected_by=("test_tiled_attention",),
        replace=(("return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)", "return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1).to(q.dtype)"),),
        kind="dtype",
    ),
    # bfloat16 inputs at T = 512: about 1% relative gradient error against 0.25% with float32 sums (the float64 tests cannot see it)
    Mistake(
        cell="TiledAttention",
        name="backward sums in the input dtype (bfloat16 tiles and accumulators)",
        rejected_by=("test_TiledAttention",),
        replace=(("        acc = torch.promote_types(q.dtype, torch.float32)\n", "        acc = q.dtype\n"),),
        kind="dtype",
    ),
    Mistake(
        cell="TiledAttention",
        name="backward masks the causal blocks above the diagonal instead of skipping them",
        rejected_by=("test_TiledAttention",),
        replace=(("            for k0 in range(0, min(T_k, q1) if causal else T_k, block_k):\n",
                  "            for k0 in range(0, T_k, block_k):\n"),),
        kind="argument",
    ),
]

ACCEPTED += [
    # skips more than the causal blocks: the fully padded key blocks too (the products are counted without padding)
    Accepted(
        cell="tiled_attention",
        name="right: float64 state always, skips fully padded key blocks as well as causal ones",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    B, H, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.float64
    scale = 1.0 / math.sqrt(d)
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi = q[:, :, i0:i1].to(acc)
        m = torch.full((B, H, i1 - i0), float("-inf"), dtype=acc, device=q.device)
        l = torch.zeros((B, H, i1 - i0), dtype=acc, device=q.device)
        o = torch.zeros((B, H, i1 - i0, d_v), dtype=acc, device=q.device)
        for j0 in range(0, T_k, block_k):
            if causal and j0 > i1 - 1:
                break
            j1 = min(j0 + block_k, T_k)
            if key_padding_mask is not None and not bool(key_padding_mask[:, j0:j1].any()):
                continue
            s = qi @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale
            if key_padding_mask is not None:
                s = s.masked_fill(~key_padding_mask[:, None, None, j0:j1], float("-inf"))
            if causal and j1 - 1 > i0:
                rows = torch.arange(i0, i1, device=q.device)[:, None]
                cols = torch.arange(j0, j1, device=q.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            alpha = torch.exp(m - shift)
            p = torch.exp(s - shift[..., None])
            l = alpha * l + p.sum(-1)
            o = alpha[..., None] * o + p @ v[:, :, j0:j1].to(acc)
            m = m_new
        safe = torch.where(l > 0, l, torch.ones_like(l))
        outs.append((o / safe[..., None]).to(q.dtype))
        lses.append(torch.where(l > 0, m + torch.log(safe), torch.full_like(m, float("-inf"))).to(torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)
""",
    ),
]


# Second blind red team of 13 (build/redteam/13_blind2.py): wrong answers that got full marks. The tests now run unequal
# blocks (16 x 32) and count the matrix products against 16 x 16 (half the tiles), record what save_for_backward packs and
# what the forward leaves alive, the dtypes of the backward's matrix products for bfloat16 inputs, and float8_e8m0fnu.
_BLIND2_TILED = """\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    B, H, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    lse_dtype = acc if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, T_q, dtype=lse_dtype, device=q.device)
    NEG = float("-inf")
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        qi = q[:, :, q0:q1].to(acc)
        m = torch.full((B, H, q1 - q0), NEG, dtype=acc, device=q.device)
        l = torch.zeros(B, H, q1 - q0, dtype=acc, device=q.device)
        o = torch.zeros(B, H, q1 - q0, d_v, dtype=acc, device=q.device)
        for k0 in range(0, T_k, block_k):
            if causal and k0 > q1 - 1:
                break
            k1 = min(k0 + block_k, T_k)
            s = qi @ k[:, :, k0:k1].to(acc).transpose(-2, -1) * scale
            if key_padding_mask is not None:
                s = s.masked_fill(~key_padding_mask[:, None, None, k0:k1], NEG)
            if causal and k1 - 1 > q0:
                rows = torch.arange(q0, q1, device=q.device)[:, None]
                cols = torch.arange(k0, k1, device=q.device)[None, :]
                s = s.masked_fill(cols > rows, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            shift = torch.where(m_new == NEG, torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m - shift)
            p = torch.exp(s - shift[..., None])
            l = alpha * l + p.sum(dim=-1)
            o = alpha[..., None] * o + p @ v[:, :, k0:k1].to(acc)
            m = m_new
        safe = torch.where(l == 0, torch.ones_like(l), l)
        out[:, :, q0:q1] = (o / safe[..., None]).to(q.dtype)
        lse[:, :, q0:q1] = torch.where(l == 0, torch.full_like(l, NEG), m + torch.log(safe)).to(lse_dtype)
    return out, lse
"""

_BLIND2_TA_STORE_P = """\
class TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, block_q, block_k, causal, key_padding_mask):
        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)
        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)
        ctx.block_q, ctx.block_k, ctx.causal = block_q, block_k, causal
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        L = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse).to(acc)
        ctx.tiles = {}
        for q0 in range(0, q.shape[-2], block_q):
            q1 = min(q0 + block_q, q.shape[-2])
            for k0 in range(0, k.shape[-2], block_k):
                if causal and k0 > q1 - 1:
                    break
                k1 = min(k0 + block_k, k.shape[-2])
                s = q[:, :, q0:q1].to(acc) @ k[:, :, k0:k1].to(acc).transpose(-2, -1) / math.sqrt(q.shape[-1])
                if key_padding_mask is not None:
                    s = s.masked_fill(~key_padding_mask[:, None, None, k0:k1], float("-inf"))
                if causal and k1 - 1 > q0:
                    s = s.masked_fill(torch.arange(k0, k1, device=q.device)[None, :] > torch.arange(q0, q1, device=q.device)[:, None], float("-inf"))
                ctx.tiles[q0, k0] = torch.exp(s - L[:, :, q0:q1, None])
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse, mask = ctx.saved_tensors
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = 1 / math.sqrt(q.shape[-1])
        dq = torch.zeros(q.shape, dtype=acc, device=q.device)
        dk = torch.zeros(k.shape, dtype=acc, device=q.device)
        dv = torch.zeros(v.shape, dtype=acc, device=q.device)
        D = (d_out.to(acc) * out.to(acc)).sum(-1)
        for (q0, k0), p in ctx.tiles.items():
            q1, k1 = q0 + p.shape[-2], k0 + p.shape[-1]
            doi = d_out[:, :, q0:q1].to(acc)
            dv[:, :, k0:k1] += p.transpose(-2, -1) @ doi
            ds = p * (doi @ v[:, :, k0:k1].to(acc).transpose(-2, -1) - D[:, :, q0:q1, None] + d_lse[:, :, q0:q1, None].to(acc))
            dq[:, :, q0:q1] += ds @ k[:, :, k0:k1].to(acc) * scale
            dk[:, :, k0:k1] += ds.transpose(-2, -1) @ q[:, :, q0:q1].to(acc) * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None
"""

MISTAKES += [
    Mistake(
        cell="tiled_attention",
        name="block_k ignored: key blocks of block_q keys (values right)",
        rejected_by=("test_tiled_attention_memory",),
        replace=(("for k0 in range(0, min(T_k, q1) if causal else T_k, block_k):", "for k0 in range(0, min(T_k, q1) if causal else T_k, block_q):"),
                 ("k1 = min(k0 + block_k, T_k)", "k1 = min(k0 + block_q, T_k)")),
        kind="argument",
    ),
    Mistake(
        cell="tiled_attention",
        name="block_q ignored: query blocks of block_k queries (values right)",
        rejected_by=("test_tiled_attention_memory",),
        replace=(("for q0 in range(0, T_q, block_q):\n        q1 = min(q0 + block_q, T_q)",
                  "for q0 in range(0, T_q, block_k):\n        q1 = min(q0 + block_k, T_q)"),),
        kind="argument",
    ),
    Mistake(
        cell="TiledAttention",
        name="backward loops over key blocks of block_q keys (the saved block_k ignored)",
        rejected_by=("test_TiledAttention",),
        replace=(("block_q, block_k, causal = ctx.settings", "block_q, _, causal = ctx.settings\n        block_k = block_q"),),
        kind="argument",
    ),
    Mistake(
        cell="TiledAttention",
        name="forward keeps every probability tile on ctx, backward reads them back (no recomputation)",
        rejected_by=("test_TiledAttention",),
        source=_BLIND2_TA_STORE_P,
        kind="structure",
    ),
    Mistake(
        cell="TiledAttention",
        name="probability tiles passed to save_for_backward too (no recomputation)",
        rejected_by=("test_TiledAttention",),
        source=_BLIND2_TA_STORE_P.replace(
            "                ctx.tiles[q0, k0] = torch.exp(s - L[:, :, q0:q1, None])\n        return out, lse",
            "                ctx.tiles[q0, k0] = torch.exp(s - L[:, :, q0:q1, None])\n        ctx.keys = list(ctx.tiles)\n"
            "        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask, *ctx.tiles.values())\n        ctx.tiles = None\n        return out, lse").replace(
            "        q, k, v, out, lse, mask = ctx.saved_tensors\n        acc",
            "        q, k, v, out, lse, mask, *tiles = ctx.saved_tensors\n        ctx.tiles = dict(zip(ctx.keys, tiles))\n        acc"),
        kind="structure",
    ),
    Mistake(
        cell="TiledAttention",
        name="q, k, v, out, lse kept as ctx attributes instead of ctx.save_for_backward",
        rejected_by=("test_TiledAttention",),
        replace=(("ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)", "ctx.tensors = (q, k, v, out, lse, key_padding_mask)"),
                 ("q, k, v, out, lse, key_padding_mask = ctx.saved_tensors", "q, k, v, out, lse, key_padding_mask = ctx.tensors")),
        kind="autograd",
    ),
    # bfloat16 inputs at T = 512: 0.33% relative gradient error (bound 0.6%, float32 products 0.24%): caught by the products' dtypes
    Mistake(
        cell="TiledAttention",
        name="backward tile products rounded to bfloat16, accumulators float32",
        rejected_by=("test_TiledAttention",),
        replace=(("dv[..., k0:k1, :] += p.transpose(-2, -1) @ d_out[..., q0:q1, :]",
                  "dv[..., k0:k1, :] += (p.to(q.dtype).transpose(-2, -1) @ d_out[..., q0:q1, :].to(q.dtype)).to(acc)"),
                 ("dq[..., q0:q1, :] += ds @ ka[..., k0:k1, :] * scale",
                  "dq[..., q0:q1, :] += (ds.to(q.dtype) @ k[..., k0:k1, :]).to(acc) * scale"),
                 ("dk[..., k0:k1, :] += ds.transpose(-2, -1) @ qa[..., q0:q1, :] * scale",
                  "dk[..., k0:k1, :] += (ds.to(q.dtype).transpose(-2, -1) @ q[..., q0:q1, :]).to(acc) * scale")),
        kind="dtype",
    ),
    Mistake(
        cell="TiledAttention",
        name="backward dP tile computed in bfloat16",
        rejected_by=("test_TiledAttention",),
        replace=(("dp = d_out[..., q0:q1, :] @ va[..., k0:k1, :].transpose(-2, -1)",
                  "dp = (d_out[..., q0:q1, :].to(q.dtype) @ v[..., k0:k1, :].transpose(-2, -1)).to(acc)"),),
        kind="dtype",
    ),
    Mistake(
        cell="decoder_kv_cache_bytes",
        name="typed-in table of element sizes, the four common float8 dtypes included",
        rejected_by=("test_kv_cache_bytes",),
        source="""\
SIZES = {torch.float64: 8, torch.float32: 4, torch.float16: 2, torch.bfloat16: 2,
         torch.float8_e4m3fn: 1, torch.float8_e5m2: 1, torch.float8_e4m3fnuz: 1, torch.float8_e5m2fnuz: 1}


def decoder_kv_cache_bytes(config, T, batch, dtype):
    if hasattr(config, "n_kv_heads"):
        layers, heads, kv_heads = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        layers, heads, kv_heads = config.n_layer, config.n_head, config.n_head
    return 2 * layers * batch * kv_heads * T * (config.d_model // heads) * SIZES[dtype]
""",
        kind="ban",
    ),
]

ACCEPTED += [
    # right answers next to the new checks (from the same red team): other product styles and tilings keep the product ratio
    Accepted(
        cell="tiled_attention",
        name="right: preallocated out/lse written per query block, == -inf guards",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source=_BLIND2_TILED,
    ),
    Accepted(
        cell="tiled_attention",
        name="right: einsum for both products",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source=_BLIND2_TILED.replace(
            "s = qi @ k[:, :, k0:k1].to(acc).transpose(-2, -1) * scale",
            's = torch.einsum("bhid,bhjd->bhij", qi, k[:, :, k0:k1].to(acc)) * scale').replace(
            "o = alpha[..., None] * o + p @ v[:, :, k0:k1].to(acc)",
            'o = alpha[..., None] * o + torch.einsum("bhij,bhjc->bhic", p, v[:, :, k0:k1].to(acc))'),
    ),
    Accepted(
        cell="tiled_attention",
        name="right: q scaled once per block instead of the scores",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source=_BLIND2_TILED.replace("qi = q[:, :, q0:q1].to(acc)", "qi = q[:, :, q0:q1].to(acc) * scale").replace(
            "s = qi @ k[:, :, k0:k1].to(acc).transpose(-2, -1) * scale", "s = qi @ k[:, :, k0:k1].to(acc).transpose(-2, -1)"),
    ),
    Accepted(
        cell="tiled_attention",
        name="right: ragged last key block zero-padded and masked",
        checked_by=("test_tiled_attention", "test_tiled_attention_memory"),
        source="""\
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False, key_padding_mask=None):
    B, H, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    n_k = -(-T_k // block_k) * block_k
    kp = F.pad(k.to(acc), (0, 0, 0, n_k - T_k))
    vp = F.pad(v.to(acc), (0, 0, 0, n_k - T_k))
    valid = torch.arange(n_k, device=q.device) < T_k
    if key_padding_mask is not None:
        keep = F.pad(key_padding_mask, (0, n_k - T_k), value=False)
    else:
        keep = valid[None, :].expand(B, n_k)
    out = torch.zeros(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.full((B, H, T_q), -math.inf, dtype=acc if q.dtype in (torch.float16, torch.bfloat16) else q.dtype, device=q.device)
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        qi = q[:, :, q0:q1].to(acc) * d ** -0.5
        m = torch.full((B, H, q1 - q0), -math.inf, dtype=acc, device=q.device)
        l = torch.zeros((B, H, q1 - q0), dtype=acc, device=q.device)
        o = torch.zeros((B, H, q1 - q0, d_v), dtype=acc, device=q.device)
        for k0 in range(0, n_k, block_k):
            if causal and k0 >= q1:
                continue
            k1 = k0 + block_k
            s = qi @ kp[:, :, k0:k1].transpose(-1, -2)
            allowed = keep[:, None, None, k0:k1]
            if causal:
                allowed = allowed & (torch.arange(k0, k1, device=q.device)[None, :] <= torch.arange(q0, q1, device=q.device)[:, None])
            s = s.masked_fill(~allowed, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            safe = m_new.nan_to_num(neginf=0.0)
            scale_old = torch.exp(m - safe)
            p = torch.exp(s - safe.unsqueeze(-1))
            l = l * scale_old + p.sum(-1)
            o = o * scale_old.unsqueeze(-1) + p @ vp[:, :, k0:k1]
            m = m_new
        seen = l > 0
        out[:, :, q0:q1] = torch.where(seen[..., None], o / l.clamp(min=1e-300 if acc == torch.float64 else 1e-30)[..., None], 0.0).to(q.dtype)
        lse[:, :, q0:q1] = torch.where(seen, m + torch.log(l.clamp(min=1e-300 if acc == torch.float64 else 1e-30)), -math.inf).to(lse.dtype)
    return out, lse
""",
    ),
    Accepted(
        cell="TiledAttention",
        name="right: block sizes as separate ctx attributes, float64 backward, mask kept as a ctx attribute",
        replace=(("ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)\n        ctx.settings = (block_q, block_k, causal)",
                  "ctx.save_for_backward(q, k, v, out, lse)\n        ctx.mask = key_padding_mask\n"
                  "        ctx.block_q, ctx.block_k, ctx.causal = block_q, block_k, causal"),
                 ("q, k, v, out, lse, key_padding_mask = ctx.saved_tensors\n        block_q, block_k, causal = ctx.settings\n"
                  "        acc = torch.promote_types(q.dtype, torch.float32)",
                  "q, k, v, out, lse = ctx.saved_tensors\n        key_padding_mask = ctx.mask\n"
                  "        block_q, block_k, causal = ctx.block_q, ctx.block_k, ctx.causal\n        acc = torch.float64")),
    ),
    Accepted(
        cell="TiledAttention",
        name="right: backward products through einsum on float32 copies taken per tile",
        replace=(("s = qa[..., q0:q1, :] @ ka[..., k0:k1, :].transpose(-2, -1) * scale",
                  's = torch.einsum("...id,...jd->...ij", q[..., q0:q1, :].to(acc), k[..., k0:k1, :].to(acc)) * scale'),
                 ("dp = d_out[..., q0:q1, :] @ va[..., k0:k1, :].transpose(-2, -1)",
                  'dp = torch.einsum("...ic,...jc->...ij", d_out[..., q0:q1, :], v[..., k0:k1, :].to(acc))')),
    ),
    Accepted(
        cell="decoder_kv_cache_bytes",
        name="right: torch.finfo(dtype).bits // 8",
        source="""\
def decoder_kv_cache_bytes(config, T, batch, dtype):
    if isinstance(config, LlamaConfig):
        L, n_h, n_kv = config.n_layers, config.n_heads, config.n_kv_heads
    else:
        L, n_h, n_kv = config.n_layer, config.n_head, config.n_head
    return (2 * L * batch * n_kv * T * (config.d_model // n_h) * torch.finfo(dtype).bits) // 8
""",
    ),
]
