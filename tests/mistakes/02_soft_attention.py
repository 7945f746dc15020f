"""Plausible wrong answers to notebook 02; each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="additive_score", name="forgets the tanh",
            rejected_by=("test_additive_score",), replace=(("hidden = torch.tanh(", "hidden = ("),)),
    Mistake(cell="additive_score", name="tanh after the projection on v",
            rejected_by=("test_additive_score",),
            replace=(("hidden = torch.tanh(", "hidden = ("), ("return hidden @ v", "return torch.tanh(hidden @ v)"))),
    Mistake(cell="dot_general_score", name="dot score divided by sqrt(d)",
            rejected_by=("test_dot_general_score",),
            replace=(("return (keys @ query.unsqueeze(-1)).squeeze(-1)",
                      "return (keys @ query.unsqueeze(-1)).squeeze(-1) / math.sqrt(query.size(-1))"),)),
    Mistake(cell="dot_general_score", name="general score with W transposed",
            rejected_by=("test_dot_general_score",), replace=(("(query @ W)", "(query @ W.T)"),)),
    Mistake(cell="attend", name="softmax over the batch axis",
            rejected_by=("test_attend",), replace=(("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)"),)),
    Mistake(cell="attend", name="mask ignored",
            rejected_by=("test_attend",),
            replace=(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),)),
    Mistake(cell="attend", name="masked scores set to 0 instead of -inf",
            rejected_by=("test_attend",), replace=(('float("-inf")', "0.0"),)),
    Mistake(cell="attention_decoder_step", name="scores with the new state",
            rejected_by=("test_attention_decoder_step",),
            source=(
                "def attention_decoder_step(decoder, y_prev, s_prev, states, mask):\n"
                "    e = decoder.embed(y_prev)\n"
                "    context0, _ = attend(decoder.score(s_prev, states), states, mask)\n"
                "    s = decoder.cell(torch.cat([e, context0], dim=-1), s_prev)\n"
                "    context, weights = attend(decoder.score(s, states), states, mask)\n"
                "    logits = decoder.out(torch.cat([s, context, e], dim=-1))\n"
                "    return logits, s, weights\n"
            )),
    Mistake(cell="attention_decoder_step", name="forgets to pass the mask",
            rejected_by=("test_attention_decoder_step",),
            replace=(("attend(scores, states, mask)", "attend(scores, states)"),)),
]
