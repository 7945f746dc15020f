"""Unit tests of course_utils.lora on tiny random Llama models (CPU, a few seconds)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.device import cpu_threads
from course_utils.llama import Llama, LlamaConfig
from course_utils.lora import LoRALinear, add_lora, count_parameters, lora_parameters, merge_lora


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with cpu_threads(1):  # tiny models: as fast, and far faster on shared cores
        yield


def tiny(seed: int = 0) -> Llama:
    torch.manual_seed(seed)
    return Llama(LlamaConfig.tiny()).eval()


def test_lora_linear_formula_and_init():
    torch.manual_seed(0)
    base = nn.Linear(12, 7)
    layer = LoRALinear(base, rank=3, alpha=6.0)
    assert layer.base is base and layer.rank == 3 and layer.scaling == 2.0
    assert layer.lora_A.shape == (3, 12) and layer.lora_B.shape == (7, 3)
    assert torch.equal(layer.lora_B, torch.zeros(7, 3))  # the update starts at zero...
    assert layer.lora_A.abs().sum() > 0  # ...but A is random, so B gets a gradient
    assert not base.weight.requires_grad and not base.bias.requires_grad
    x = torch.randn(4, 5, 12)
    assert torch.equal(layer(x), base(x))
    with torch.no_grad():
        layer.lora_B.normal_()
    expected = base(x) + 2.0 * (x @ layer.lora_A.T @ layer.lora_B.T)
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(layer.delta_weight(), 2.0 * layer.lora_B @ layer.lora_A)
    assert (layer.in_features, layer.out_features) == (12, 7)
    with pytest.raises(ValueError):
        LoRALinear(nn.Linear(3, 3), rank=0)


def test_lora_follows_the_base_dtype_and_dropout():
    base = nn.Linear(8, 8, bias=False).to(torch.bfloat16)
    layer = LoRALinear(base, rank=2, alpha=4.0, dropout=0.5)
    assert layer.lora_A.dtype == layer.lora_B.dtype == torch.bfloat16
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        layer.lora_B.fill_(1.0)
    layer.eval()
    assert torch.equal(layer(x), layer(x))  # dropout off in eval
    layer.train()
    torch.manual_seed(0)
    a = layer(x)
    torch.manual_seed(1)
    assert not torch.equal(a, layer(x))  # on in training, on the LoRA branch


def test_add_lora_zero_init_keeps_logits_and_counts_parameters():
    model = tiny()
    x = torch.randint(0, 256, (2, 9))
    with torch.no_grad():
        before = model(x)
    n = add_lora(model, target_names=("q_proj", "v_proj"), rank=4, alpha=8)
    cfg = model.config
    per_layer = 4 * (cfg.d_model + cfg.n_heads * cfg.head_dim) + 4 * (cfg.d_model + cfg.n_kv_heads * cfg.head_dim)
    assert n == cfg.n_layers * per_layer == count_parameters(model)
    assert isinstance(model.blocks[1].attn.q_proj, LoRALinear)
    assert isinstance(model.blocks[1].attn.k_proj, nn.Linear) and not isinstance(model.blocks[1].attn.k_proj, LoRALinear)
    assert len(lora_parameters(model)) == 2 * 2 * cfg.n_layers
    with torch.no_grad():
        assert torch.equal(model(x), before)
    with pytest.raises(ValueError, match="no nn.Linear"):
        add_lora(tiny(), target_names=("query",))


def test_only_lora_parameters_get_gradients():
    model = tiny(1)
    add_lora(model, rank=2)
    trainable = {id(p) for p in lora_parameters(model)}
    assert {id(p) for p in model.parameters() if p.requires_grad} == trainable
    x = torch.randint(0, 256, (2, 6))
    loss = nn.functional.cross_entropy(model(x)[:, :-1].reshape(-1, 256), x[:, 1:].reshape(-1))
    loss.backward()
    for name, p in model.named_parameters():
        if id(p) in trainable:
            assert p.grad is not None, name
        else:
            assert p.grad is None, name
    # at the start B = 0: A's gradient is zero, B's is not
    a, b = model.blocks[0].attn.q_proj.lora_A, model.blocks[0].attn.q_proj.lora_B
    assert a.grad.abs().max() == 0 and b.grad.abs().max() > 0


def test_training_then_merge_gives_the_same_logits():
    model = tiny(2)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()}
    add_lora(model, target_names=("q_proj", "v_proj", "down_proj"), rank=4, alpha=16)
    opt = torch.optim.AdamW(lora_parameters(model), lr=1e-2)
    x = torch.randint(0, 256, (4, 12))
    model.train()
    losses = []
    for _ in range(15):
        loss = nn.functional.cross_entropy(model(x)[:, :-1].reshape(-1, 256), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    model.eval()
    with torch.no_grad():
        adapted = model(x)
        merge_lora(model)
        merged = model(x)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert type(model.blocks[0].attn.q_proj) is nn.Linear
    torch.testing.assert_close(merged, adapted, rtol=1e-4, atol=1e-4)  # float32, a different summation order
    names = dict(model.named_parameters())
    assert torch.equal(names["blocks.0.attn.k_proj.weight"], frozen["blocks.0.attn.k_proj.weight"])  # untouched
    assert not torch.equal(names["blocks.0.attn.q_proj.weight"], frozen["blocks.0.attn.q_proj.weight"])  # folded in
    assert model.lm_head.weight is model.embed.weight  # tying survives


def test_lora_is_much_smaller_than_full_fine_tuning():
    with torch.device("meta"):
        model = Llama(LlamaConfig.smollm2_135m())
    total = count_parameters(model)
    n = add_lora(model, rank=8, alpha=16)
    assert n == 30 * (8 * (576 + 576) + 8 * (576 + 192)) == 460_800
    assert n / total < 0.004
