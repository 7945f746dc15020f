"""Plausible wrong answers to notebook 09 (BERT); each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(kind="logic", cell="mask_tokens", name="special tokens and padding can be masked",
            rejected_by=("test_mask_tokens",), replace=((") & ~special", ")"),)),
    Mistake(kind="logic", cell="mask_tokens", name="labels keep every original id instead of -100",
            rejected_by=("test_mask_tokens",),
            replace=(("torch.where(selected, ids, torch.full_like(ids, -100))", "ids.clone()"),)),
    Mistake(kind="statistics", cell="mask_tokens", name="always [MASK]: no 10% random / 10% unchanged",
            rejected_by=("test_mask_tokens",), replace=(("inputs[selected & (u < 0.8)] = mask_id", "inputs[selected] = mask_id"),
                                                        ("inputs[use_random] = random_ids[use_random]", "pass"))),
    Mistake(kind="statistics", cell="mask_tokens", name="exactly 15% of every sequence instead of each position independently",
            rejected_by=("test_mask_tokens",),
            replace=(("    selected = (torch.rand(ids.shape, generator=generator) < p) & ~special\n",
                      "    scores = torch.rand(ids.shape, generator=generator).masked_fill(special, 2.0)\n"
                      "    n_pick = ((~special).sum(-1, keepdim=True) * p).round().clamp(min=1)\n"
                      "    selected = (scores.argsort(-1).argsort(-1) < n_pick) & ~special\n"),)),
    Mistake(kind="argument", cell="mask_tokens", name="draws from the global random state, ignoring generator (eighth review)",
            rejected_by=("test_mask_tokens",),
            replace=(("torch.rand(ids.shape, generator=generator) < p", "torch.rand(ids.shape) < p"),
                     ("u = torch.rand(ids.shape, generator=generator)", "u = torch.rand(ids.shape)"),
                     ("generator=generator, dtype=ids.dtype", "dtype=ids.dtype"))),
    Mistake(kind="logic", cell="mask_tokens", name="assumes the special ids are the smallest ids",
            rejected_by=("test_mask_tokens",),
            replace=(("special = torch.isin(ids, torch.tensor(list(special_ids)))", "special = ids < 5"),)),
    Mistake(kind="logic", cell="convert_hf_names", name="chained str.replace: 'output.dense' renamed inside 'attention.output.dense'",
            rejected_by=("test_convert_hf_names",),
            source="def convert_hf_names(hf_state):\n"
                   "    out = {}\n"
                   "    for name, tensor in hf_state.items():\n"
                   "        if name.startswith(SKIPPED):\n"
                   "            continue\n"
                   "        new = name.replace('embeddings.LayerNorm', 'embeddings.norm').replace('encoder.layer', 'blocks')\n"
                   "        for old, ours in sorted(LAYER_RENAMES.items(), key=lambda kv: len(kv[0])):\n"
                   "            new = new.replace(old, ours)\n"
                   "        out[new] = tensor\n"
                   "    return out\n"),
    Mistake(kind="logic", cell="bert_embeddings", name="forgets the segment embeddings",
            rejected_by=("test_bert_embeddings",), replace=((" + segment(segments)", ""),)),
    Mistake(kind="logic", cell="bert_embeddings", name="no layer norm after the sum",
            rejected_by=("test_bert_embeddings",), replace=(("return norm(x)", "return x"),)),
    Mistake(kind="logic", cell="token_classification_loss", name="-100 clamped to class 0 instead of ignored",
            rejected_by=("test_token_classification_loss",),
            source="def token_classification_loss(logits, labels):\n"
                   "    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1).clamp(min=0))\n"),
    Mistake(kind="logic", cell="mean_pool", name="averages over padding too",
            rejected_by=("test_mean_pool",),
            source="def mean_pool(hidden, mask):\n    return hidden.mean(dim=1)\n"),
    Mistake(kind="logic", cell="convert_hf_names", name="keeps the pooler and position_ids",
            rejected_by=("test_convert_hf_names",),
            replace=(("        if name.startswith(SKIPPED):\n            continue\n", ""),
                     ("        else:\n            _, _, layer", "        elif name.startswith(\"encoder.\"):\n            _, _, layer"))),
]

# Escapes of the blind red team (issue 12): each kept full marks before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell='mask_tokens', name='one random token per sequence (broadcast)', kind='statistics',
            rejected_by=('test_mask_tokens',),
            source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    special = torch.isin(ids, torch.tensor(list(special_ids)))\n'
                    '    sel = (torch.rand(ids.shape, generator=generator) < p) & ~special\n'
                    '    labels = torch.where(sel, ids, -100)\n'
                    '    u = torch.rand(ids.shape, generator=generator)\n'
                    '    rnd = torch.randint(0, vocab_size, (*ids.shape[:-1], 1), generator=generator).expand_as(ids)\n'
                    '    inputs = torch.where(sel & (u < 0.8), mask_id, ids)\n'
                    '    inputs = torch.where(sel & (u >= 0.8) & (u < 0.9), rnd, inputs)\n'
                    '    return inputs, labels\n')),
    Mistake(cell='mask_tokens', name='80/10/10 decided once per sequence', kind='statistics',
            rejected_by=('test_mask_tokens',),
            source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    special = torch.isin(ids, torch.tensor(list(special_ids)))\n'
                    '    sel = (torch.rand(ids.shape, generator=generator) < p) & ~special\n'
                    '    labels = torch.where(sel, ids, -100)\n'
                    '    u = torch.rand((*ids.shape[:-1], 1), generator=generator)\n'
                    '    rnd = torch.randint(0, vocab_size, ids.shape, generator=generator)\n'
                    '    inputs = torch.where(sel & (u < 0.8), mask_id, ids)\n'
                    '    inputs = torch.where(sel & (u >= 0.8) & (u < 0.9), rnd, inputs)\n'
                    '    return inputs, labels\n')),
    Mistake(cell='mask_tokens', name='reference import', kind='reference',
            rejected_by=('test_mask_tokens',),
            source=('from course_utils.bert import mask_tokens\n')),
    Mistake(cell='bert_embeddings', name='arange without device', kind='device',
            rejected_by=('test_bert_embeddings',),
            source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    pos = torch.arange(ids.shape[1])\n'
                    '    return norm(word(ids) + position(pos) + segment(segments))\n')),
    Mistake(cell='bert_embeddings', name='position table read through .data (no gradient)', kind='autograd',
            rejected_by=('test_bert_embeddings',),
            source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    T = ids.shape[1]\n'
                    '    return norm(word(ids) + position.weight.data[:T] + segment(segments))\n')),
    Mistake(cell='bert_embeddings', name='F.layer_norm with default eps (norm.eps ignored)', kind='argument',
            rejected_by=('test_bert_embeddings',),
            source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    T = ids.shape[1]\n'
                    '    x = word(ids) + position(torch.arange(T, device=ids.device)) + segment(segments)\n'
                    '    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias)\n')),
    Mistake(cell='bert_embeddings', name='embedding sum computed under torch.no_grad', kind='autograd',
            rejected_by=('test_bert_embeddings',),
            source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    T = ids.shape[1]\n'
                    '    with torch.no_grad():\n'
                    '        x = word(ids) + position(torch.arange(T, device=ids.device)) + segment(segments)\n'
                    '    return norm(x)\n')),
    Mistake(cell='token_classification_loss', name='loop with CPU accumulator', kind='device',
            rejected_by=('test_token_classification_loss',),
            source=('def token_classification_loss(logits, labels):\n'
                    '    total, count = torch.tensor(0.0), 0\n'
                    '    B, T, C = logits.shape\n'
                    '    for b in range(B):\n'
                    '        for t in range(T):\n'
                    '            if labels[b, t] != -100:\n'
                    '                total = total - torch.log_softmax(logits[b, t], -1)[labels[b, t]]\n'
                    '                count += 1\n'
                    '    return total / count\n')),
    Mistake(cell='token_classification_loss', name='reference import', kind='reference',
            rejected_by=('test_token_classification_loss',),
            source=('from course_utils.bert import token_classification_loss\n')),
    Mistake(cell='mean_pool', name='mask cast with .float() (dtype not kept)', kind='dtype',
            rejected_by=('test_mean_pool',),
            source=('def mean_pool(hidden, mask):\n'
                    '    m = mask.unsqueeze(-1).float()\n'
                    '    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)\n')),
    Mistake(cell='mean_pool', name='loop into torch.zeros without device/dtype', kind='device',
            rejected_by=('test_mean_pool',),
            source=('def mean_pool(hidden, mask):\n'
                    '    B, T, d = hidden.shape\n'
                    '    out = torch.zeros(B, d)\n'
                    '    for b in range(B):\n'
                    '        if mask[b].any():\n'
                    '            out[b] = hidden[b][mask[b]].mean(0)\n'
                    '    return out\n')),
    Mistake(cell='mean_pool', name='zeroes the padding of hidden in place', kind='autograd',
            rejected_by=('test_mean_pool',),
            source=('def mean_pool(hidden, mask):\n'
                    '    hidden[~mask] = 0\n'
                    '    return hidden.sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)\n')),
    Mistake(cell='mean_pool', name='reference import', kind='reference',
            rejected_by=('test_mean_pool',),
            source=('from course_utils.bert import mean_pool\n')),
    Mistake(cell='convert_hf_names', name='single-digit layer index (regex \\d)', kind='boundary',
            rejected_by=('test_convert_hf_names',),
            source=('def convert_hf_names(hf_state):\n'
                    '    pattern = re.compile(r"encoder\\.layer\\.(\\d)\\.(.+)\\.(weight|bias)")\n'
                    '    out = {}\n'
                    '    for name, tensor in hf_state.items():\n'
                    '        if name.startswith(SKIPPED):\n'
                    '            continue\n'
                    '        m = pattern.match(name)\n'
                    '        if m:\n'
                    '            out[f"blocks.{m.group(1)}.{LAYER_RENAMES[m.group(2)]}.{m.group(3)}"] = tensor\n'
                    '        elif name.startswith("embeddings."):\n'
                    '            out[name.replace("LayerNorm", "norm")] = tensor\n'
                    '    return out\n')),
    Mistake(cell='convert_hf_names', name='layer index read as one character', kind='boundary',
            rejected_by=('test_convert_hf_names',),
            source=('def convert_hf_names(hf_state):\n'
                    '    prefix = "encoder.layer."\n'
                    '    out = {}\n'
                    '    for name, tensor in hf_state.items():\n'
                    '        if name.startswith(SKIPPED):\n'
                    '            continue\n'
                    '        if name.startswith(prefix):\n'
                    '            i = name[len(prefix)]\n'
                    '            module, param = name[len(prefix) + 2:].rsplit(".", 1)\n'
                    '            out[f"blocks.{i}.{LAYER_RENAMES[module]}.{param}"] = tensor\n'
                    '        else:\n'
                    '            out[name.replace("LayerNorm", "norm")] = tensor\n'
                    '    return out\n')),
    Mistake(cell='convert_hf_names', name='only the known embedding names kept (others silently dropped)', kind='logic',
            rejected_by=('test_convert_hf_names',),
            source=('def convert_hf_names(hf_state):\n'
                    '    out = {}\n'
                    '    keep = {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",\n'
                    '            "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"}\n'
                    '    for name, tensor in hf_state.items():\n'
                    '        if name in keep:\n'
                    '            out[name.replace("LayerNorm", "norm")] = tensor\n'
                    '        elif name.startswith("encoder.layer."):\n'
                    '            _, _, i, rest = name.split(".", 3)\n'
                    '            module, param = rest.rsplit(".", 1)\n'
                    '            out[f"blocks.{i}.{LAYER_RENAMES[module]}.{param}"] = tensor\n'
                    '    return out\n')),
    Mistake(cell='convert_hf_names', name='reference import', kind='reference',
            rejected_by=('test_convert_hf_names',),
            source=('from course_utils.bert import convert_hf_state_dict as convert_hf_names\n')),
]

# Right answers in other styles than the solution (blind red team): every test must accept them.
ACCEPTED = [
    Accepted(cell='mask_tokens', name='vectorised torch.where',
             source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    special = torch.isin(ids, torch.tensor(list(special_ids), dtype=ids.dtype, device=ids.device))\n'
                    '    sel = (torch.rand(ids.shape, generator=generator, device=ids.device) < p) & ~special\n'
                    '    labels = torch.where(sel, ids, torch.full_like(ids, -100))\n'
                    '    u = torch.rand(ids.shape, generator=generator, device=ids.device)\n'
                    '    rand_ids = torch.randint(0, vocab_size, ids.shape, generator=generator, device=ids.device, dtype=ids.dtype)\n'
                    '    inputs = torch.where(sel & (u < 0.8), torch.full_like(ids, mask_id), ids)\n'
                    '    inputs = torch.where(sel & (u >= 0.8) & (u < 0.9), rand_ids, inputs)\n'
                    '    return inputs, labels\n')),
    Accepted(cell='mask_tokens', name='bernoulli + boolean assignment, randint only for the random positions',
             source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    inputs, labels = ids.clone(), ids.clone()\n'
                    '    special = torch.isin(ids, torch.as_tensor(list(special_ids), device=ids.device))\n'
                    '    probs = torch.full(ids.shape, float(p), device=ids.device)\n'
                    '    probs[special] = 0.0\n'
                    '    sel = torch.bernoulli(probs, generator=generator).bool()\n'
                    '    labels[~sel] = -100\n'
                    '    u = torch.rand(ids.shape, generator=generator, device=ids.device)\n'
                    '    to_mask = sel & (u < 0.8)\n'
                    '    to_rand = sel & (u >= 0.8) & (u < 0.9)\n'
                    '    inputs[to_mask] = mask_id\n'
                    '    inputs[to_rand] = torch.randint(vocab_size, (int(to_rand.sum()),), generator=generator,\n'
                    '                                    device=ids.device, dtype=ids.dtype)\n'
                    '    return inputs, labels\n')),
    Accepted(cell='mask_tokens', name='second uniform drawn only at selected positions',
             source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    assert ids.dim() >= 1\n'
                    '    special = torch.isin(ids, torch.tensor(sorted(set(special_ids)), device=ids.device))\n'
                    '    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & ~special\n'
                    '    labels = ids.masked_fill(~selected, -100)\n'
                    '    inputs = ids.clone()\n'
                    '    n = int(selected.sum())\n'
                    '    u = torch.rand(n, generator=generator).to(ids.device)\n'
                    '    new = inputs[selected]\n'
                    '    rnd = torch.randint(0, vocab_size, (n,), generator=generator).to(ids.device, ids.dtype)\n'
                    '    new = torch.where(u < 0.8, torch.full_like(new, mask_id), torch.where(u < 0.9, rnd, new))\n'
                    '    inputs[selected] = new\n'
                    '    return inputs, labels\n')),
    Accepted(cell='mask_tokens', name='one uniform draw split into p*0.8 / p*0.1 / p*0.1 bands',
             source=('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
                    '    r = torch.rand(ids.shape, generator=generator).to(ids.device)\n'
                    '    special = torch.isin(ids, torch.tensor(list(special_ids), device=ids.device))\n'
                    '    sel = (r < p) & ~special\n'
                    '    labels = torch.where(sel, ids, -100)\n'
                    '    rnd = torch.randint(0, vocab_size, ids.shape, generator=generator).to(ids.device, ids.dtype)\n'
                    '    inputs = ids.clone()\n'
                    '    inputs = torch.where(sel & (r < 0.8 * p), mask_id, inputs)\n'
                    '    inputs = torch.where(sel & (r >= 0.8 * p) & (r < 0.9 * p), rnd, inputs)\n'
                    '    return inputs, labels\n')),
    Accepted(cell='bert_embeddings', name='arange with device, modules called',
             source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    T = ids.size(1)\n'
                    '    pos = torch.arange(T, device=ids.device)\n'
                    '    return norm(word(ids) + position(pos) + segment(segments))\n')),
    Accepted(cell='bert_embeddings', name='expanded position ids and F.embedding',
             source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    B, T = ids.shape\n'
                    '    pos = torch.arange(T, device=ids.device, dtype=torch.long).unsqueeze(0).expand(B, T)\n'
                    '    x = F.embedding(ids, word.weight) + F.embedding(pos, position.weight) + F.embedding(segments, segment.weight)\n'
                    '    return norm(x)\n')),
    Accepted(cell='bert_embeddings', name='slice of the position table',
             source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    x = word(ids) + segment(segments)\n'
                    '    x = x + position.weight[: ids.shape[-1]]\n'
                    '    return norm(x)\n')),
    Accepted(cell='token_classification_loss', name='cross_entropy with ignore_index on flattened',
             source=('def token_classification_loss(logits, labels):\n'
                    '    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)\n')),
    Accepted(cell='token_classification_loss', name='manual log_softmax, gather, masked mean',
             source=('def token_classification_loss(logits, labels):\n'
                    '    keep = labels != -100\n'
                    '    logp = torch.log_softmax(logits, dim=-1)\n'
                    '    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)\n'
                    '    return -(picked * keep).sum() / keep.sum()\n')),
    Accepted(cell='token_classification_loss', name='boolean selection then cross_entropy',
             source=('def token_classification_loss(logits, labels):\n'
                    '    keep = labels != -100\n'
                    '    return F.cross_entropy(logits[keep], labels[keep])\n')),
    Accepted(cell='token_classification_loss', name='transpose to (B, C, T)',
             source=('def token_classification_loss(logits, labels):\n'
                    '    return F.cross_entropy(logits.transpose(1, 2), labels)\n')),
    Accepted(cell='mean_pool', name='multiply and sum, clamp 1e-9',
             source=('def mean_pool(hidden, mask):\n'
                    '    m = mask.unsqueeze(-1).to(hidden.dtype)\n'
                    '    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)\n')),
    Accepted(cell='mean_pool', name='einsum',
             source=('def mean_pool(hidden, mask):\n'
                    '    m = mask.to(hidden.dtype)\n'
                    '    total = torch.einsum("btd,bt->bd", hidden, m)\n'
                    '    return total / m.sum(-1, keepdim=True).clamp_min(1e-9)\n')),
    Accepted(cell='mean_pool', name='masked_fill and clamp(min=1) on integer counts',
             source=('def mean_pool(hidden, mask):\n'
                    '    summed = hidden.masked_fill(~mask.bool().unsqueeze(-1), 0.0).sum(1)\n'
                    '    count = mask.sum(-1, keepdim=True).clamp(min=1).to(hidden.dtype)\n'
                    '    return summed / count\n')),
    Accepted(cell='convert_hf_names', name='split as the prose says',
             source=('def convert_hf_names(hf_state):\n'
                    '    out = {}\n'
                    '    for name, tensor in hf_state.items():\n'
                    '        if name.startswith(SKIPPED):\n'
                    '            continue\n'
                    '        if name.startswith("embeddings."):\n'
                    '            out[name.replace("LayerNorm", "norm")] = tensor\n'
                    '        else:\n'
                    '            _, _, i, rest = name.split(".", 3)\n'
                    '            module, param = rest.rsplit(".", 1)\n'
                    '            out[f"blocks.{i}.{LAYER_RENAMES[module]}.{param}"] = tensor\n'
                    '    return out\n')),
    Accepted(cell='convert_hf_names', name='regex with multi-digit layers',
             source=('def convert_hf_names(hf_state):\n'
                    '    pattern = re.compile(r"encoder\\.layer\\.(\\d+)\\.(.+)\\.(weight|bias)")\n'
                    '    out = {}\n'
                    '    for name, tensor in hf_state.items():\n'
                    '        if any(name.startswith(s) for s in SKIPPED):\n'
                    '            continue\n'
                    '        m = pattern.fullmatch(name)\n'
                    '        if m:\n'
                    '            out[f"blocks.{m.group(1)}.{LAYER_RENAMES[m.group(2)]}.{m.group(3)}"] = tensor\n'
                    '        else:\n'
                    '            head, _, tail = name.rpartition(".")\n'
                    '            head = ".".join(EMBEDDING_RENAMES.get(part, part) for part in head.split("."))\n'
                    '            out[f"{head}.{tail}"] = tensor\n'
                    '    return out\n')),
    Accepted(cell='convert_hf_names', name='startswith lookup on the rest of the name',
             source=('def convert_hf_names(hf_state: dict) -> dict:\n'
                    '    result = {}\n'
                    '    for key, value in hf_state.items():\n'
                    '        if key.startswith(SKIPPED):\n'
                    '            continue\n'
                    '        parts = key.split(".")\n'
                    '        if parts[0] == "encoder":\n'
                    '            layer, rest = parts[2], ".".join(parts[3:])\n'
                    '            for hf_mod, ours in LAYER_RENAMES.items():\n'
                    '                if rest.startswith(hf_mod + "."):\n'
                    '                    result[f"blocks.{layer}.{ours}{rest[len(hf_mod):]}"] = value\n'
                    '                    break\n'
                    '            else:\n'
                    '                raise KeyError(key)\n'
                    '        else:\n'
                    '            result[".".join(EMBEDDING_RENAMES.get(p, p) for p in parts)] = value\n'
                    '    return result\n')),
]

# Escapes of the second blind red team: each kept full marks before the hidden tests were strengthened.
_MASK_HEAD = ('def mask_tokens(ids, vocab_size, mask_id, special_ids, p=0.15, generator=None):\n'
              '    special = torch.isin(ids, torch.tensor(list(special_ids)))\n')
MISTAKES += [
    Mistake(cell='mask_tokens', name='randint(vocab_size - 1): the last id is never drawn', kind='boundary',
            rejected_by=('test_mask_tokens',),
            replace=(("torch.randint(vocab_size, ids.shape", "torch.randint(vocab_size - 1, ids.shape"),)),
    Mistake(cell='mask_tokens', name='generator=None replaced by a generator seeded with 0 (same masks every epoch)',
            kind='argument', rejected_by=('test_mask_tokens',),
            replace=(("    special = torch.isin(", "    if generator is None:\n"
                      "        generator = torch.Generator().manual_seed(0)\n    special = torch.isin("),)),
    Mistake(cell='mask_tokens', name='assumes 2-D ids: B, T = ids.shape', kind='boundary',
            rejected_by=('test_mask_tokens',),
            replace=(("    special = torch.isin(", "    B, T = ids.shape\n    special = torch.isin("),
                     ("torch.rand(ids.shape, generator=generator) < p", "torch.rand(B, T, generator=generator) < p"))),
    Mistake(cell='mask_tokens', name='labels built as float (-100.0)', kind='dtype', rejected_by=('test_mask_tokens',),
            replace=(("torch.where(selected, ids, torch.full_like(ids, -100))", "torch.where(selected, ids.float(), -100.0)"),)),
    Mistake(cell='mask_tokens', name='outputs built with a fixed int64 dtype (int32 ids come back int64)', kind='dtype',
            rejected_by=('test_mask_tokens',),
            replace=(("torch.where(selected, ids, torch.full_like(ids, -100))",
                      "torch.where(selected, ids.long(), torch.full(ids.shape, -100))"),
                     ("inputs = ids.clone()", "inputs = ids.long()"))),
    Mistake(cell='mask_tokens', name='80/10/10 bands cut from the selection draw rescaled by 0.15 (p ignored)',
            kind='statistics', rejected_by=('test_mask_tokens',),
            source=_MASK_HEAD + ('    u = torch.rand(ids.shape, generator=generator)\n'
                                 '    selected = (u < p) & ~special\n'
                                 '    v = u / 0.15\n'
                                 '    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)\n'
                                 '    inputs = ids.clone()\n'
                                 '    inputs[selected & (v < 0.8)] = mask_id\n'
                                 '    rnd = selected & (v >= 0.8) & (v < 0.9)\n'
                                 '    inputs[rnd] = random_ids[rnd]\n'
                                 '    return inputs, torch.where(selected, ids, torch.full_like(ids, -100))\n')),
    Mistake(cell='mask_tokens', name="random replacement drawn from the batch's own tokens", kind='statistics',
            rejected_by=('test_mask_tokens',),
            replace=(("random_ids = torch.randint(vocab_size, ids.shape, generator=generator, dtype=ids.dtype)",
                      "random_ids = ids.reshape(-1)[torch.randint(ids.numel(), ids.shape, generator=generator)]"),)),
    Mistake(cell='mask_tokens', name='random replacement forced to differ from the original', kind='statistics',
            rejected_by=('test_mask_tokens',),
            replace=(("random_ids = torch.randint(vocab_size, ids.shape, generator=generator, dtype=ids.dtype)",
                      "random_ids = (ids + torch.randint(1, vocab_size, ids.shape, generator=generator)) % vocab_size"),)),
    Mistake(cell='bert_embeddings', name='squeeze() before the norm (B = 1 or T = 1 loses an axis)', kind='boundary',
            rejected_by=('test_bert_embeddings',), replace=(("return norm(x)", "return norm(x.squeeze())"),)),
    Mistake(cell='bert_embeddings', name='F.layer_norm with eps hard-coded to 1e-12 (norm.eps ignored)', kind='argument',
            rejected_by=('test_bert_embeddings',),
            replace=(("return norm(x)", "return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, 1e-12)"),)),
    Mistake(cell='token_classification_loss', name='softmax().log(): inf for large logits', kind='boundary',
            rejected_by=('test_token_classification_loss',),
            source=('def token_classification_loss(logits, labels):\n'
                    '    keep = labels != -100\n'
                    '    logp = logits.softmax(-1).log()\n'
                    '    return -logp[keep].gather(-1, labels[keep].unsqueeze(-1)).mean()\n')),
    Mistake(cell='token_classification_loss', name='logsumexp as exp().sum().log() without the max', kind='boundary',
            rejected_by=('test_token_classification_loss',),
            source=('def token_classification_loss(logits, labels):\n'
                    '    keep = labels != -100\n'
                    '    lse = logits.exp().sum(-1).log()\n'
                    '    picked = logits.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)\n'
                    '    return (lse - picked)[keep].sum() / keep.sum()\n')),
    Mistake(cell='token_classification_loss', name='squeeze() before cross_entropy (B = 1 or T = 1 break)', kind='boundary',
            rejected_by=('test_token_classification_loss',),
            source=('def token_classification_loss(logits, labels):\n'
                    '    logits, labels = logits.squeeze(), labels.squeeze()\n'
                    '    return F.cross_entropy(logits.transpose(-1, -2), labels, ignore_index=-100)\n')),
    Mistake(cell='mean_pool', name='nan_to_num after an unguarded division (NaN gradient on an empty row)', kind='autograd',
            rejected_by=('test_mean_pool',),
            replace=(("return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)",
                      "return torch.nan_to_num((hidden * m).sum(dim=1) / m.sum(dim=1))"),)),
    Mistake(cell='mean_pool', name='torch.where(count > 0, sum / count, 0) (NaN gradient on an empty row)', kind='autograd',
            rejected_by=('test_mean_pool',),
            replace=(("return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)",
                      "count = m.sum(dim=1)\n"
                      "    return torch.where(count > 0, (hidden * m).sum(dim=1) / count, torch.zeros_like(count))"),)),
    Mistake(cell='mean_pool', name='count of non-zero states instead of the mask', kind='logic', rejected_by=('test_mean_pool',),
            replace=(("return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)",
                      "count = ((hidden * m) != 0).any(-1).sum(1, keepdim=True).to(hidden.dtype)\n"
                      "    return (hidden * m).sum(dim=1) / count.clamp(min=1)"),)),
    Mistake(cell='convert_hf_names', name='unknown layer modules skipped silently', kind='logic',
            rejected_by=('test_convert_hf_names',),
            replace=(("            module, param = rest.rsplit(\".\", 1)\n",
                      "            module, param = rest.rsplit(\".\", 1)\n"
                      "            if module not in LAYER_RENAMES:\n"
                      "                continue\n"),)),
    Mistake(cell='convert_hf_names', name='keys outside embeddings/encoder dropped silently', kind='logic',
            rejected_by=('test_convert_hf_names',),
            replace=(("        else:\n            _, _, layer", "        elif name.startswith(\"encoder.\"):\n            _, _, layer"),
                     ("        out[new] = tensor\n", "        else:\n            continue\n        out[new] = tensor\n"))),
    Mistake(cell='convert_hf_names', name='every tensor converted with .float() (copies a bf16 checkpoint)', kind='dtype',
            rejected_by=('test_convert_hf_names',),
            replace=(("        out[new] = tensor\n", "        out[new] = tensor.float()\n"),)),
]

ACCEPTED += [
    Accepted(cell='mask_tokens', name='bernoulli selection, multinomial over the three cases',
             source=_MASK_HEAD + (
                 '    selected = torch.bernoulli(torch.full(ids.shape, float(p)), generator=generator).bool() & ~special\n'
                 '    n = int(selected.sum())\n'
                 '    case = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), n, replacement=True, generator=generator) '
                 'if n else torch.zeros(0, dtype=torch.long)\n'
                 '    vals = ids[selected].clone()\n'
                 '    rand = torch.randint(0, vocab_size, (n,), generator=generator, dtype=ids.dtype)\n'
                 '    vals[case == 0] = mask_id\n'
                 '    vals[case == 1] = rand[case == 1]\n'
                 '    inputs = ids.clone()\n'
                 '    inputs[selected] = vals\n'
                 '    labels = torch.full_like(ids, -100)\n'
                 '    labels[selected] = ids[selected]\n'
                 '    return inputs, labels\n')),
    Accepted(cell='bert_embeddings', name='one-hot matmul for tokens and segments',
             source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                     '    T = ids.shape[1]\n'
                     '    tok = F.one_hot(ids, word.num_embeddings).to(word.weight.dtype) @ word.weight\n'
                     '    seg = F.one_hot(segments, segment.num_embeddings).to(segment.weight.dtype) @ segment.weight\n'
                     '    return norm(tok + seg + position(torch.arange(T, device=ids.device))[None])\n')),
    Accepted(cell='token_classification_loss', name='(B, C, T) with the default ignore_index',
             source=('def token_classification_loss(logits, labels):\n'
                     '    return F.cross_entropy(logits.permute(0, 2, 1), labels)\n')),
    Accepted(cell='mean_pool', name='bmm with the mask as a row vector, clamp 1e-9',
             source=('def mean_pool(hidden, mask):\n'
                     '    m = mask.to(hidden.dtype).unsqueeze(1)\n'
                     '    return torch.bmm(m, hidden).squeeze(1) / m.sum(-1).clamp(min=1e-9)\n')),
    Accepted(cell='mean_pool', name='loop over rows, max(count, 1)',
             source=('def mean_pool(hidden, mask):\n'
                     '    return torch.stack([h[m].sum(0) / max(int(m.sum()), 1) for h, m in zip(hidden, mask)])\n')),
    Accepted(cell='mean_pool', name='nanmean over NaN-filled padding, then nan_to_num',
             source=('def mean_pool(hidden, mask):\n'
                     '    filled = hidden.masked_fill(~mask.unsqueeze(-1), float("nan"))\n'
                     '    return torch.nan_to_num(torch.nanmean(filled, dim=1))\n')),
    Accepted(cell='convert_hf_names', name='regex with LAYER_RENAMES.get passthrough (the loader refuses unknown names)',
             source=('def convert_hf_names(hf_state):\n'
                     '    pattern = re.compile(r"encoder\\.layer\\.(\\d+)\\.(.+)\\.(weight|bias)$")\n'
                     '    result = {}\n'
                     '    for key, value in hf_state.items():\n'
                     '        if key.startswith(SKIPPED):\n'
                     '            continue\n'
                     '        m = pattern.match(key)\n'
                     '        if m:\n'
                     '            i, module, param = m.groups()\n'
                     '            result[f"blocks.{i}.{LAYER_RENAMES.get(module, module)}.{param}"] = value\n'
                     '        else:\n'
                     '            result[key.replace(".LayerNorm.", ".norm.")] = value\n'
                     '    return result\n')),
]

MISTAKES += [
    Mistake(cell='bert_embeddings', name='accumulated into torch.zeros without dtype (float64 tables -> float32)',
            kind='dtype', rejected_by=('test_bert_embeddings',),
            source=('def bert_embeddings(ids, segments, word, position, segment, norm):\n'
                    '    B, T = ids.shape\n'
                    '    x = torch.zeros(B, T, word.embedding_dim, device=ids.device)\n'
                    '    x += word(ids)\n'
                    '    x += position(torch.arange(T, device=ids.device))\n'
                    '    x += segment(segments)\n'
                    '    return norm(x)\n')),
]

# fourth blind red team (issue 24)
MISTAKES += [
    Mistake(cell="token_classification_loss", name="view(-1, C): fails on a non-contiguous slice of logits", kind="logic",
            rejected_by=("test_token_classification_loss",),
            source=("def token_classification_loss(logits, labels):\n"
                    "    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)\n")),
]
