"""Curated wrong answers of notebook 10 (GPT); each must be rejected."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(
        kind="logic",
        cell="next_token_batch",
        name="targets not shifted (y equals x)",
        rejected_by=("test_next_token_batch",),
        replace=(("y = data[positions + 1]", "y = data[positions]"),),
    ),
    Mistake(
        kind="structure",
        cell="init_gpt2",
        name="head copied from the embedding, not tied",
        rejected_by=("test_init_gpt2",),
        replace=(("model.lm_head.weight = model.wte.weight", "model.lm_head.weight.data.copy_(model.wte.weight.data)"),),
    ),
    Mistake(
        kind="logic",
        cell="init_gpt2",
        name="residual std 0.02/sqrt(n_layer), the 2 forgotten",
        rejected_by=("test_init_gpt2",),
        replace=(("0.02 / math.sqrt(2 * n_layer)", "0.02 / math.sqrt(n_layer)"),),
    ),
    Mistake(
        kind="boundary",
        cell="top_k_filter",
        name="drops the k-th largest too (keeps k-1)",
        rejected_by=("test_top_k_filter",),
        replace=(("logits < kth_largest", "logits <= kth_largest"),),
    ),
    Mistake(
        kind="boundary",
        cell="top_p_filter",
        name="drops the token that crosses p (cumsum > p)",
        rejected_by=("test_top_p_filter",),
        replace=(("drop_sorted = mass_above >= p", "drop_sorted = probs.cumsum(dim=-1) > p"),),
    ),
    Mistake(
        kind="logic",
        cell="top_p_filter",
        name="drop mask left in sorted order",
        rejected_by=("test_top_p_filter",),
        replace=(("drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted"),),
    ),
    Mistake(
        kind="logic",
        cell="cached_attention_step",
        name="top-left causal mask instead of bottom-right",
        rejected_by=("test_cached_attention_step",),
        replace=(("causal_mask(q.size(-2), k_all.size(-2), device=q.device)",
                  "torch.ones(q.size(-2), k_all.size(-2), dtype=torch.bool, device=q.device).tril()"),),
    ),
    Mistake(
        kind="logic",
        cell="cached_attention_step",
        name="cache not appended (attends to new keys only)",
        rejected_by=("test_cached_attention_step",),
        replace=(("out, _ = masked_attention(q, k_all, v_all, mask)",
                  "out, _ = masked_attention(q, k_new, v_new, causal_mask(q.size(-2), device=q.device))"),),
    ),
    Mistake(
        kind="logic",
        cell="cached_attention_step",
        name="no mask (fine for one new token, wrong for a chunk or the prompt)",
        rejected_by=("test_cached_attention_step",),
        replace=(("out, _ = masked_attention(q, k_all, v_all, mask)", "out, _ = masked_attention(q, k_all, v_all)"),),
    ),
    Mistake(
        kind="logic",
        cell="last_token_pool",
        name="takes the last column (a padding position)",
        rejected_by=("test_last_token_pool",),
        replace=(("return hidden[rows, lengths.to(hidden.device) - 1]", "return hidden[:, -1]"),),
    ),
]

# Escapes of the blind red team (issue 12): each kept full marks before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell='next_token_batch', name='arange without device', kind='device',
            rejected_by=('test_next_token_batch',),
            source=('def next_token_batch(data, starts, block_size):\n'
                    '    pos = starts.unsqueeze(1) + torch.arange(block_size)\n'
                    '    return data[pos], data[pos + 1]\n')),
    Mistake(cell='init_gpt2', name='aliasing modules: lm_head = wte', kind='structure',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    n_layer = len(model.blocks)\n'
                    '    with torch.no_grad():\n'
                    '        for m in model.modules():\n'
                    '            if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                    '                m.weight.normal_(0.0, 0.02)\n'
                    '                if getattr(m, "bias", None) is not None:\n'
                    '                    m.bias.zero_()\n'
                    '        for block in model.blocks:\n'
                    '            block.attn.proj.weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))\n'
                    '            block.ffn.fc2.weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))\n'
                    '    model.lm_head = model.wte\n'
                    '    return model\n')),
    Mistake(cell='init_gpt2', name='new Parameters made on the default device/dtype', kind='device',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    n_layer = len(model.blocks)\n'
                    '    for m in model.modules():\n'
                    '        if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                    '            m.weight = nn.Parameter(torch.randn(m.weight.shape) * 0.02)\n'
                    '            if getattr(m, "bias", None) is not None:\n'
                    '                m.bias = nn.Parameter(torch.zeros(m.bias.shape))\n'
                    '    for block in model.blocks:\n'
                    '        block.attn.proj.weight = nn.Parameter(torch.randn(block.attn.proj.weight.shape) * 0.02 / math.sqrt(2 * n_layer))\n'
                    '        block.ffn.fc2.weight = nn.Parameter(torch.randn(block.ffn.fc2.weight.shape) * 0.02 / math.sqrt(2 * n_layer))\n'
                    '    model.lm_head.weight = model.wte.weight\n'
                    '    return model\n')),
    Mistake(cell='init_gpt2', name='reference import (library init + tie)', kind='reference',
            rejected_by=('test_init_gpt2',),
            source=('from course_utils.gpt import gpt2_init_\n'
                    '\n'
                    'def init_gpt2_(model):\n'
                    '    gpt2_init_(model, len(model.blocks))\n'
                    '    model.lm_head.weight = model.wte.weight\n'
                    '    return model\n')),
    Mistake(cell='top_k_filter', name='torch.full without device/dtype', kind='device',
            rejected_by=('test_top_k_filter',),
            source=('def top_k_filter(logits, k):\n'
                    '    values, index = torch.topk(logits, k)\n'
                    '    out = torch.full(logits.shape, float("-inf"))\n'
                    '    return out.scatter(-1, index, values)\n')),
    Mistake(cell='top_k_filter', name='modifies the logits in place', kind='structure',
            rejected_by=('test_top_k_filter',),
            source=('def top_k_filter(logits, k):\n'
                    '    kth = torch.topk(logits, k).values[..., -1:]\n'
                    '    logits[logits < kth] = float("-inf")\n'
                    '    return logits\n')),
    Mistake(cell='top_k_filter', name='reference import', kind='reference',
            rejected_by=('test_top_k_filter',),
            source=('from course_utils.gpt import top_k_filter\n')),
    Mistake(cell='top_p_filter', name='tie at the threshold kept (mass above > p instead of >= p)', kind='boundary',
            rejected_by=('test_top_p_filter',),
            source=('def top_p_filter(logits, p):\n'
                    '    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)\n'
                    '    cum = torch.softmax(sorted_logits, -1).cumsum(-1)\n'
                    '    remove = cum > p\n'
                    '    remove[..., 1:] = remove[..., :-1].clone()\n'
                    '    remove[..., 0] = False\n'
                    '    remove = remove.scatter(-1, order, remove)\n'
                    '    return logits.masked_fill(remove, float("-inf"))\n')),
    Mistake(cell='top_p_filter', name='zeros without device/dtype in the shifted cumsum', kind='device',
            rejected_by=('test_top_p_filter',),
            source=('def top_p_filter(logits, p):\n'
                    '    sorted_logits, order = logits.sort(dim=-1, descending=True)\n'
                    '    csum = sorted_logits.softmax(-1).cumsum(-1)\n'
                    '    before = torch.cat([torch.zeros(*csum.shape[:-1], 1), csum[..., :-1]], dim=-1)\n'
                    '    drop_sorted = before >= p\n'
                    '    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))\n')),
    Mistake(cell='top_p_filter', name='reference import', kind='reference',
            rejected_by=('test_top_p_filter',),
            source=('from course_utils.gpt import top_p_filter\n')),
    Mistake(cell='cached_attention_step', name='causal_mask without device', kind='device',
            rejected_by=('test_cached_attention_step',),
            source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                    '    k_all = torch.cat([k_cache, k_new], dim=-2)\n'
                    '    v_all = torch.cat([v_cache, v_new], dim=-2)\n'
                    '    out, _ = masked_attention(q, k_all, v_all, causal_mask(q.size(-2), k_all.size(-2)))\n'
                    '    return out, k_all, v_all\n')),
    Mistake(cell='last_token_pool', name='one-hot einsum with .float() (dtype not followed)', kind='dtype',
            rejected_by=('test_last_token_pool',),
            source=('def last_token_pool(hidden, lengths):\n'
                    '    onehot = F.one_hot(lengths - 1, hidden.size(1)).float()\n'
                    '    return torch.einsum("bt,btd->bd", onehot, hidden)\n')),
    Mistake(cell='last_token_pool', name='reference import', kind='reference',
            rejected_by=('test_last_token_pool',),
            source=('from course_utils.gpt import last_token_pool\n')),
]

# Right answers in other styles than the solution (blind red team): every test must accept them.
ACCEPTED = [
    Accepted(cell='next_token_batch', name="position grid with arange on data's device",
             source=('def next_token_batch(data, starts, block_size):\n'
                    '    pos = starts[:, None] + torch.arange(block_size, device=data.device)\n'
                    '    return data[pos], data[pos + 1]\n')),
    Accepted(cell='next_token_batch', name='unfold windows of block_size + 1',
             source=('def next_token_batch(data, starts, block_size):\n'
                    '    windows = data.unfold(0, block_size + 1, 1)[starts]\n'
                    '    return windows[:, :-1], windows[:, 1:]\n')),
    Accepted(cell='next_token_batch', name='one window of block_size + 1, sliced; int32 starts',
             source=('def next_token_batch(data: torch.Tensor, starts: torch.Tensor, block_size: int):\n'
                    '    offsets = torch.arange(block_size + 1, device=starts.device)\n'
                    '    window = data[(starts.long().unsqueeze(1) + offsets).to(data.device)]\n'
                    '    x, y = window[:, :-1], window[:, 1:]\n'
                    '    assert x.shape == y.shape == (len(starts), block_size)\n'
                    '    return x, y\n')),
    Accepted(cell='init_gpt2', name='no_grad loop over modules, tie at the end',
             source=('def init_gpt2_(model):\n'
                    '    n_layer = len(model.blocks)\n'
                    '    with torch.no_grad():\n'
                    '        for m in model.modules():\n'
                    '            if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                    '                m.weight.normal_(0.0, 0.02)\n'
                    '                if getattr(m, "bias", None) is not None:\n'
                    '                    m.bias.zero_()\n'
                    '        for block in model.blocks:\n'
                    '            block.attn.proj.weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))\n'
                    '            block.ffn.fc2.weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))\n'
                    '    model.lm_head.weight = model.wte.weight\n'
                    '    return model\n')),
    Accepted(cell='init_gpt2', name='tie first, model.apply with nn.init, named_parameters for residuals',
             source=('def init_gpt2_(model: GPT) -> GPT:\n'
                    '    model.lm_head.weight = model.wte.weight\n'
                    '    def _init(m):\n'
                    '        if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                    '            nn.init.normal_(m.weight, mean=0.0, std=0.02)\n'
                    '            if isinstance(m, nn.Linear) and m.bias is not None:\n'
                    '                nn.init.zeros_(m.bias)\n'
                    '    model.apply(_init)\n'
                    '    std = 0.02 / math.sqrt(2 * len(model.blocks))\n'
                    '    for name, p in model.named_parameters():\n'
                    '        if name.endswith("attn.proj.weight") or name.endswith("ffn.fc2.weight"):\n'
                    '            nn.init.normal_(p, mean=0.0, std=std)\n'
                    '    return model\n')),
    Accepted(cell='init_gpt2', name="embedding tied to the head's Parameter (other direction)",
             source=('def init_gpt2_(model):\n'
                    '    n_layer = len(model.blocks)\n'
                    '    for m in model.modules():\n'
                    '        if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                    '            nn.init.normal_(m.weight, std=0.02)\n'
                    '            if getattr(m, "bias", None) is not None:\n'
                    '                nn.init.zeros_(m.bias)\n'
                    '    for block in model.blocks:\n'
                    '        for w in (block.attn.proj.weight, block.ffn.fc2.weight):\n'
                    '            nn.init.normal_(w, std=0.02 / (2 * n_layer) ** 0.5)\n'
                    '    model.wte.weight = model.lm_head.weight\n'
                    '    return model\n')),
    Accepted(cell='top_k_filter', name='threshold at the k-th value, masked_fill',
             source=('def top_k_filter(logits, k):\n'
                    '    kth = torch.topk(logits, k, dim=-1).values[..., -1:]\n'
                    '    return logits.masked_fill(logits < kth, float("-inf"))\n')),
    Accepted(cell='top_k_filter', name='scatter the top-k values into a -inf tensor',
             source=('def top_k_filter(logits, k):\n'
                    '    values, index = torch.topk(logits, k, dim=-1)\n'
                    '    return torch.full_like(logits, float("-inf")).scatter(-1, index, values)\n')),
    Accepted(cell='top_k_filter', name='sort and where',
             source=('def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:\n'
                    '    kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1].unsqueeze(-1)\n'
                    '    return torch.where(logits >= kth, logits, torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))\n')),
    Accepted(cell='top_p_filter', name='sort, exclusive cumsum, scatter back',
             source=('def top_p_filter(logits, p):\n'
                    '    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)\n'
                    '    probs = torch.softmax(sorted_logits, dim=-1)\n'
                    '    before = probs.cumsum(-1) - probs\n'
                    '    drop_sorted = before >= p\n'
                    '    drop = drop_sorted.scatter(-1, order, drop_sorted)\n'
                    '    return logits.masked_fill(drop, float("-inf"))\n')),
    Accepted(cell='top_p_filter', name='inverse permutation with argsort + gather',
             source=('def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:\n'
                    '    order = torch.argsort(logits, dim=-1, descending=True)\n'
                    '    probs = torch.softmax(logits, dim=-1).gather(-1, order)\n'
                    '    mass_above = torch.cumsum(probs, dim=-1) - probs\n'
                    '    keep_sorted = mass_above < p\n'
                    '    keep = keep_sorted.gather(-1, torch.argsort(order, dim=-1))\n'
                    '    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))\n')),
    Accepted(cell='top_p_filter', name='shifted cumsum with cat, scatter the filtered sorted logits',
             source=('def top_p_filter(logits, p):\n'
                    '    sorted_logits, order = logits.sort(dim=-1, descending=True)\n'
                    '    probs = sorted_logits.softmax(-1)\n'
                    '    csum = probs.cumsum(-1)\n'
                    '    before = torch.cat([torch.zeros_like(csum[..., :1]), csum[..., :-1]], dim=-1)\n'
                    '    filtered = sorted_logits.masked_fill(before >= p, float("-inf"))\n'
                    '    return torch.empty_like(logits).scatter(-1, order, filtered)\n')),
    Accepted(cell='cached_attention_step', name='cat + causal_mask + masked_attention',
             source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                    '    k_all = torch.cat([k_cache, k_new], dim=-2)\n'
                    '    v_all = torch.cat([v_cache, v_new], dim=-2)\n'
                    '    mask = causal_mask(q.size(-2), k_all.size(-2), device=q.device)\n'
                    '    out, _ = masked_attention(q, k_all, v_all, mask)\n'
                    '    return out, k_all, v_all\n')),
    Accepted(cell='cached_attention_step', name='manual scores with an offset tril',
             source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                    '    k_all = torch.cat((k_cache, k_new), dim=2)\n'
                    '    v_all = torch.cat((v_cache, v_new), dim=2)\n'
                    '    Tq, Tk = q.shape[-2], k_all.shape[-2]\n'
                    '    scores = q @ k_all.transpose(-2, -1) / math.sqrt(q.shape[-1])\n'
                    '    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)\n'
                    '    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)\n'
                    '    return weights @ v_all, k_all, v_all\n')),
    Accepted(cell='cached_attention_step', name='F.scaled_dot_product_attention with the boolean mask',
             source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                    '    k_all, v_all = torch.cat([k_cache, k_new], -2), torch.cat([v_cache, v_new], -2)\n'
                    '    mask = causal_mask(q.shape[-2], k_all.shape[-2], device=q.device)\n'
                    '    return F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask), k_all, v_all\n')),
    Accepted(cell='last_token_pool', name='advanced indexing with arange on device',
             source=('def last_token_pool(hidden, lengths):\n'
                    '    return hidden[torch.arange(hidden.size(0), device=hidden.device), lengths - 1]\n')),
    Accepted(cell='last_token_pool', name='gather along time',
             source=('def last_token_pool(hidden, lengths):\n'
                    '    idx = (lengths - 1).view(-1, 1, 1).expand(-1, 1, hidden.size(-1))\n'
                    '    return hidden.gather(1, idx.to(hidden.device)).squeeze(1)\n')),
    Accepted(cell='last_token_pool', name='take_along_dim',
             source=('def last_token_pool(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:\n'
                    '    return torch.take_along_dim(hidden, (lengths.long() - 1)[:, None, None], dim=1).squeeze(1)\n')),
    Accepted(cell='last_token_pool', name='python range as the batch index',
             source=('def last_token_pool(hidden, lengths):\n'
                    '    return hidden[range(len(lengths)), lengths - 1]\n')),
    # fourth blind red team: a CPU arange used only as an index works on every device (PyTorch moves an
    # index to the indexed tensor's device); 00's device rule says so
    Accepted(cell='last_token_pool', name='CPU arange as the batch index',
             source=('def last_token_pool(hidden, lengths):\n'
                    '    rows = torch.arange(hidden.shape[0])\n'
                    '    return hidden[rows, lengths - 1]\n')),
]

# Escapes of the second blind red team (issue 14 round 2): each kept full marks before the tests were strengthened.
_INIT_BODY = ('        for m in model.modules():\n'
              '            if isinstance(m, (nn.Linear, nn.Embedding)):\n'
              '                m.weight.normal_(0.0, 0.02)\n'
              '                if getattr(m, "bias", None) is not None:\n'
              '                    m.bias.zero_()\n')
_INIT_RESIDUAL = ('        std = 0.02 / math.sqrt(2 * len(model.blocks))\n'
                  '        for block in model.blocks:\n'
                  '            block.attn.proj.weight.normal_(0.0, std)\n'
                  '            block.ffn.fc2.weight.normal_(0.0, std)\n'
                  '    model.lm_head.weight = model.wte.weight\n'
                  '    return model\n')
MISTAKES += [
    Mistake(cell='next_token_batch', name="starts.unsqueeze_(1) changes the caller's starts", kind='structure',
            rejected_by=('test_next_token_batch',),
            replace=(("positions = starts[:, None] + offsets", "positions = starts.unsqueeze_(1) + offsets"),)),
    Mistake(cell='next_token_batch', name='returns a list [x, y] instead of a tuple', kind='structure',
            rejected_by=('test_next_token_batch',),
            replace=(("return x, y", "return [x, y]"),)),
    Mistake(cell='init_gpt2', name="every parameter named 'bias' zeroed (LayerNorm biases too)", kind='argument',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    n_layer = len(model.blocks)\n'
                    '    with torch.no_grad():\n'
                    '        for name, p in model.named_parameters():\n'
                    '            if name.endswith("bias"):\n'
                    '                p.zero_()\n'
                    '            elif p.dim() >= 2:\n'
                    '                residual = name.endswith(("attn.proj.weight", "ffn.fc2.weight"))\n'
                    '                p.normal_(0.0, 0.02 / math.sqrt(2 * n_layer) if residual else 0.02)\n'
                    '    model.lm_head.weight = model.wte.weight\n'
                    '    return model\n')),
    Mistake(cell='init_gpt2', name='LayerNorms reset to ones/zeros instead of left alone', kind='argument',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    with torch.no_grad():\n'
                    + _INIT_BODY +
                    '            elif m.__class__.__name__ == "LayerNorm":\n'
                    '                m.weight.fill_(1.0)\n'
                    '                m.bias.zero_()\n'
                    + _INIT_RESIDUAL)),
    Mistake(cell='init_gpt2', name='reseeds the global RNG inside (torch.manual_seed(0))', kind='statistics',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    torch.manual_seed(0)\n'
                    '    with torch.no_grad():\n'
                    + _INIT_BODY + _INIT_RESIDUAL)),
    Mistake(cell='init_gpt2', name='model.requires_grad_(False) for the in-place init, never undone', kind='autograd',
            rejected_by=('test_init_gpt2',),
            source=('def init_gpt2_(model):\n'
                    '    model.requires_grad_(False)\n'
                    '    if True:\n'
                    + _INIT_BODY + _INIT_RESIDUAL)),
    Mistake(cell='top_k_filter', name='detach().clone(), then -inf written in', kind='autograd',
            rejected_by=('test_top_k_filter',),
            source=('def top_k_filter(logits, k):\n'
                    '    out = logits.detach().clone()\n'
                    '    kth = torch.topk(out, k).values[..., -1:]\n'
                    '    out[out < kth] = float("-inf")\n'
                    '    return out\n')),
    Mistake(cell='top_p_filter', name='logits detached first (sampling needs no gradient)', kind='autograd',
            rejected_by=('test_top_p_filter',),
            replace=(("    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)\n",
                      "    logits = logits.detach()\n    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)\n"),)),
    Mistake(cell='cached_attention_step', name='whole step under torch.no_grad() (a cache is for inference)', kind='autograd',
            rejected_by=('test_cached_attention_step',),
            source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                    '    with torch.no_grad():\n'
                    '        k_all = torch.cat([k_cache, k_new], dim=-2)\n'
                    '        v_all = torch.cat([v_cache, v_new], dim=-2)\n'
                    '        out, _ = masked_attention(q, k_all, v_all, causal_mask(q.size(-2), k_all.size(-2), device=q.device))\n'
                    '    return out, k_all, v_all\n')),
    Mistake(cell='cached_attention_step', name='updated caches detached', kind='autograd',
            rejected_by=('test_cached_attention_step',),
            replace=(("k_all = torch.cat([k_cache, k_new], dim=-2)", "k_all = torch.cat([k_cache, k_new], dim=-2).detach()"),
                     ("v_all = torch.cat([v_cache, v_new], dim=-2)", "v_all = torch.cat([v_cache, v_new], dim=-2).detach()"))),
    Mistake(cell='last_token_pool', name='gather(...).squeeze() drops the batch axis when B = 1', kind='boundary',
            rejected_by=('test_last_token_pool',),
            source=('def last_token_pool(hidden, lengths):\n'
                    '    index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, hidden.size(-1))\n'
                    '    return hidden.gather(1, index.to(hidden.device)).squeeze()\n')),
]

# Right answers of the second red team; loops are only slower (the prose says so).
ACCEPTED += [
    Accepted(cell='next_token_batch', name='Python loop over the starts, stacked (nanoGPT get_batch)',
             source=('def next_token_batch(data, starts, block_size):\n'
                     '    x = torch.stack([data[s:s + block_size] for s in starts])\n'
                     '    y = torch.stack([data[s + 1:s + 1 + block_size] for s in starts])\n'
                     '    return x, y\n')),
    Accepted(cell='next_token_batch', name='loop over time offsets, stacked on dim 1',
             source=('def next_token_batch(data, starts, block_size):\n'
                     '    x = torch.stack([data[starts + t] for t in range(block_size)], dim=1)\n'
                     '    y = torch.stack([data[starts + t + 1] for t in range(block_size)], dim=1)\n'
                     '    return x, y\n')),
    Accepted(cell='next_token_batch', name='as_strided windows of block_size + 1',
             source=('def next_token_batch(data, starts, block_size):\n'
                     '    n = data.numel() - block_size\n'
                     '    windows = data.contiguous().as_strided((n, block_size + 1), (1, 1))[starts]\n'
                     '    return windows[:, :-1], windows[:, 1:]\n')),
    Accepted(cell='init_gpt2', name='.data.normal_ without no_grad, tie first',
             source=('def init_gpt2_(model):\n'
                     '    model.lm_head.weight = model.wte.weight\n'
                     '    std_res = 0.02 / math.sqrt(2 * len(model.blocks))\n'
                     '    for m in model.modules():\n'
                     '        if isinstance(m, (nn.Linear, nn.Embedding)):\n'
                     '            m.weight.data.normal_(0.0, 0.02)\n'
                     '            if getattr(m, "bias", None) is not None:\n'
                     '                m.bias.data.zero_()\n'
                     '    for block in model.blocks:\n'
                     '        block.attn.proj.weight.data.normal_(0.0, std_res)\n'
                     '        block.ffn.fc2.weight.data.normal_(0.0, std_res)\n'
                     '    return model\n')),
    Accepted(cell='top_k_filter', name='kthvalue of V - k + 1 and torch.where',
             source=('def top_k_filter(logits, k):\n'
                     '    kth = logits.kthvalue(logits.size(-1) - k + 1, dim=-1, keepdim=True).values\n'
                     '    return torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf")))\n')),
    Accepted(cell='top_p_filter', name='top token forced kept (p = 1 not special-cased: p < 1 assumed)',
             source=('def top_p_filter(logits, p):\n'
                     '    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)\n'
                     '    probs = torch.softmax(sorted_logits, dim=-1)\n'
                     '    keep_sorted = probs.cumsum(-1) - probs < p\n'
                     '    keep_sorted[..., 0] = True\n'
                     '    keep = keep_sorted.scatter(-1, order, keep_sorted)\n'
                     '    return logits.masked_fill(~keep, float("-inf"))\n')),
    Accepted(cell='top_p_filter', name='ascending sort, flipped',
             source=('def top_p_filter(logits, p):\n'
                     '    asc, order = torch.sort(logits, dim=-1)\n'
                     '    desc, order = asc.flip(-1), order.flip(-1)\n'
                     '    probs = torch.softmax(desc, dim=-1)\n'
                     '    drop_sorted = probs.cumsum(-1) - probs >= p\n'
                     '    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)\n'
                     '    return logits.masked_fill(drop, float("-inf"))\n')),
    Accepted(cell='cached_attention_step', name='last T_q rows of the square causal mask',
             source=('def cached_attention_step(q, k_new, v_new, k_cache, v_cache):\n'
                     '    k_all = torch.cat([k_cache, k_new], dim=-2)\n'
                     '    v_all = torch.cat([v_cache, v_new], dim=-2)\n'
                     '    T_k = k_all.size(-2)\n'
                     '    mask = causal_mask(T_k, device=q.device)[T_k - q.size(-2):]\n'
                     '    out, _ = masked_attention(q, k_all, v_all, mask)\n'
                     '    return out, k_all, v_all\n')),
    Accepted(cell='last_token_pool', name='Python loop with torch.stack',
             source=('def last_token_pool(hidden, lengths):\n'
                     '    return torch.stack([hidden[b, int(n) - 1] for b, n in enumerate(lengths)])\n')),
    Accepted(cell='last_token_pool', name="one-hot weights in hidden's dtype",
             source=('def last_token_pool(hidden, lengths):\n'
                     '    onehot = F.one_hot(lengths.to(hidden.device) - 1, hidden.size(1)).to(hidden.dtype)\n'
                     '    return torch.einsum("bt,btd->bd", onehot, hidden)\n')),
]

# The training step of the student's own (issue 28 item 5): the silent bugs of a training loop.
MISTAKES += [
    Mistake(cell='train_step', name='no zero_grad (gradients accumulate across steps)', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    optimizer.zero_grad()\n", ""),)),
    Mistake(cell='train_step', name='gradients clipped after the optimizer step', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    optimizer.step()\n",
                      "    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"),)),
    Mistake(cell='train_step', name='optimizer step before backward', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    optimizer.step()\n",
                      "    optimizer.step()\n    loss.backward()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"),)),
    Mistake(cell='train_step', name='zero_grad between backward and step (the step sees no gradient)', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    optimizer.zero_grad()\n    loss.backward()\n", "    loss.backward()\n    optimizer.zero_grad()\n"),)),
    Mistake(cell='train_step', name='model left in eval mode (no model.train())', kind='structure',
            rejected_by=('test_train_step',),
            replace=(("    model.train()\n", ""),)),
    Mistake(cell='train_step', name='model.train() only after the forward pass (dropout off in it)', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    model.train()\n", ""), ("    optimizer.step()\n", "    optimizer.step()\n    model.train()\n"))),
    Mistake(cell='train_step', name='returns the loss tensor: a running list of them keeps every graph alive', kind='autograd',
            rejected_by=('test_train_step',),
            replace=(("return loss.item()", "return loss"),)),
    Mistake(cell='train_step', name='running loss accumulated with its graph, returned as a tensor', kind='autograd',
            rejected_by=('test_train_step',),
            source=('running_loss = 0.0\n'
                    '\n'
                    'def train_step(model, x, y, optimizer, scheduler, max_norm):\n'
                    '    global running_loss\n'
                    '    model.train()\n'
                    '    logits = model(x)\n'
                    '    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))\n'
                    '    optimizer.zero_grad()\n'
                    '    loss.backward()\n'
                    '    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n'
                    '    optimizer.step()\n'
                    '    scheduler.step()\n'
                    '    running_loss = running_loss + loss\n'
                    '    return loss.detach()\n')),
    Mistake(cell='train_step', name='scheduler never stepped', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    scheduler.step()\n", ""),)),
    Mistake(cell='train_step', name='scheduler stepped before the optimizer', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    optimizer.step()\n    scheduler.step()\n", "    scheduler.step()\n    optimizer.step()\n"),)),
    Mistake(cell='train_step', name='max_norm ignored (clips to 1.0)', kind='argument',
            rejected_by=('test_train_step',),
            replace=(("clip_grad_norm_(model.parameters(), max_norm)", "clip_grad_norm_(model.parameters(), 1.0)"),)),
    Mistake(cell='train_step', name='no gradient clipping', kind='argument',
            rejected_by=('test_train_step',),
            replace=(("    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n", ""),)),
    Mistake(cell='train_step', name='clip_grad_value_ instead of clipping the global norm', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("clip_grad_norm_(model.parameters(), max_norm)", "clip_grad_value_(model.parameters(), max_norm)"),)),
    Mistake(cell='train_step', name='returns the loss after the update (a second forward pass)', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    return loss.item()", "    with torch.no_grad():\n        return F.cross_entropy(model(x).reshape(-1, logits.size(-1)), y.reshape(-1)).item()"),)),
    Mistake(cell='train_step', name='reference import (the course loop step)', kind='reference',
            rejected_by=('test_train_step',),
            source='from course_utils.gpt import lm_train_step as train_step\n'),
    Mistake(cell='train_step', name='calls the course step inside a def of its own', kind='reference',
            rejected_by=('test_train_step',),
            source=('from course_utils import gpt as _g\n'
                    '\n'
                    'def train_step(model, x, y, optimizer, scheduler, max_norm):\n'
                    '    return _g.lm_train_step(model, x, y, optimizer, scheduler, max_norm)\n')),
]

ACCEPTED += [
    Accepted(cell='train_step', name='zero_grad first, view(-1) and set_to_none=False',
             source=('def train_step(model, x, y, optimizer, scheduler, max_norm):\n'
                     '    optimizer.zero_grad(set_to_none=False)\n'
                     '    model.train()\n'
                     '    logits = model(x)\n'
                     '    B, T, V = logits.shape\n'
                     '    loss = F.cross_entropy(logits.view(B * T, V), y.view(B * T))\n'
                     '    loss.backward()\n'
                     '    nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)\n'
                     '    optimizer.step()\n'
                     '    scheduler.step()\n'
                     '    return float(loss.detach())\n')),
    Accepted(cell='train_step', name='model.zero_grad and cross_entropy over (B, V, T)',
             source=('def train_step(model, x, y, optimizer, scheduler, max_norm):\n'
                     '    model.train()\n'
                     '    model.zero_grad(set_to_none=True)\n'
                     '    loss = F.cross_entropy(model(x).transpose(1, 2), y)\n'
                     '    loss.backward()\n'
                     '    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm)\n'
                     '    optimizer.step()\n'
                     '    scheduler.step()\n'
                     '    return loss.item()\n')),
]

# fourth blind red team (issue 24)
MISTAKES += [
    Mistake(cell='train_step', name='zero_grad only at the end of the step (stale .grad reaches the update)', kind='logic',
            rejected_by=('test_train_step',),
            replace=(("    optimizer.zero_grad()\n    loss.backward()\n", "    loss.backward()\n"),
                     ("    optimizer.step()\n", "    optimizer.step()\n    optimizer.zero_grad()\n"))),
]
