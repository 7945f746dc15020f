"""Plausible wrong answers to notebook 09 (BERT); each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="mask_tokens", name="special tokens and padding can be masked",
            rejected_by=("test_mask_tokens",), replace=((") & ~special", ")"),)),
    Mistake(cell="mask_tokens", name="labels keep every original id instead of -100",
            rejected_by=("test_mask_tokens",),
            replace=(("torch.where(selected, ids, torch.full_like(ids, -100))", "ids.clone()"),)),
    Mistake(cell="mask_tokens", name="always [MASK]: no 10% random / 10% unchanged",
            rejected_by=("test_mask_tokens",), replace=(("inputs[selected & (u < 0.8)] = mask_id", "inputs[selected] = mask_id"),
                                                        ("inputs[use_random] = random_ids[use_random]", "pass"))),
    Mistake(cell="mask_tokens", name="exactly 15% of every sequence instead of each position independently",
            rejected_by=("test_mask_tokens",),
            replace=(("    selected = (torch.rand(ids.shape, generator=generator) < p) & ~special\n",
                      "    scores = torch.rand(ids.shape, generator=generator).masked_fill(special, 2.0)\n"
                      "    n_pick = ((~special).sum(-1, keepdim=True) * p).round().clamp(min=1)\n"
                      "    selected = (scores.argsort(-1).argsort(-1) < n_pick) & ~special\n"),)),
    Mistake(cell="mask_tokens", name="assumes the special ids are the smallest ids",
            rejected_by=("test_mask_tokens",),
            replace=(("special = torch.isin(ids, torch.tensor(list(special_ids)))", "special = ids < 5"),)),
    Mistake(cell="convert_hf_names", name="chained str.replace: 'output.dense' renamed inside 'attention.output.dense'",
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
    Mistake(cell="bert_embeddings", name="forgets the segment embeddings",
            rejected_by=("test_bert_embeddings",), replace=((" + segment(segments)", ""),)),
    Mistake(cell="bert_embeddings", name="no layer norm after the sum",
            rejected_by=("test_bert_embeddings",), replace=(("return norm(x)", "return x"),)),
    Mistake(cell="token_classification_loss", name="-100 clamped to class 0 instead of ignored",
            rejected_by=("test_token_classification_loss",),
            source="def token_classification_loss(logits, labels):\n"
                   "    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1).clamp(min=0))\n"),
    Mistake(cell="mean_pool", name="averages over padding too",
            rejected_by=("test_mean_pool",),
            source="def mean_pool(hidden, mask):\n    return hidden.mean(dim=1)\n"),
    Mistake(cell="convert_hf_names", name="keeps the pooler and position_ids",
            rejected_by=("test_convert_hf_names",),
            replace=(("        if name.startswith(SKIPPED):\n            continue\n", ""),
                     ("        else:\n            _, _, layer", "        elif name.startswith(\"encoder.\"):\n            _, _, layer"))),
]
