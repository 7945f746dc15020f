"""Curated wrong answers of notebook 11 (a modern LM); each must be rejected."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    # ------------------------------------------------------------------ merge_word
    Mistake(cell="merge_word", name="merges the first mergeable pair from the left, not the lowest rank", kind="logic",
            rejected_by=("test_merge_word",),
            source=('def merge_word(symbols, ranks):\n'
                    '    symbols = list(symbols)\n'
                    '    merged = True\n'
                    '    while merged:\n'
                    '        merged = False\n'
                    '        for i in range(len(symbols) - 1):\n'
                    '            if (symbols[i], symbols[i + 1]) in ranks:\n'
                    '                symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]\n'
                    '                merged = True\n'
                    '                break\n'
                    '    return symbols\n')),
    Mistake(cell="merge_word", name="one merge only (no loop until none applies)", kind="logic",
            rejected_by=("test_merge_word",),
            replace=(("symbols = merged", "return merged"),)),
    Mistake(cell="merge_word", name="pairs that are not merges get rank 0", kind="logic",
            rejected_by=("test_merge_word",),
            replace=(("ranks.get(pair, math.inf)", "ranks.get(pair, 0)"),)),
    Mistake(cell="merge_word", name="min over the pairs of a one-symbol piece (crashes on digits)", kind="boundary",
            rejected_by=("test_merge_word",),
            source=('def merge_word(symbols, ranks):\n'
                    '    symbols = list(symbols)\n'
                    '    while True:\n'
                    '        rank, i = min((ranks.get(p, math.inf), i) for i, p in enumerate(zip(symbols, symbols[1:])))\n'
                    '        if rank == math.inf:\n'
                    '            return symbols\n'
                    '        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]\n')),
    Mistake(cell="merge_word", name="modifies the list it was given", kind="structure",
            rejected_by=("test_merge_word",),
            source=('def merge_word(symbols, ranks):\n'
                    '    while len(symbols) > 1:\n'
                    '        rank, i = min((ranks.get(p, math.inf), i) for i, p in enumerate(zip(symbols, symbols[1:])))\n'
                    '        if rank == math.inf:\n'
                    '            break\n'
                    '        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]\n'
                    '    return symbols\n')),
    Mistake(cell="merge_word", name="merges only the leftmost occurrence of the best pair per round", kind="logic",
            rejected_by=("test_merge_word",),
            source=('def merge_word(symbols, ranks):\n'
                    '    symbols = list(symbols)\n'
                    '    while True:\n'
                    '        candidates = [(ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in ranks]\n'
                    '        if not candidates:\n'
                    '            return symbols\n'
                    '        _, i = min(candidates)\n'
                    '        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]\n')),
    Mistake(cell="merge_word", name="most frequent pair of the piece first, rank only breaks ties", kind="logic",
            rejected_by=("test_merge_word",),
            replace=(("best = min(pairs, key=lambda pair: ranks.get(pair, math.inf))",
                      "best = min(pairs, key=lambda pair: (-pairs.count(pair) if pair in ranks else 1, ranks.get(pair, math.inf)))"),)),
    Mistake(cell="merge_word", name="one pass over the merges sorted by rank", kind="logic",
            rejected_by=("test_merge_word",),
            source=('def merge_word(symbols, ranks):\n'
                    '    word = list(symbols)\n'
                    '    for (a, b), _ in sorted(ranks.items(), key=lambda item: item[1]):\n'
                    '        out, i = [], 0\n'
                    '        while i < len(word):\n'
                    '            if i < len(word) - 1 and word[i] == a and word[i + 1] == b:\n'
                    '                out.append(a + b)\n'
                    '                i += 2\n'
                    '            else:\n'
                    '                out.append(word[i])\n'
                    '                i += 1\n'
                    '        word = out\n'
                    '    return word\n')),
    Mistake(cell="merge_word", name="reference import", kind="reference",
            rejected_by=("test_merge_word",),
            source="from course_utils.bpe import merge_word\n"),
    # ------------------------------------------------------------------ tokens_to_text
    Mistake(cell="tokens_to_text", name="decodes each token on its own", kind="logic",
            rejected_by=("test_tokens_to_text",),
            source=('def tokens_to_text(tokens):\n'
                    '    byte_decoder = {c: b for b, c in bytes_to_unicode().items()}\n'
                    '    return "".join(bytes(byte_decoder[c] for c in t).decode("utf-8", errors="replace") for t in tokens)\n')),
    Mistake(cell="tokens_to_text", name="strict UTF-8 decoding (a cut character raises)", kind="boundary",
            rejected_by=("test_tokens_to_text",),
            replace=(('data.decode("utf-8", errors="replace")', 'data.decode("utf-8")'),)),
    Mistake(cell="tokens_to_text", name="joins the token strings (byte table not inverted)", kind="logic",
            rejected_by=("test_tokens_to_text",),
            source='def tokens_to_text(tokens):\n    return "".join(tokens).replace("Ġ", " ")\n'),
    Mistake(cell="tokens_to_text", name="latin-1 instead of UTF-8", kind="logic",
            rejected_by=("test_tokens_to_text",),
            replace=(('data.decode("utf-8", errors="replace")', 'data.decode("latin-1")'),)),
    # ------------------------------------------------------------------ RMSNorm
    Mistake(cell="rms_norm", name="LayerNorm-style mean subtraction", kind="logic",
            rejected_by=("test_rms_norm",),
            replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                      "x = x - x.mean(dim=-1, keepdim=True)\n"
                      "        return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight"),)),
    Mistake(cell="rms_norm", name="eps outside the square root", kind="logic",
            rejected_by=("test_rms_norm",),
            replace=(("torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
                      "(torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + self.eps)"),)),
    Mistake(cell="rms_norm", name="eps argument ignored (1e-5 hard-coded)", kind="argument",
            rejected_by=("test_rms_norm",),
            replace=(("keepdim=True) + self.eps)", "keepdim=True) + 1e-5)"),)),
    Mistake(cell="rms_norm", name="normalises the input in place", kind="autograd",
            rejected_by=("test_rms_norm",),
            replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                      "x /= torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
                      "        return x * self.weight"),)),
    Mistake(cell="rms_norm", name="computed in float32 and not cast back", kind="dtype",
            rejected_by=("test_rms_norm",),
            replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                      "x = x.float()\n"
                      "        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight.float()"),)),
    # ------------------------------------------------------------------ SwiGLU
    Mistake(cell="swiglu", name="SiLU on the up branch instead of the gate", kind="logic",
            rejected_by=("test_swiglu",),
            replace=(("F.silu(self.gate_proj(x)) * self.up_proj(x)", "self.gate_proj(x) * F.silu(self.up_proj(x))"),)),
    Mistake(cell="swiglu", name="sigmoid gate (GLU) instead of SiLU", kind="logic",
            rejected_by=("test_swiglu",),
            replace=(("F.silu(self.gate_proj(x))", "torch.sigmoid(self.gate_proj(x))"),)),
    # ------------------------------------------------------------------ apply_rope
    Mistake(cell="apply_rope", name="interleaved pairs (notebook 06) instead of rotate-half", kind="logic",
            rejected_by=("test_apply_rope",),
            replace=(("x1, x2 = x[..., :half], x[..., half:]\n    rotated = torch.cat((-x2, x1), dim=-1)",
                      "x1, x2 = x[..., 0::2], x[..., 1::2]\n    rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)"),)),
    Mistake(cell="apply_rope", name="halves swapped without the minus sign", kind="logic",
            rejected_by=("test_apply_rope",),
            replace=(("torch.cat((-x2, x1), dim=-1)", "torch.cat((x2, x1), dim=-1)"),)),
    Mistake(cell="apply_rope", name="rotation in the wrong direction", kind="logic",
            rejected_by=("test_apply_rope",),
            replace=(("torch.cat((-x2, x1), dim=-1)", "torch.cat((x2, -x1), dim=-1)"),)),
    Mistake(cell="apply_rope", name="reference import", kind="reference",
            rejected_by=("test_apply_rope",),
            source="from course_utils.llama import apply_rope_rotate_half as apply_rope\n"),
    # ------------------------------------------------------------------ repeat_kv
    Mistake(cell="repeat_kv", name="Tensor.repeat tiles the heads (a, b, a, b)", kind="logic",
            rejected_by=("test_repeat_kv",),
            source="def repeat_kv(x, n_rep):\n    return x.repeat(1, n_rep, 1, 1)\n"),
    Mistake(cell="repeat_kv", name="n_rep ignored (always 2)", kind="argument",
            rejected_by=("test_repeat_kv",),
            source="def repeat_kv(x, n_rep):\n    return x.repeat_interleave(2, dim=1)\n"),
    # ------------------------------------------------------------------ GQAttention
    Mistake(cell="gq_attention", name="no causal mask", kind="logic",
            rejected_by=("test_gq_attention",),
            replace=(("is_causal=True", "is_causal=False"),)),
    Mistake(cell="gq_attention", name="RoPE applied to the values too", kind="logic",
            rejected_by=("test_gq_attention",),
            replace=(("q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
                      "q, k, v = apply_rope(q, cos, sin), apply_rope(k, cos, sin), apply_rope(v, cos, sin)"),)),
    Mistake(cell="gq_attention", name="heads split with a view, no transpose", kind="logic",
            rejected_by=("test_gq_attention",),
            replace=((".view(B, T, self.n_heads, self.head_dim).transpose(1, 2)", ".view(B, self.n_heads, T, self.head_dim)"),
                     (".view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)", ".view(B, self.n_kv_heads, T, self.head_dim)"))),
    Mistake(cell="gq_attention", name="kv heads tiled with Tensor.repeat", kind="logic",
            rejected_by=("test_gq_attention",),
            replace=(("k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"),)),
    Mistake(cell="gq_attention", name="causal mask built without device", kind="device",
            rejected_by=("test_gq_attention",),
            replace=(("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                      "mask = torch.ones(T, T, dtype=torch.bool).tril()\n"
                      "        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)\n"
                      "        y = att.masked_fill(~mask, float('-inf')).softmax(dim=-1) @ v"),)),
    Mistake(cell="gq_attention", name="scores scaled by sqrt(d_model) instead of sqrt(head_dim)", kind="logic",
            rejected_by=("test_gq_attention",),
            replace=(("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                      "y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(x.size(-1)))"),)),
    # the blind red team's escapes (2026-11-29): each passed every visible test before
    Mistake(cell="gq_attention", name="attention weights detached (q and k get no gradient)", kind="autograd",
            rejected_by=("test_gq_attention",),
            replace=(("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                      "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)\n"
                      "        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))\n"
                      "        y = torch.softmax(scores.masked_fill(~keep, float('-inf')), dim=-1).detach() @ v"),)),
    Mistake(cell="gq_attention", name="ignores cos/sin and rebuilds them with base 10000", kind="argument",
            rejected_by=("test_gq_attention",),
            replace=(("q, k = apply_rope(q, cos, sin)",
                      "cos, sin = rope_cos_sin(T, self.head_dim, 10000.0, device=x.device, dtype=x.dtype)\n"
                      "        q, k = apply_rope(q, cos, sin)"),)),
    Mistake(cell="gq_attention", name="each kv head repeated n_kv_heads times (right only when n_heads = n_kv_heads ** 2)",
            kind="logic", rejected_by=("test_gq_attention",),
            replace=(("n_rep = self.n_heads // self.n_kv_heads", "n_rep = self.n_kv_heads"),)),
    Mistake(cell="gq_attention", name="bare squeeze() before the output projection (B = 1)", kind="boundary",
            rejected_by=("test_gq_attention",),
            replace=(("reshape(B, T, self.n_heads * self.head_dim))", "reshape(B, T, self.n_heads * self.head_dim).squeeze())"),)),
    # ------------------------------------------------------------------ DecoderBlock / MyLlama
    Mistake(cell="llama_forward", name="post-norm block", kind="logic",
            rejected_by=("test_llama_forward",),
            replace=(("x = x + self.attn(self.attn_norm(x), cos, sin)\n        return x + self.ffn(self.ffn_norm(x))",
                      "x = self.attn_norm(x + self.attn(x, cos, sin))\n        return self.ffn_norm(x + self.ffn(x))"),)),
    Mistake(cell="llama_forward", name="final norm forgotten", kind="logic",
            rejected_by=("test_llama_forward",),
            replace=(("return self.lm_head(self.norm(x))", "return self.lm_head(x)"),)),
    Mistake(cell="llama_forward", name="RoPE tables on the default device", kind="device",
            rejected_by=("test_llama_forward",),
            replace=(("device=x.device, dtype=x.dtype)", "dtype=x.dtype)"),)),
    Mistake(cell="llama_forward", name="RoPE tables in float32 whatever the model's dtype", kind="dtype",
            rejected_by=("test_llama_forward",),
            replace=(("device=x.device, dtype=x.dtype)", "device=x.device)"),)),
    Mistake(cell="llama_forward", name="RoPE base hard-coded to 10000", kind="argument",
            rejected_by=("test_llama_forward",),
            replace=(("self.config.rope_base, device", "10000.0, device"),)),
    Mistake(cell="llama_forward", name="in-place residual (x += ...)", kind="autograd",
            rejected_by=("test_llama_forward",),
            replace=(("x = x + self.attn(self.attn_norm(x), cos, sin)", "x += self.attn(self.attn_norm(x), cos, sin)"),)),
    Mistake(cell="llama_forward", name="embedding output detached", kind="autograd",
            rejected_by=("test_llama_forward",),
            replace=(("x = self.embed(idx)", "x = self.embed(idx).detach()"),)),
    Mistake(cell="llama_forward", name="blocks run under torch.no_grad()", kind="autograd",
            rejected_by=("test_llama_forward",),
            replace=(("        for block in self.blocks:\n            x = block(x, cos, sin)\n",
                      "        with torch.no_grad():\n            for block in self.blocks:\n                x = block(x, cos, sin)\n"),)),
    Mistake(cell="llama_forward", name="head applied with the embedding's weight detached", kind="autograd",
            rejected_by=("test_llama_forward",),
            replace=(("return self.lm_head(self.norm(x))", "return F.linear(self.norm(x), self.embed.weight.detach())"),)),
    Mistake(cell="llama_forward", name="bare squeeze() on the logits (B = 1)", kind="boundary",
            rejected_by=("test_llama_forward",),
            replace=(("return self.lm_head(self.norm(x))", "return self.lm_head(self.norm(x)).squeeze()"),)),
    # ------------------------------------------------------------------ LoRALinear
    Mistake(cell="lora_linear", name="scaling alpha instead of alpha / rank", kind="logic",
            rejected_by=("test_lora_linear",),
            replace=(("self.scaling = alpha / rank", "self.scaling = alpha"),)),
    Mistake(cell="lora_linear", name="A zero and B random (nothing can learn)", kind="logic",
            rejected_by=("test_lora_linear",),
            replace=(("torch.randn(rank, base.in_features, device=w.device, dtype=w.dtype) / math.sqrt(base.in_features)",
                      "torch.zeros(rank, base.in_features, device=w.device, dtype=w.dtype)"),
                     ("torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype)",
                      "torch.randn(base.out_features, rank, device=w.device, dtype=w.dtype)"))),
    Mistake(cell="lora_linear", name="base layer not frozen", kind="structure",
            rejected_by=("test_lora_linear",),
            replace=(("        for p in self.base.parameters():\n            p.requires_grad_(False)\n", ""),)),
    Mistake(cell="lora_linear", name="LoRA matrices created in the default dtype", kind="dtype",
            rejected_by=("test_lora_linear",),
            replace=((", device=w.device, dtype=w.dtype)", ", device=w.device)"),)),
    Mistake(cell="lora_linear", name="LoRA matrices created on the default device", kind="device",
            rejected_by=("test_lora_linear",),
            replace=(("device=w.device, dtype=w.dtype", "dtype=w.dtype"),)),
    Mistake(cell="lora_linear", name="nn.Parameter(...).to(device, dtype): a plain tensor, not registered, once the dtype changes",
            kind="dtype", rejected_by=("test_lora_linear",),
            replace=(("nn.Parameter(torch.randn(rank, base.in_features, device=w.device, dtype=w.dtype) / math.sqrt(base.in_features))",
                      "nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features)).to(w.device, w.dtype)"),
                     ("nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))",
                      "nn.Parameter(torch.zeros(base.out_features, rank)).to(w.device, w.dtype)"))),
    Mistake(cell="lora_linear", name="scaling alpha // rank (floor division)", kind="logic",
            rejected_by=("test_lora_linear",),
            replace=(("self.scaling = alpha / rank", "self.scaling = alpha // rank"),)),
    Mistake(cell="lora_linear", name="rank and alpha not stored", kind="structure",
            rejected_by=("test_lora_linear",),
            replace=(("self.base, self.rank, self.alpha = base, rank, alpha", "self.base = base"),)),
    Mistake(cell="lora_linear", name="reference import", kind="reference",
            rejected_by=("test_lora_linear",),
            source="from course_utils.lora import LoRALinear\n"),
    Mistake(cell="lora_linear", name="plain tensors instead of Parameters", kind="autograd",
            rejected_by=("test_lora_linear",),
            replace=(("self.lora_A = nn.Parameter(", "self.lora_A = ("), ("self.lora_B = nn.Parameter(", "self.lora_B = ("))),
    # ------------------------------------------------------------------ second blind red team (round 2)
    Mistake(cell="tokens_to_text", name="strips the leading space of the decoded text", kind="boundary",
            rejected_by=("test_tokens_to_text",),
            replace=(('return data.decode("utf-8", errors="replace")', 'return data.decode("utf-8", errors="replace").lstrip(" ")'),)),
    Mistake(cell="rms_norm", name="gain applied as self.weight.data (never receives a gradient)", kind="autograd",
            rejected_by=("test_rms_norm",),
            replace=(("+ self.eps) * self.weight", "+ self.eps) * self.weight.data"),)),
    Mistake(cell="gq_attention", name="future masked with -1e4 instead of -inf (leaks when scores are large)", kind="boundary",
            rejected_by=("test_gq_attention",),
            replace=(("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                      "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)\n"
                      "        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)\n"
                      "        y = torch.softmax(scores.masked_fill(future, -1e4), dim=-1) @ v"),)),
    Mistake(cell="llama_forward", name="blocks written into x in place (x.copy_): backward fails", kind="autograd",
            rejected_by=("test_llama_forward",),
            replace=(("            x = block(x, cos, sin)", "            x.copy_(block(x, cos, sin))"),)),
    Mistake(cell="lora_linear", name="frozen base run under torch.no_grad() (cuts the gradient to x)", kind="autograd",
            rejected_by=("test_lora_linear",),
            replace=(("return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling",
                      "with torch.no_grad():\n"
                      "            h = self.base(x)\n"
                      "        return h + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling"),)),
    Mistake(cell="lora_linear", name="frozen base fed x.detach()", kind="autograd",
            rejected_by=("test_lora_linear",),
            replace=(("return self.base(x) +", "return self.base(x.detach()) +"),)),
    Mistake(cell="lora_linear", name="A and B shaped from slices of the weight (wrong when rank > out_features)", kind="boundary",
            rejected_by=("test_lora_linear",),
            replace=(("nn.Parameter(torch.randn(rank, base.in_features, device=w.device, dtype=w.dtype) / math.sqrt(base.in_features))",
                      "nn.Parameter(torch.randn_like(w[:rank]) / math.sqrt(base.in_features))"),
                     ("nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))",
                      "nn.Parameter(torch.zeros_like(w[:, :rank]))"))),
]

# Right answers in other styles than the solution: every test must accept them.
ACCEPTED = [
    Accepted(cell="merge_word", name="tuple slices compared with the best pair",
             source=('def merge_word(symbols, ranks):\n'
                     '    word = tuple(symbols)\n'
                     '    while len(word) > 1:\n'
                     '        ranked = [(ranks[p], p) for p in zip(word, word[1:]) if p in ranks]\n'
                     '        if not ranked:\n'
                     '            break\n'
                     '        a, b = min(ranked)[1]\n'
                     '        out, i = [], 0\n'
                     '        while i < len(word):\n'
                     '            if word[i:i + 2] == (a, b):\n'
                     '                out.append(a + b)\n'
                     '                i += 2\n'
                     '            else:\n'
                     '                out.append(word[i])\n'
                     '                i += 1\n'
                     '        word = tuple(out)\n'
                     '    return list(word)\n')),
    Accepted(cell="tokens_to_text", name="bytearray loop",
             source=('def tokens_to_text(tokens):\n'
                     '    inverse = {v: k for k, v in bytes_to_unicode().items()}\n'
                     '    out = bytearray()\n'
                     '    for token in tokens:\n'
                     '        out.extend(inverse[ch] for ch in token)\n'
                     '    return out.decode("utf-8", "replace")\n')),
    Accepted(cell="rms_norm", name="rsqrt and x * x",
             replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                       "return self.weight * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps))"),)),
    Accepted(cell="swiglu", name="SiLU written as z * sigmoid(z)",
             replace=(("return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))",
                       "g = self.gate_proj(x)\n        return self.down_proj(g * torch.sigmoid(g) * self.up_proj(x))"),)),
    Accepted(cell="apply_rope", name="chunk and a rotate_half helper",
             source=('def rotate_half(x):\n'
                     '    a, b = x.chunk(2, dim=-1)\n'
                     '    return torch.cat([-b, a], dim=-1)\n'
                     '\n'
                     'def apply_rope(x, cos, sin):\n'
                     '    return (x * cos) + (rotate_half(x) * sin)\n')),
    Accepted(cell="apply_rope", name="explicit halves with the first half of cos/sin only (the halves are equal)",
             source=('def apply_rope(x, cos, sin):\n'
                     '    h = x.shape[-1] // 2\n'
                     '    c, s = cos[..., :h], sin[..., :h]\n'
                     '    x1, x2 = x[..., :h], x[..., h:]\n'
                     '    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)\n')),
    Accepted(cell="repeat_kv", name="repeat_interleave",
             source="def repeat_kv(x, n_rep):\n    return x.repeat_interleave(n_rep, dim=1)\n"),
    Accepted(cell="repeat_kv", name="stack copies on a new axis and flatten",
             source="def repeat_kv(x, n_rep):\n    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)\n"),
    Accepted(cell="gq_attention", name="einsum scores and an explicit causal mask on the input's device",
             replace=(("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                       "scores = torch.einsum('bhqd,bhkd->bhqk', q, k) / math.sqrt(self.head_dim)\n"
                       "        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()\n"
                       "        y = torch.einsum('bhqk,bhkd->bhqd', scores.masked_fill(~mask, float('-inf')).softmax(-1), v)"),)),
    Accepted(cell="lora_linear", name="F.linear twice, kaiming-uniform A",
             source=('class LoRALinear(nn.Module):\n'
                     '    def __init__(self, base, rank=8, alpha=16.0):\n'
                     '        super().__init__()\n'
                     '        self.base = base\n'
                     '        self.base.requires_grad_(False)\n'
                     '        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank\n'
                     '        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device, dtype=base.weight.dtype))\n'
                     '        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))\n'
                     '        self.lora_B = nn.Parameter(torch.zeros_like(base.weight[:, :rank]))\n'
                     '\n'
                     '    def forward(self, x):\n'
                     '        return self.base(x) + self.scaling * F.linear(F.linear(x, self.lora_A), self.lora_B)\n')),
    # ------------------------------------------------------------------ second blind red team (round 2)
    Accepted(cell="tokens_to_text", name="characters outside the byte alphabet skipped",
             replace=(("for token in tokens for char in token)", "for token in tokens for char in token if char in byte_decoder)"),)),
    Accepted(cell="rms_norm", name="no float32 upcast (the prose says it is not required)",
             replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                       "ms = (x * x).mean(-1, keepdim=True)\n        return x / torch.sqrt(ms + self.eps) * self.weight"),)),
    Accepted(cell="rms_norm", name="einsum sum of squares and rsqrt",
             replace=(("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                       "ms = torch.einsum('...d,...d->...', x, x).unsqueeze(-1) / x.shape[-1]\n"
                       "        return x * (ms + self.eps).rsqrt() * self.weight"),)),
    Accepted(cell="swiglu", name="gate product written in place into the up projection (mul_)",
             replace=(("return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))",
                       "up = self.up_proj(x)\n        up.mul_(F.silu(self.gate_proj(x)))\n        return self.down_proj(up)"),)),
    Accepted(cell="apply_rope", name="chunk and addcmul",
             source=("def apply_rope(x, cos, sin):\n"
                     "    x1, x2 = x.chunk(2, dim=-1)\n"
                     "    return torch.addcmul(x * cos, torch.cat((-x2, x1), dim=-1), sin)\n")),
    Accepted(cell="repeat_kv", name="index the head axis with arange // n_rep on x's device",
             source=("def repeat_kv(x, n_rep):\n"
                     "    idx = torch.arange(x.size(1) * n_rep, device=x.device) // n_rep\n"
                     "    return x[:, idx]\n")),
    Accepted(cell="gq_attention", name="q pre-scaled before RoPE, matmul and a -inf mask",
             replace=(("q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
                       "q, k = apply_rope(q / math.sqrt(self.head_dim), cos, sin), apply_rope(k, cos, sin)"),
                      ("y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                       "keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))\n"
                       "        y = (q @ k.transpose(-2, -1)).masked_fill(~keep, float('-inf')).softmax(dim=-1) @ v"),)),
    Accepted(cell="llama_forward", name="functional embedding and head with the embedding's weight",
             replace=(("x = self.embed(idx)", "x = F.embedding(idx, self.embed.weight)"),
                      ("return self.lm_head(self.norm(x))", "return F.linear(self.norm(x), self.embed.weight)"))),
    Accepted(cell="lora_linear", name="register_parameter with torch.empty and normal_ init",
             replace=(("self.lora_A = nn.Parameter(torch.randn(rank, base.in_features, device=w.device, dtype=w.dtype) / math.sqrt(base.in_features))",
                       "self.register_parameter('lora_A', nn.Parameter(torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype)))\n"
                       "        nn.init.normal_(self.lora_A, std=1 / math.sqrt(base.in_features))"),)),
]

# fourth blind red team (issue 24): it escaped because the checker did not copy back a list changed in place
MISTAKES += [
    Mistake(cell="merge_word", name="merges in the caller's list (no copy)", kind="argument",
            rejected_by=("test_merge_word",),
            replace=(("    symbols = list(symbols)\n", ""),
                     ("        symbols = merged\n", "        symbols[:] = merged\n"))),
]
