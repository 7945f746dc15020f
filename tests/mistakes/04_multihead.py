"""Curated wrong answers of notebook 04 (multi-head attention); each must be rejected."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(
        cell="split_heads",
        name="views to (B, h, T, d_k) without transpose",
        rejected_by=("test_split_heads",),
        replace=(("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.view(B, n_heads, T, d_k)"),),
    ),
    Mistake(
        cell="split_heads",
        name="interleaves heads (features i::h)",
        rejected_by=("test_split_heads",),
        replace=(("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.view(B, T, d_k, n_heads).permute(0, 3, 1, 2)"),),
    ),
    Mistake(
        cell="merge_heads",
        name="reshapes without moving heads back",
        rejected_by=("test_merge_heads",),
        replace=(("return x.transpose(1, 2).reshape(B, T, h * d_k)", "return x.reshape(B, T, h * d_k)"),),
    ),
    Mistake(
        cell="multi_head_attention",
        name="scales by sqrt(d_model) instead of sqrt(d_k)",
        rejected_by=("test_multi_head_attention",),
        replace=(("math.sqrt(d_k)", "math.sqrt(x_q.size(-1))"),),
    ),
    Mistake(
        cell="multi_head_attention",
        name="forgets the output projection W_o",
        rejected_by=("test_multi_head_attention",),
        replace=(("return merge_heads(heads) @ W_o, weights", "return merge_heads(heads), weights"),),
    ),
    Mistake(
        cell="mha_parameter_count",
        name="gives every head full d x d projections",
        rejected_by=("test_mha_parameter_count",),
        replace=(("per_head = 3 * d_model * d_k", "per_head = 3 * d_model * d_model"),),
    ),
    Mistake(
        cell="mha_parameter_count",
        name="forgets W_O",
        rejected_by=("test_mha_parameter_count",),
        replace=(("return n_heads * per_head + w_o + biases", "return n_heads * per_head + biases"),),
    ),
    Mistake(
        cell="load_torch_weights",
        name="takes in_proj_weight chunks in the order K, Q, V",
        rejected_by=("test_load_torch_weights",),
        replace=(("w_q, w_k, w_v = torch_mha", "w_k, w_q, w_v = torch_mha"),),
    ),
    Mistake(
        cell="load_torch_weights",
        name="copies the weights but not the biases",
        rejected_by=("test_load_torch_weights",),
        replace=(("            layer.bias.copy_(b)\n", ""), ("        ours.out_proj.bias.copy_(torch_mha.out_proj.bias)\n", "")),
    ),
]
