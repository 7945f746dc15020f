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
