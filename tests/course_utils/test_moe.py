"""course_utils.moe: routing, the balancing loss, capacity, and GPTs with MoE feed-forward layers."""

from __future__ import annotations

import torch

from course_utils.gpt import GPTConfig, train_lm
from course_utils.moe import (MoEFeedForward, capacity_keep, dense_gpt, expert_capacity, ffn_parameters, load_balancing_loss,
                              moe_gpt, top_k_gating)


def test_top_k_gating_matches_softmax_of_selected_logits():
    torch.manual_seed(0)
    logits = torch.randn(10, 6)
    w, e = top_k_gating(logits, 2)
    torch.testing.assert_close(w, torch.softmax(logits.gather(-1, e), dim=-1))  # Mixtral's form
    w1, e1 = top_k_gating(logits, 1, normalize=False)
    torch.testing.assert_close(w1[:, 0], torch.softmax(logits, -1).max(-1).values)
    assert torch.equal(e1[:, 0], logits.argmax(-1))


def test_load_balancing_loss_bounds():
    N, E = 12, 4
    uniform = torch.full((N, E), 1 / E)
    balanced = torch.arange(N).remainder(E)[:, None]
    torch.testing.assert_close(load_balancing_loss(uniform, balanced), torch.tensor(1.0))
    collapsed = torch.zeros(N, E)
    collapsed[:, 2] = 1
    torch.testing.assert_close(load_balancing_loss(collapsed, torch.full((N, 1), 2)), torch.tensor(float(E)))


def test_capacity_rule():
    assert expert_capacity(10, 4, 2, 1.25) == 7  # ceil(6.25)
    experts = torch.tensor([[0, 1], [1, 0], [1, 2]])
    assert capacity_keep(experts, 3, 2).tolist() == [[True, False], [True, True], [True, True]]
    assert capacity_keep(experts, 3, 0).sum() == 0 and capacity_keep(experts, 3, 6).all()


def test_moe_layer_equals_explicit_mixture_without_capacity():
    torch.manual_seed(0)
    layer = MoEFeedForward(8, 16, n_experts=4, k=2, capacity_factor=None, aux_weight=0.0)
    x = torch.randn(2, 5, 8)
    out = layer(x)
    tokens = x.reshape(-1, 8)
    w, e = top_k_gating(layer.router(tokens), 2)
    expected = torch.stack([sum(w[t, j] * layer.experts[int(e[t, j])](tokens[t]) for j in range(2)) for t in range(10)])
    torch.testing.assert_close(out.reshape(-1, 8), expected, atol=1e-6, rtol=1e-5)
    assert layer.dropped == 0.0


def test_aux_loss_reaches_router_gradient():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)
    grads = {}
    for weight in (0.0, 1.0):
        torch.manual_seed(1)
        layer = MoEFeedForward(8, 16, n_experts=4, k=1, capacity_factor=None, aux_weight=weight)
        layer(x).sum().backward()
        grads[weight] = layer.router.weight.grad.clone()
        torch.manual_seed(1)
        ref = MoEFeedForward(8, 16, n_experts=4, k=1, capacity_factor=None, aux_weight=0.0)
        out = ref(x)
        (out.sum() + weight * load_balancing_loss(
            torch.softmax(ref.router(x.reshape(-1, 8)), -1), ref.experts_chosen)).backward()
        torch.testing.assert_close(grads[weight], ref.router.weight.grad, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(grads[0.0], grads[1.0])


def test_moe_gpt_trains_with_train_lm_and_keeps_tying():
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16)
    torch.manual_seed(0)
    model = moe_gpt(config, n_experts=4, k=2)
    assert model.lm_head.weight is model.wte.weight
    params = ffn_parameters(model)
    dense = ffn_parameters(dense_gpt(config, 4 * 16))
    assert abs(params["active"] - dense["active"]) <= 2 * (4 * 16 + 2 * 2 * 16)  # router + halved biases
    data = torch.randint(0, 11, (400,))
    history = train_lm(model, data, data, steps=3, batch_size=4, warmup=1, eval_every=3, eval_batches=1)
    assert len(history["train_batch"]) == 3
    assert len(model.blocks[0].ffn.load_history) == 3
