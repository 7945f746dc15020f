"""Plausible wrong answers to notebook 01; each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="encode_batch", name="forgets the eos token",
            rejected_by=("test_encode_batch",), replace=(("vocab.encode(text)", "vocab.encode(text, add_eos=False)"),)),
    Mistake(cell="encode", name="summary is states[:, -1] (padding)",
            rejected_by=("test_encode",),
            replace=(("summary = torch.cat([final[0], final[1]], dim=-1)", "summary = states[:, -1]"),)),
    Mistake(cell="encode", name="runs the GRU over the padding (no packing)",
            rejected_by=("test_encode",),
            source=(
                "def encode(encoder, src, src_len):\n"
                "    states, final = encoder.gru(encoder.embed(src))\n"
                "    summary = torch.cat([final[0], final[1]], dim=-1)\n"
                "    return states, summary\n"
            )),
    Mistake(cell="context_decoder_step", name="output layer reads the previous state",
            rejected_by=("test_context_decoder_step",),
            replace=(("decoder.out(torch.cat([s, context, e]", "decoder.out(torch.cat([s_prev, context, e]"),)),
    Mistake(cell="context_decoder_step", name="GRU input in the wrong order",
            rejected_by=("test_context_decoder_step",),
            replace=(("torch.cat([e, context], dim=-1)", "torch.cat([context, e], dim=-1)"),)),
    Mistake(cell="teacher_forcing_loss", name="targets not shifted right",
            rejected_by=("test_teacher_forcing_loss",),
            replace=(("inputs = torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)", "inputs = tgt"),)),
    Mistake(cell="teacher_forcing_loss", name="padding counted in the loss",
            rejected_by=("test_teacher_forcing_loss",), replace=((", ignore_index=pad_id", ""),)),
    Mistake(cell="greedy_decode", name="decoder state never updated",
            rejected_by=("test_greedy_decode",),
            replace=(("logits, state, _ = model.decoder.step(y, state, states, mask)",
                      "logits, _, _ = model.decoder.step(y, state, states, mask)"),)),
    Mistake(cell="greedy_decode", name="finished rows keep generating",
            rejected_by=("test_greedy_decode",),
            replace=(("y = torch.where(done, torch.full_like(y, model.eos_id), y)", "pass"),)),
    Mistake(cell="accuracy_by_bucket", name="char accuracy divides by the prediction length",
            rejected_by=("test_accuracy_by_bucket",), replace=(("/ len(target)", "/ max(len(prediction), 1)"),)),
    Mistake(cell="accuracy_by_bucket", name="upper bucket edge included",
            rejected_by=("test_accuracy_by_bucket",), replace=(("lo <= n < hi", "lo <= n <= hi"),)),
]
