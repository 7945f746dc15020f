"""Unit tests of course_utils.blocks against PyTorch's own modules.

Reference: torch.nn.LayerNorm and torch.nn.TransformerEncoderLayer (batch_first=True,
dropout=0, activation relu) after copying weights. Tolerance: 1e-5 absolute (float32).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.blocks import DecoderBlock, EncoderBlock, FeedForward, LayerNorm, layer_norm
from course_utils.masking import causal_mask, key_mask, padding_mask, to_torch_key_padding_mask

ATOL = 1e-5


def test_layer_norm_function_matches_torch():
    torch.manual_seed(0)
    x = 3.0 + 2.0 * torch.randn(2, 5, 16)
    gamma, beta = torch.randn(16), torch.randn(16)
    expected = torch.nn.functional.layer_norm(x, (16,), gamma, beta, eps=1e-5)
    torch.testing.assert_close(layer_norm(x, gamma, beta), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_layer_norm_module_matches_torch_nn_layernorm(eps):
    torch.manual_seed(1)
    theirs = nn.LayerNorm(12, eps=eps)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = LayerNorm(12, eps=eps)
    ours.load_state_dict(theirs.state_dict())  # same parameter names
    x = torch.randn(4, 7, 12)
    torch.testing.assert_close(ours(x), theirs(x), atol=ATOL, rtol=0)
    # fresh modules initialise alike (ones, zeros)
    torch.testing.assert_close(LayerNorm(12)(x), nn.LayerNorm(12)(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_layer_norm_formula_equals_fused_module(eps):
    # the module runs F.layer_norm; the written-out formula (notebook 07's) must give the same values and gradients
    torch.manual_seed(7)
    module = LayerNorm(16, eps=eps)
    with torch.no_grad():
        module.weight.normal_()
        module.bias.normal_()
    x = (2.0 + 3.0 * torch.randn(3, 5, 16)).requires_grad_(True)
    torch.testing.assert_close(module(x), torch.nn.functional.layer_norm(x, (16,), module.weight, module.bias, eps),
                               atol=0, rtol=0)
    fused = module(x)
    formula = layer_norm(x, module.weight, module.bias, eps)
    torch.testing.assert_close(fused, formula, atol=ATOL, rtol=0)
    upstream = torch.randn_like(fused)
    grads_fused = torch.autograd.grad(fused, (x, module.weight, module.bias), upstream)
    grads_formula = torch.autograd.grad(formula, (x, module.weight, module.bias), upstream)
    for got, expected in zip(grads_fused, grads_formula):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-5)
    reference = nn.LayerNorm(16, eps=eps)
    reference.load_state_dict(module.state_dict())
    torch.testing.assert_close(formula, reference(x), atol=ATOL, rtol=0)


def test_layer_norm_nearly_constant_rows_use_eps_inside_sqrt():
    x = 1e-3 * torch.randn(3, 16)
    torch.testing.assert_close(LayerNorm(16)(x), nn.LayerNorm(16)(x), atol=ATOL, rtol=0)


def test_feed_forward_formula_and_activation():
    torch.manual_seed(2)
    ffn = FeedForward(8, 32)
    x = torch.randn(2, 3, 8)
    expected = torch.relu(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected, atol=ATOL, rtol=0)
    assert sum(p.numel() for p in FeedForward(512, 2048).parameters()) == 2 * 512 * 2048 + 2048 + 512
    with pytest.raises(ValueError):
        FeedForward(8, 32, activation="tanh")


def _torch_layer_from(block: EncoderBlock, norm_first: bool) -> nn.TransformerEncoderLayer:
    d, h = block.attn.d_model, block.attn.n_heads
    d_ff = block.ffn.fc1.out_features
    ref = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([block.attn.q_proj.bias, block.attn.k_proj.bias, block.attn.v_proj.bias]))
        ref.self_attn.out_proj.load_state_dict(block.attn.out_proj.state_dict())
        ref.linear1.load_state_dict(block.ffn.fc1.state_dict())
        ref.linear2.load_state_dict(block.ffn.fc2.state_dict())
        ref.norm1.load_state_dict(block.norm1.state_dict())
        ref.norm2.load_state_dict(block.norm2.state_dict())
    return ref.eval()


def _random_block(norm_first: bool, seed: int) -> EncoderBlock:
    torch.manual_seed(seed)
    block = EncoderBlock(16, 4, 48, dropout=0.0, norm_first=norm_first)
    with torch.no_grad():  # non-trivial norms and biases
        for norm in (block.norm1, block.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
        for layer in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj, block.attn.out_proj):
            layer.bias.normal_(0.0, 0.1)
    return block.eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_block_matches_torch_transformer_encoder_layer(norm_first):
    block = _random_block(norm_first, 3)
    ref = _torch_layer_from(block, norm_first)
    x = torch.randn(3, 6, 16)
    with torch.no_grad():
        torch.testing.assert_close(block(x), ref(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_block_padding_mask_matches_torch_key_padding_mask(norm_first):
    block = _random_block(norm_first, 4)
    ref = _torch_layer_from(block, norm_first)
    x = torch.randn(3, 6, 16)
    pad = padding_mask([6, 2, 4])
    with torch.no_grad():
        ours = block(x, key_mask(pad))
        theirs = ref(x, src_key_padding_mask=to_torch_key_padding_mask(pad))
    # torch may return anything at padded *query* positions (fast path); compare real tokens
    torch.testing.assert_close(ours[pad], theirs[pad], atol=ATOL, rtol=0)


def test_encoder_block_attention_weights_are_kept():
    block = EncoderBlock(8, 2, 16)
    block(torch.randn(2, 5, 8))
    assert block.attn_weights.shape == (2, 2, 5, 5)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block_matches_torch_transformer_decoder_layer(norm_first):
    torch.manual_seed(5)
    block = DecoderBlock(16, 4, 32, norm_first=norm_first).eval()
    ref = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    with torch.no_grad():
        for ours, theirs in ((block.self_attn, ref.self_attn), (block.cross_attn, ref.multihead_attn)):
            theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
            theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
            theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
        ref.linear1.load_state_dict(block.ffn.fc1.state_dict())
        ref.linear2.load_state_dict(block.ffn.fc2.state_dict())
        for i in (1, 2, 3):
            getattr(ref, f"norm{i}").load_state_dict(getattr(block, f"norm{i}").state_dict())
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    causal = causal_mask(5)
    with torch.no_grad():
        ours = block(x, memory, self_mask=causal)
        theirs = ref(x, memory, tgt_mask=~causal)  # torch: True = masked
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("residual", [True, False], ids=["residual", "no-residual"])
@pytest.mark.parametrize("norm", [True, False], ids=["norm", "no-norm"])
def test_encoder_block_switches_follow_their_formulas(norm_first, residual, norm):
    """residual=False drops the ``x +``, norm=False makes both norms the identity (reference: the formulas
    written out with the block's own sub-layers); the defaults are the transformer block."""
    block = _random_block(norm_first, 6)
    switched = EncoderBlock(16, 4, 48, norm_first=norm_first, residual=residual, norm=norm).eval()
    state = {k: v for k, v in block.state_dict().items() if norm or not k.startswith("norm")}
    switched.load_state_dict(state)
    n1 = block.norm1 if norm else nn.Identity()
    n2 = block.norm2 if norm else nn.Identity()
    skip = 1.0 if residual else 0.0
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        if norm_first:
            h = skip * x + block.attn(n1(x), n1(x), n1(x))[0]
            expected = skip * h + block.ffn(n2(h))
        else:
            h = n1(skip * x + block.attn(x, x, x)[0])
            expected = n2(skip * h + block.ffn(h))
        torch.testing.assert_close(switched(x), expected, atol=ATOL, rtol=0)
        if residual and norm:  # the defaults are exactly the block
            torch.testing.assert_close(switched(x), block(x), atol=0, rtol=0)
    assert switched.attn_weights.shape == (2, 4, 5, 5)
    assert len(list(switched.parameters())) == len(list(block.parameters())) - (0 if norm else 4)
