"""Curated wrong answers of notebook 10 (GPT); each must be rejected."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(
        cell="next_token_batch",
        name="targets not shifted (y equals x)",
        rejected_by=("test_next_token_batch",),
        replace=(("y = data[positions + 1]", "y = data[positions]"),),
    ),
    Mistake(
        cell="init_gpt2",
        name="head copied from the embedding, not tied",
        rejected_by=("test_init_gpt2",),
        replace=(("model.lm_head.weight = model.wte.weight", "model.lm_head.weight.data.copy_(model.wte.weight.data)"),),
    ),
    Mistake(
        cell="init_gpt2",
        name="residual std 0.02/sqrt(n_layer), the 2 forgotten",
        rejected_by=("test_init_gpt2",),
        replace=(("0.02 / math.sqrt(2 * n_layer)", "0.02 / math.sqrt(n_layer)"),),
    ),
    Mistake(
        cell="top_k_filter",
        name="drops the k-th largest too (keeps k-1)",
        rejected_by=("test_top_k_filter",),
        replace=(("logits < kth_largest", "logits <= kth_largest"),),
    ),
    Mistake(
        cell="top_p_filter",
        name="drops the token that crosses p (cumsum > p)",
        rejected_by=("test_top_p_filter",),
        replace=(("drop_sorted = mass_above >= p", "drop_sorted = probs.cumsum(dim=-1) > p"),),
    ),
    Mistake(
        cell="top_p_filter",
        name="drop mask left in sorted order",
        rejected_by=("test_top_p_filter",),
        replace=(("drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted"),),
    ),
    Mistake(
        cell="cached_attention_step",
        name="top-left causal mask instead of bottom-right",
        rejected_by=("test_cached_attention_step",),
        replace=(("causal_mask(q.size(-2), k_all.size(-2), device=q.device)",
                  "torch.ones(q.size(-2), k_all.size(-2), dtype=torch.bool, device=q.device).tril()"),),
    ),
    Mistake(
        cell="cached_attention_step",
        name="cache not appended (attends to new keys only)",
        rejected_by=("test_cached_attention_step",),
        replace=(("out, _ = masked_attention(q, k_all, v_all, mask)",
                  "out, _ = masked_attention(q, k_new, v_new, causal_mask(q.size(-2), device=q.device))"),),
    ),
    Mistake(
        cell="cached_attention_step",
        name="no mask (fine for one new token, wrong for a chunk or the prompt)",
        rejected_by=("test_cached_attention_step",),
        replace=(("out, _ = masked_attention(q, k_all, v_all, mask)", "out, _ = masked_attention(q, k_all, v_all)"),),
    ),
    Mistake(
        cell="last_token_pool",
        name="takes the last column (a padding position)",
        rejected_by=("test_last_token_pool",),
        replace=(("return hidden[rows, lengths.to(hidden.device) - 1]", "return hidden[:, -1]"),),
    ),
]
