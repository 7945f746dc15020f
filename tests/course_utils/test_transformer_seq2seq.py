"""Unit tests of course_utils.transformer_seq2seq against plain torch references (CPU, fast)."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import transformer_seq2seq as ts
from course_utils.seq2seq_data import make_string_task, string_vocab
from course_utils.seq2seq_train import evaluate_by_length


def _model(V=12, d=16, layers=2, norm_first=False, seed=0):
    torch.manual_seed(seed)
    return ts.TransformerSeq2Seq(V, d_model=d, n_heads=2, d_ff=32, n_layers=layers, dropout=0.0, norm_first=norm_first).eval()


def test_decoder_mask_is_causal_and_hides_padding():
    tgt_in = torch.tensor([[1, 5, 6, 2], [1, 7, 0, 0]])
    mask = ts.decoder_mask(tgt_in, pad_id=0)
    assert mask.shape == (2, 4, 4) and mask.dtype == torch.bool
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    assert torch.equal(mask[0], causal)
    expected = causal & torch.tensor([True, True, False, False])
    assert torch.equal(mask[1], expected)


def test_source_mask_shape():
    m = ts.source_mask(torch.tensor([3, 1]), 4)
    assert m.shape == (2, 1, 4)
    assert m[1, 0].tolist() == [True, False, False, False]


def test_label_smoothing_matches_torch():
    torch.manual_seed(1)
    logits, target = torch.randn(3, 5, 11), torch.randint(0, 11, (3, 5))
    target[0, 3:] = 0
    for eps in (0.0, 0.1, 0.3):
        ours = ts.label_smoothed_cross_entropy(logits, target, eps, ignore_index=0)
        ref = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=eps)
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_noam_lr_formula_and_scheduler():
    d, w = 512, 4000
    assert ts.noam_lr(1, d, w) == pytest.approx(d**-0.5 * w**-1.5)
    assert ts.noam_lr(w, d, w) == pytest.approx(d**-0.5 * w**-0.5)
    assert ts.noam_lr(4 * w, d, w) == pytest.approx(ts.noam_lr(w, d, w) / 2)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=1.0)
    sched = ts.noam_scheduler(opt, 64, 10, factor=2.0)
    seen = []
    for _ in range(20):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([ts.noam_lr(s, 64, 10, 2.0) for s in range(1, 21)])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal_and_ignores_source_padding(norm_first):
    model = _model(norm_first=norm_first)
    src, src_len = torch.tensor([[4, 5, 6, 2, 0]]), torch.tensor([4])
    tgt = torch.tensor([[7, 8, 9, 2]])
    logits, cross = model(src, src_len, tgt)
    assert logits.shape == (1, 4, 12) and cross.shape == (1, 4, 5)
    assert torch.allclose(cross[..., 4], torch.zeros(1, 4))  # padded source key gets no weight
    torch.testing.assert_close(cross.sum(-1), torch.ones(1, 4))
    # changing a later target token leaves earlier predictions unchanged
    tgt2 = tgt.clone()
    tgt2[0, 2] = 10
    logits2, _ = model(src, src_len, tgt2)
    torch.testing.assert_close(logits2[:, :3], logits[:, :3])
    assert not torch.allclose(logits2[:, 3], logits[:, 3])
    # changing the padding token of the source changes nothing
    src3 = src.clone()
    src3[0, 4] = 9
    torch.testing.assert_close(model(src3, src_len, tgt)[0], logits)


def test_greedy_decode_matches_teacher_forced_argmax():
    model = _model(seed=3)
    src, src_len = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]]), torch.tensor([4, 2])
    ids, weights = ts.greedy_decode_transformer(model, src, src_len, max_len=6)
    assert weights.shape[:2] == ids.shape and weights.shape[-1] == 4
    # feeding the greedy output back with teacher forcing reproduces it token by token
    logits, _ = model(src, src_len, ids)
    for b in range(2):
        eos = (ids[b] == model.eos_id).nonzero()
        n = int(eos[0]) + 1 if len(eos) else ids.size(1)
        assert torch.equal(logits[b, :n].argmax(-1), ids[b, :n])


def test_beam_step_against_brute_force():
    torch.manual_seed(4)
    scores, logp = torch.randn(2, 3), torch.randn(2, 3, 5).log_softmax(-1)
    best, beam, tok = ts.beam_step(scores, logp, 3)
    for b in range(2):
        flat = sorted(((float(scores[b, k] + logp[b, k, v]), k, v) for k in range(3) for v in range(5)), reverse=True)[:3]
        assert [(k, v) for _, k, v in flat] == list(zip(beam[b].tolist(), tok[b].tolist()))
        torch.testing.assert_close(best[b], torch.tensor([s for s, _, _ in flat]))


def test_beam_size_one_equals_greedy_and_beam_is_at_least_as_likely():
    model = _model(seed=5)
    src, src_len = torch.tensor([[4, 5, 6, 7, 2], [8, 9, 2, 0, 0]]), torch.tensor([5, 3])
    greedy, _ = ts.greedy_decode_transformer(model, src, src_len, max_len=7)
    beam1, _ = ts.beam_search(model, src, src_len, max_len=7, beam_size=1)
    assert torch.equal(greedy, beam1)

    def logprob(ids):
        logits, _ = model(src, src_len, ids)
        logp = logits.log_softmax(-1).gather(-1, ids[..., None]).squeeze(-1)
        keep = torch.cumsum((ids == model.eos_id).long(), 1) - (ids == model.eos_id).long() == 0
        return (logp * keep).sum(-1)

    beam4, score4 = ts.beam_search(model, src, src_len, max_len=7, beam_size=4)
    torch.testing.assert_close(logprob(beam4), score4, atol=1e-4, rtol=1e-4)
    assert bool((logprob(beam4) >= logprob(greedy) - 1e-5).all())


def test_training_reduces_loss_and_translate_runs():
    data = make_string_task(100, 8, task="reverse", min_len=2, max_len=4, seed=0)
    vocab = string_vocab()
    torch.manual_seed(0)
    model = ts.TransformerSeq2Seq(len(vocab), d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0)
    losses, lrs = ts.train_transformer(model, data["train"], vocab, steps=20, batch_size=16, warmup=5)
    assert len(losses) == len(lrs) == 20
    assert sum(losses[-5:]) < sum(losses[:5])
    assert lrs[4] == pytest.approx(max(lrs))
    out, att = ts.translate_transformer(model, data["test"]["source"], vocab, return_attention=True)
    assert len(out) == len(att) == 8
    beams = ts.translate_transformer(model, data["test"]["source"], vocab, beam_size=3)
    assert len(beams) == 8
    # one evaluation for both model families: the translating function is its argument
    rows, preds = evaluate_by_length(model, data["test"], vocab, [2, 4, 6], translate_with=ts.translate_transformer)
    assert preds == out and sum(r["n"] for r in rows) == 8
    _, beam_preds = evaluate_by_length(model, data["test"], vocab, [2, 4, 6], translate_with=ts.translate_transformer,
                                       beam_size=3)
    assert beam_preds == beams
    assert math.isfinite(losses[-1])


def test_linear_decay_lr():
    assert ts.linear_decay_lr(1, 1e-3, 10, 0.0) == pytest.approx(1e-4)
    assert ts.linear_decay_lr(10, 1e-3, 10, 0.0) == pytest.approx(1e-3)
    assert ts.linear_decay_lr(50, 1e-3, 10, 0.5) == pytest.approx(5e-4)
    assert ts.linear_decay_lr(90, 1e-3, 10, 1.2) == 0.0


def test_linear_schedule_time_budget_and_stats():
    data = make_string_task(64, 0, task="reverse", min_len=2, max_len=4, seed=0)
    vocab = string_vocab()
    torch.manual_seed(0)
    model = ts.TransformerSeq2Seq(len(vocab), d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, norm_first=True)
    stats = {}
    losses, lrs = ts.train_transformer(model, data["train"], vocab, steps=12, batch_size=16, warmup=4, factor=0.5,
                                       schedule="linear", stats=stats)
    peak = ts.noam_lr(4, 16, 4, 0.5)
    assert lrs == pytest.approx([ts.linear_decay_lr(s, peak, 4, s / 12) for s in range(1, 13)])
    assert lrs[-1] == 0.0 and stats["steps"] == 12 and stats["tokens"] > 12 * 16 * 2
    assert stats["tokens_per_s"] == pytest.approx(stats["tokens"] / stats["seconds"])
    # a spent budget stops training after the step that spent it
    losses, _ = ts.train_transformer(model, data["train"], vocab, steps=1000, batch_size=16, warmup=4, time_budget=0.0)
    assert len(losses) == 1
    with pytest.raises(ValueError):
        ts.train_transformer(model, data["train"], vocab, steps=2, schedule="cosine")
