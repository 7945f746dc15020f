"""course_utils.vit: patches, the patch embedding (matrix product = strided convolution), the ViT."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils.vit import PatchEmbedding, ViT, ViTConfig, cls_attention, patch_embed, patchify, position_similarity


def test_patchify_reading_order_and_conv_layout():
    img = torch.arange(16.0).reshape(1, 1, 4, 4)
    assert torch.equal(patchify(img, 2)[0], torch.tensor([[0.0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]))
    x = torch.randn(2, 3, 4, 6)
    # F.unfold is an independent implementation with the same (c, i, j) order and reading order; exact
    assert torch.equal(patchify(x, 2), F.unfold(x, 2, stride=2).transpose(1, 2))


def test_patch_embed_equals_strided_convolution():
    torch.manual_seed(0)
    embed = PatchEmbedding(3, 8, 2)
    x = torch.randn(2, 3, 4, 6)
    with torch.no_grad():
        expected = embed(x)
        got = patch_embed(x, embed.proj.weight, embed.proj.bias, 2)
    assert got.shape == (2, 6, 8)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)  # float32 sums in another order
    torch.testing.assert_close(patch_embed(x, embed.proj.weight, None, 2), expected - embed.proj.bias, atol=1e-5, rtol=1e-5)


def test_vit_shapes_attention_and_gradients():
    torch.manual_seed(0)
    config = ViTConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32)
    model = ViT(config)
    x = torch.rand(3, 1, 8, 8)
    logits = model(x)
    assert logits.shape == (3, 10)
    maps = model.attention_maps()
    assert len(maps) == 2 and maps[0].shape == (3, 2, 17, 17)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 2, 17))
    logits.sum().backward()
    assert model.cls_token.grad is not None and model.pos_embed.grad is not None
    grid = cls_attention(model, x)
    assert grid.shape == (3, 4, 4)
    torch.testing.assert_close(grid.sum((-2, -1)), 1 - maps[-1][:, :, 0, 0].mean(1), atol=1e-6, rtol=1e-6)


def test_position_similarity_is_cosine():
    pos = torch.randn(5, 7)
    sim = position_similarity(pos)
    torch.testing.assert_close(sim, F.cosine_similarity(pos[:, None], pos[None], dim=-1), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(sim.diagonal(), torch.ones(5))
