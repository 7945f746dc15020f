"""Unit tests of course_utils.rnn_seq2seq against plain torch references."""

import pytest
import torch

from course_utils import rnn_seq2seq as rs


def test_shift_right():
    t = torch.tensor([[5, 6, 2], [7, 2, 0]])
    assert rs.shift_right(t, 1).tolist() == [[1, 5, 6], [1, 7, 2]]


def test_scores_match_loops():
    torch.manual_seed(0)
    B, S, D, H, A = 2, 5, 4, 6, 3
    s, h = torch.randn(B, D), torch.randn(B, S, H)
    W, U, v = torch.randn(A, D), torch.randn(A, H), torch.randn(A)
    G = torch.randn(D, H)
    h_same = torch.randn(B, S, D)
    for b in range(B):
        for j in range(S):
            add = v @ torch.tanh(W @ s[b] + U @ h[b, j])
            torch.testing.assert_close(rs.additive_score(s, h, W, U, v)[b, j], add, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(rs.general_score(s, h, G)[b, j], s[b] @ G @ h[b, j], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(rs.dot_score(s, h_same)[b, j], s[b] @ h_same[b, j], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["additive", "dot", "general"])
def test_score_module_fast_path_equals_formula(kind):
    torch.manual_seed(1)
    score = rs.Score(kind, 8, 8, 5)
    q, k = torch.randn(3, 8), torch.randn(3, 7, 8)
    torch.testing.assert_close(score.fast(q, score.prepare(k)), score(q, k), atol=1e-5, rtol=1e-5)


def test_attend_masks_padding():
    torch.manual_seed(2)
    scores, values = torch.randn(2, 4), torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    context, weights = rs.attend(scores, values, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    assert (weights[1, 2:] == 0).all()
    expected = torch.softmax(scores[1, :2], -1) @ values[1, :2]
    torch.testing.assert_close(context[1], expected)


def test_encoder_ignores_padding_and_summary_is_final_states():
    torch.manual_seed(3)
    enc = rs.Encoder(10, 4, 6, bidirectional=True)
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
    states, summary = enc(src, torch.tensor([4, 2]))
    assert states.shape == (2, 4, 6) and summary.shape == (2, 6)
    assert (states[1, 2:] == 0).all()
    alone, alone_summary = enc(src[1:, :2], torch.tensor([2]))  # same row without padding
    torch.testing.assert_close(states[1, :2], alone[0])
    torch.testing.assert_close(summary[1], alone_summary[0])
    # forward half = last real forward state; backward half = backward state at position 0
    torch.testing.assert_close(summary[:, :3], torch.stack([states[0, 3, :3], states[1, 1, :3]]))
    torch.testing.assert_close(summary[:, 3:], states[:, 0, 3:])


@pytest.mark.parametrize("attention", [None, "additive", "dot", "general"])
def test_teacher_forcing_matches_greedy_on_own_outputs(attention):
    torch.manual_seed(4)
    model = rs.build_seq2seq(12, attention=attention, embed_size=5, hidden_size=8).eval()
    src, src_len = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]]), torch.tensor([4, 3])
    ids, weights = rs.greedy_decode(model, src, src_len, max_len=6)
    assert ids.shape[0] == 2 and ids.shape[1] <= 6
    logits, att = model(src, src_len, ids)
    # teacher-forcing on the greedy output reproduces the greedy choices, up to each row's <eos>
    for row in range(2):
        eos = (ids[row] == model.eos_id).nonzero()
        n = int(eos[0]) + 1 if len(eos) else ids.shape[1]
        assert torch.equal(logits[row, :n].argmax(-1), ids[row, :n])
    if attention is None:
        assert att is None and weights is None
    else:
        assert att.shape == (2, ids.shape[1], 4)
        n = ids.shape[1]
        torch.testing.assert_close(att[:, :n], weights[:, :n])
        torch.testing.assert_close(att.sum(-1), torch.ones(2, ids.shape[1]))
        assert (att[1, :, 3] == 0).all()


def test_greedy_stops_and_pads_with_eos():
    torch.manual_seed(5)
    model = rs.build_seq2seq(6, attention="dot", embed_size=4, hidden_size=4).eval()
    with torch.no_grad():
        model.decoder.out.bias.fill_(-100.0)
        model.decoder.out.bias[model.eos_id] = 100.0
    ids, _ = rs.greedy_decode(model, torch.tensor([[4, 5, 2]]), torch.tensor([3]), max_len=10)
    assert ids.tolist() == [[model.eos_id]]


def test_dot_needs_equal_sizes():
    with pytest.raises(ValueError):
        rs.Score("dot", 4, 6)
    with pytest.raises(ValueError):
        rs.Score("cosine", 4, 4)
