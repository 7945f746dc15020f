"""Curated wrong answers for notebook 07 (the transformer block); each must lose points."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    # Exercise 1: layer_norm
    Mistake(
        cell="layer_norm",
        name="unbiased variance (torch.var divides by d - 1)",
        rejected_by=("test_layer_norm",),
        replace=(("((x - mean) ** 2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True)"),),
    ),
    Mistake(
        cell="layer_norm",
        name="eps added outside the square root",
        rejected_by=("test_layer_norm",),
        replace=(("torch.sqrt(var + eps)", "(torch.sqrt(var) + eps)"),),
    ),
    # Exercise 2: feed_forward
    Mistake(
        cell="feed_forward",
        name="ReLU also applied to the output layer",
        rejected_by=("test_feed_forward",),
        replace=(("return hidden @ W2 + b2", "return torch.relu(hidden @ W2 + b2)"),),
    ),
    # Exercise 3: encoder_block
    Mistake(
        cell="encoder_block",
        name="pre-LN residual adds to the normalised x",
        rejected_by=("test_encoder_block",),
        replace=(("x = x + attn(h, h, h, mask=mask)[0]", "x = h + attn(h, h, h, mask=mask)[0]"),),
    ),
    Mistake(
        cell="encoder_block",
        name="post-LN FFN sub-layer without its residual",
        rejected_by=("test_encoder_block",),
        replace=(("x = norm2(x + ffn(x))", "x = norm2(ffn(x))"),),
    ),
    Mistake(
        cell="encoder_block",
        name="padding mask not passed to the attention",
        rejected_by=("test_encoder_block",),
        replace=(("attn(h, h, h, mask=mask)", "attn(h, h, h)"), ("attn(x, x, x, mask=mask)", "attn(x, x, x)")),
    ),
    # Exercise 4: masked_mean_pool
    Mistake(
        cell="masked_mean_pool",
        name="divides by T, counting padded positions",
        rejected_by=("test_masked_mean_pool",),
        replace=(("/ weights.sum(dim=1)", "/ h.size(1)"),),
    ),
    # Exercise 5: prepend_cls
    Mistake(
        cell="prepend_cls",
        name="[CLS] appended at the end",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.cat([first, h], dim=1)", "torch.cat([h, first], dim=1)"),),
    ),
    Mistake(
        cell="prepend_cls",
        name="mask extended with False for [CLS]",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.ones(B, 1, dtype=torch.bool, device=h.device)", "torch.zeros(B, 1, dtype=torch.bool, device=h.device)"),),
    ),
    Mistake(
        cell="prepend_cls",
        name="mask column created on the CPU (no device=), breaks on a GPU",
        rejected_by=("test_prepend_cls",),
        replace=(("torch.ones(B, 1, dtype=torch.bool, device=h.device)", "torch.ones(B, 1, dtype=torch.bool)"),),
    ),
]
