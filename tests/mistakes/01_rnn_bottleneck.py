"""Plausible wrong answers to notebook 01; each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(cell="encode_batch", name="forgets the eos token",
            rejected_by=("test_encode_batch",), replace=(("vocab.encode(text)", "vocab.encode(text, add_eos=False)"),), kind="logic"),
    Mistake(cell="encode", name="summary is states[:, -1] (padding)",
            rejected_by=("test_encode",),
            replace=(("summary = torch.cat([final[0], final[1]], dim=-1)", "summary = states[:, -1]"),), kind="logic"),
    Mistake(cell="encode", name="runs the GRU over the padding (no packing)",
            rejected_by=("test_encode",),
            source=(
                "def encode(encoder, src, src_len):\n"
                "    states, final = encoder.gru(encoder.embed(src))\n"
                "    summary = torch.cat([final[0], final[1]], dim=-1)\n"
                "    return states, summary\n"
            ), kind="logic"),
    Mistake(cell="context_decoder_step", name="output layer reads the previous state",
            rejected_by=("test_context_decoder_step",),
            replace=(("decoder.out(torch.cat([s, context, e]", "decoder.out(torch.cat([s_prev, context, e]"),), kind="logic"),
    Mistake(cell="context_decoder_step", name="GRU input in the wrong order",
            rejected_by=("test_context_decoder_step",),
            replace=(("torch.cat([e, context], dim=-1)", "torch.cat([context, e], dim=-1)"),), kind="logic"),
    Mistake(cell="teacher_forcing_loss", name="targets not shifted right",
            rejected_by=("test_teacher_forcing_loss",),
            replace=(("inputs = torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)", "inputs = tgt"),), kind="logic"),
    Mistake(cell="teacher_forcing_loss", name="padding counted in the loss",
            rejected_by=("test_teacher_forcing_loss",), replace=((", ignore_index=pad_id", ""),), kind="logic"),
    Mistake(cell="greedy_decode", name="decoder state never updated",
            rejected_by=("test_greedy_decode",),
            replace=(("logits, state, _ = model.decoder.step(y, state, states, mask)",
                      "logits, _, _ = model.decoder.step(y, state, states, mask)"),), kind="logic"),
    Mistake(cell="greedy_decode", name="finished rows keep generating",
            rejected_by=("test_greedy_decode",),
            replace=(("y = torch.where(done, torch.full_like(y, model.eos_id), y)", "pass"),), kind="logic"),
    Mistake(cell="accuracy_by_bucket", name="char accuracy divides by the prediction length",
            rejected_by=("test_accuracy_by_bucket",), replace=(("/ len(target)", "/ max(len(prediction), 1)"),), kind="logic"),
    Mistake(cell="accuracy_by_bucket", name="upper bucket edge included",
            rejected_by=("test_accuracy_by_bucket",), replace=(("lo <= n < hi", "lo <= n <= hi"),), kind="boundary"),
    # found by the blind red team of issue 12 (they kept full marks before)
    Mistake(cell='encode_batch', name='pads with literal 0 instead of vocab.pad_id', kind='argument',
            rejected_by=('test_encode_batch',), source='''\
def encode_batch(texts: list[str], vocab: CharVocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode `texts` (each with <eos>) and right-pad them with vocab.pad_id -> (ids (B, T_max), lengths (B,))."""
    seqs = [vocab.encode(t) for t in texts]
    T = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) for s in seqs])
'''),
    Mistake(cell='encode_batch', name="the package's pad_sequences", kind='reference',
            rejected_by=('test_encode_batch',), source='''\
def encode_batch(texts: list[str], vocab: CharVocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode `texts` (each with <eos>) and right-pad them with vocab.pad_id -> (ids (B, T_max), lengths (B,))."""
    return pad_sequences([vocab.encode(t) for t in texts], vocab.pad_id)
'''),
    Mistake(cell='encode', name='no total_length: states only as long as the longest row', kind='argument',
            rejected_by=('test_encode',), source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    packed = pack_padded_sequence(encoder.embed(src), src_len.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    states, _ = pad_packed_sequence(out, batch_first=True)
    return states, torch.cat([h_n[0], h_n[1]], dim=-1)
'''),
    Mistake(cell='encode', name='row loop into torch.zeros made without device/dtype', kind='device',
            rejected_by=('test_encode',), source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    B, S = src.shape
    H = 2 * encoder.gru.hidden_size
    states = torch.zeros(B, S, H)
    summary = torch.zeros(B, H)
    for b in range(B):
        L = int(src_len[b])
        out, h_n = encoder.gru(encoder.embed(src[b : b + 1, :L]))
        states[b, :L] = out[0]
        summary[b] = torch.cat([h_n[0, 0], h_n[1, 0]])
    return states, summary
'''),
    Mistake(cell='encode', name="calls the course Encoder's forward", kind='reference',
            rejected_by=('test_encode',), source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    return encoder(src, src_len)
'''),
    Mistake(cell='context_decoder_step', name='new state detached', kind='autograd',
            rejected_by=('test_context_decoder_step',), source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    e = decoder.embed(y_prev)
    s = decoder.cell(torch.cat([e, context], dim=-1), s_prev)
    return decoder.out(torch.cat([s, context, e], dim=-1)), s.detach()
'''),
    Mistake(cell='context_decoder_step', name='one-hot embedding in float32', kind='dtype',
            rejected_by=('test_context_decoder_step',), source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    one_hot = F.one_hot(y_prev, decoder.embed.num_embeddings).float()
    e = one_hot @ decoder.embed.weight.float()
    s = decoder.cell(torch.cat([e, context.float()], dim=-1), s_prev.float())
    return decoder.out(torch.cat([s, context.float(), e], dim=-1)), s
'''),
    Mistake(cell='context_decoder_step', name='calls decoder.step (the reference)', kind='reference',
            rejected_by=('test_context_decoder_step',), source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    logits, state, _ = decoder.step(y_prev, {"s": s_prev, "context": context}, None, None)
    return logits, state["s"]
'''),
    Mistake(cell='teacher_forcing_loss', name='ignore_index hard-coded to 0, pad_id ignored', kind='argument',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    inputs = torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)
    logits = []
    for t in range(tgt.size(1)):
        out, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logits.append(out)
    logits = torch.stack(logits, 1)
    return F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=0)
'''),
    Mistake(cell='teacher_forcing_loss', name='<bos> column built without device', kind='device',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    bos = torch.full((tgt.size(0), 1), bos_id, dtype=torch.long)
    inputs = torch.cat([bos, tgt[:, :-1]], dim=1)
    logits = []
    for t in range(tgt.size(1)):
        out, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logits.append(out)
    logits = torch.stack(logits, 1)
    return F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=pad_id)
'''),
    Mistake(cell='teacher_forcing_loss', name='loss rebuilt from .item(): no gradient reaches the model', kind='autograd',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    inputs = torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1)
    logits = []
    for t in range(tgt.size(1)):
        out, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logits.append(out)
    logits = torch.stack(logits, 1)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=pad_id)
    return torch.tensor(loss.item(), requires_grad=True)
'''),
    Mistake(cell='teacher_forcing_loss', name="the package's teacher-forced forward", kind='reference',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    logits, _ = model(src, src_len, tgt)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=pad_id)
'''),
    Mistake(cell='greedy_decode', name='start token made without device', kind='device',
            rejected_by=('test_greedy_decode',), source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.tensor([model.bos_id] * src.size(0))
        done = torch.zeros(src.size(0), dtype=torch.bool)
        out = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1).masked_fill(done, model.eos_id)
            out.append(y)
            done |= y == model.eos_id
            if done.all():
                break
        return torch.stack(out, 1)
'''),
    Mistake(cell='greedy_decode', name="the package's greedy_decode", kind='reference',
            rejected_by=('test_greedy_decode',), source='''\
from course_utils.rnn_seq2seq import greedy_decode as _greedy
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    return _greedy(model, src, src_len, max_len)[0]
'''),
    Mistake(cell='accuracy_by_bucket', name='upper edge included', kind='boundary',
            rejected_by=('test_accuracy_by_bucket',), source='''\
def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters found at the same position in the prediction."""
    if not target:
        return 1.0
    return sum(p == t for p, t in zip(prediction, target)) / len(target)


def accuracy_by_bucket(predictions: list[str], targets: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """One dict {"lo", "hi", "n", "exact", "char"} per non-empty bucket [edges[j], edges[j+1])."""
    rows = []
    for j, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        last = j == len(edges) - 2
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi or (last and n == hi)]
        if idx:
            rows.append({"lo": lo, "hi": hi - 1, "n": len(idx),
                         "exact": sum(predictions[i] == targets[i] for i in idx) / len(idx),
                         "char": sum(char_accuracy(predictions[i], targets[i]) for i in idx) / len(idx)})
    return rows
'''),
    # second blind red team (round 2): escapes closed by new tests
    Mistake(cell='context_decoder_step', name='squeeze() on the embedding (B=1 breaks)', kind='boundary',
            rejected_by=('test_context_decoder_step',), source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    e = decoder.embed(y_prev.view(-1, 1)).squeeze()
    s = decoder.cell(torch.cat([e, context], dim=-1), s_prev)
    logits = decoder.out(torch.cat([s, context, e], dim=-1))
    return logits, s
'''),
    Mistake(cell='teacher_forcing_loss', name='mask from model.encode not passed to decoder.step (loss)', kind='argument',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, _ = model.encode(src, src_len)
    B, T = tgt.shape
    inputs = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype, device=tgt.device), tgt[:, :-1]], dim=1)
    logits = []
    for t in range(T):
        step_logits, state, _ = model.decoder.step(inputs[:, t], state, states, None)
        logits.append(step_logits)
    logits = torch.stack(logits, dim=1)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=pad_id)
'''),
    Mistake(cell='greedy_decode', name='mask from model.encode not passed to decoder.step (greedy)', kind='argument',
            rejected_by=('test_greedy_decode',), source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    with torch.no_grad():
        states, state, _ = model.encode(src, src_len)
        y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        outs = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, None)
            y = logits.argmax(-1)
            y = torch.where(done, torch.full_like(y, model.eos_id), y)
            outs.append(y)
            done = done | (y == model.eos_id)
            if done.all():
                break
        return torch.stack(outs, dim=1)
'''),
    Mistake(cell='accuracy_by_bucket', name='hi = largest length observed in the bucket, not edge - 1', kind='boundary',
            rejected_by=('test_accuracy_by_bucket',), source='''\
def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters found at the same position in the prediction."""
    if len(target) == 0:
        return 1.0
    return sum(p == t for p, t in zip(prediction, target)) / len(target)


def accuracy_by_bucket(predictions: list[str], targets: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """One dict {"lo", "hi", "n", "exact", "char"} per non-empty bucket [edges[j], edges[j+1])."""
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if not idx:
            continue
        rows.append({"lo": lo, "hi": max(lengths[i] for i in idx), "n": len(idx),
                     "exact": sum(predictions[i] == targets[i] for i in idx) / len(idx),
                     "char": sum(char_accuracy(predictions[i], targets[i]) for i in idx) / len(idx)})
    return rows
'''),
    Mistake(cell='teacher_forcing_loss', name='logits cast with .float() before the loss (float64 model)', kind='dtype',
            rejected_by=('test_teacher_forcing_loss',), source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    B, T = tgt.shape
    inputs = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype, device=tgt.device), tgt[:, :-1]], dim=1)
    logits = []
    for t in range(T):
        step_logits, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logits.append(step_logits)
    logits = torch.stack(logits, dim=1).float()
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=pad_id)
'''),
    Mistake(cell='greedy_decode', name='no torch.no_grad in greedy_decode', kind='autograd',
            rejected_by=('test_greedy_decode',), source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    states, state, mask = model.encode(src, src_len)
    y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    outs = []
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state, states, mask)
        y = logits.argmax(-1)
        y = torch.where(done, torch.full_like(y, model.eos_id), y)
        outs.append(y)
        done = done | (y == model.eos_id)
        if done.all():
            break
    return torch.stack(outs, dim=1)
'''),
    Mistake(cell='greedy_decode', name="calls model.eval() and leaves the caller's model in eval mode", kind='structure',
            rejected_by=('test_greedy_decode',), source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    model.eval()
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        outs = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1)
            y = torch.where(done, torch.full_like(y, model.eos_id), y)
            outs.append(y)
            done = done | (y == model.eos_id)
            if done.all():
                break
        return torch.stack(outs, dim=1)
'''),
]

# right answers in other styles, written blind from the release (issue 12): each must pass its tests
ACCEPTED = [
    Accepted(cell='encode_batch', name='python lists padded then torch.tensor', source='''\
def encode_batch(texts: list[str], vocab: CharVocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode `texts` (each with <eos>) and right-pad them with vocab.pad_id -> (ids (B, T_max), lengths (B,))."""
    seqs = [vocab.encode(t) for t in texts]
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [vocab.pad_id] * (T - len(s)) for s in seqs], dtype=torch.long)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    return ids, lengths
'''),
    Accepted(cell='encode_batch', name='nn.utils.rnn.pad_sequence', source='''\
from torch.nn.utils.rnn import pad_sequence as _pad
def encode_batch(texts: list[str], vocab: CharVocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode `texts` (each with <eos>) and right-pad them with vocab.pad_id -> (ids (B, T_max), lengths (B,))."""
    rows = [torch.as_tensor(vocab.encode(t), dtype=torch.long) for t in texts]
    lengths = torch.as_tensor([r.numel() for r in rows], dtype=torch.long)
    return _pad(rows, batch_first=True, padding_value=vocab.pad_id), lengths
'''),
    Accepted(cell='encode_batch', name='torch.full then fill rows', source='''\
def encode_batch(texts: list[str], vocab: CharVocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode `texts` (each with <eos>) and right-pad them with vocab.pad_id -> (ids (B, T_max), lengths (B,))."""
    encoded = [vocab.encode(t) for t in texts]
    lengths = torch.tensor(list(map(len, encoded)))
    ids = torch.full((len(texts), int(lengths.max())), vocab.pad_id, dtype=torch.long)
    for b, seq in enumerate(encoded):
        ids[b, : len(seq)] = torch.tensor(seq)
    assert ids.dtype == torch.long and lengths.dtype == torch.long
    return ids, lengths
'''),
    Accepted(cell='encode', name='pack, gru, unpack with total_length, h_n concat', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    packed = pack_padded_sequence(encoder.embed(src), src_len.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
    summary = torch.cat([h_n[-2], h_n[-1]], dim=-1)
    return states, summary
'''),
    Accepted(cell='encode', name='summary gathered from the unpacked states', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    x = encoder.embed(src)
    packed = pack_padded_sequence(x, src_len.to("cpu"), batch_first=True, enforce_sorted=False)
    out, _ = encoder.gru(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, padding_value=0.0, total_length=src.shape[1])
    half = states.size(-1) // 2
    last = (src_len.to(states.device) - 1).long()
    rows = torch.arange(states.size(0), device=states.device)
    summary = torch.cat([states[rows, last, :half], states[:, 0, half:]], dim=-1)
    return states, summary
'''),
    Accepted(cell='encode', name='one row at a time, no packing', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    all_states, summaries = [], []
    for b in range(src.size(0)):
        L = int(src_len[b])
        out, h_n = encoder.gru(encoder.embed(src[b : b + 1, :L]))
        out = torch.nn.functional.pad(out, (0, 0, 0, src.size(1) - L))
        all_states.append(out[0])
        summaries.append(torch.cat([h_n[0, 0], h_n[1, 0]]))
    return torch.stack(all_states), torch.stack(summaries)
'''),
    Accepted(cell='context_decoder_step', name='cat, cell, out', source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    e = decoder.embed(y_prev)
    s = decoder.cell(torch.cat([e, context], dim=-1), s_prev)
    return decoder.out(torch.cat([s, context, e], dim=-1)), s
'''),
    Accepted(cell='context_decoder_step', name='embedding by weight indexing, split output matrix', source='''\
def context_decoder_step(decoder: ContextDecoder, y_prev: torch.Tensor, s_prev: torch.Tensor,
                         context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the decoder without attention -> (logits (B, V), new state s (B, D))."""
    e = decoder.embed.weight[y_prev]
    s = decoder.cell(torch.hstack((e, context)), s_prev)
    D, H = s.size(1), context.size(1)
    W = decoder.out.weight
    logits = s @ W[:, :D].T + context @ W[:, D:D + H].T + e @ W[:, D + H:].T + decoder.out.bias
    return logits, s
'''),
    Accepted(cell='teacher_forcing_loss', name='loop, stack, cross_entropy ignore_index', source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    bos = torch.full((tgt.size(0), 1), bos_id, dtype=tgt.dtype, device=tgt.device)
    inputs = torch.cat([bos, tgt[:, :-1]], dim=1)
    logits = []
    for t in range(tgt.size(1)):
        step_logits, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logits.append(step_logits)
    logits = torch.stack(logits, dim=1)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=pad_id)
'''),
    Accepted(cell='teacher_forcing_loss', name='summed masked NLL divided by token count', source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    y_prev = torch.full_like(tgt[:, 0], bos_id)
    total, count = 0.0, 0
    for t in range(tgt.size(1)):
        logits, state, _ = model.decoder.step(y_prev, state, states, mask)
        keep = tgt[:, t] != pad_id
        nll = -torch.log_softmax(logits, dim=-1).gather(1, tgt[:, t:t + 1]).squeeze(1)
        total = total + (nll * keep).sum()
        count += int(keep.sum())
        y_prev = tgt[:, t]
    return total / count
'''),
    Accepted(cell='greedy_decode', name='batched loop with a finished mask', source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        out = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1)
            y = torch.where(done, torch.full_like(y, model.eos_id), y)
            out.append(y)
            done = done | (y == model.eos_id)
            if bool(done.all()):
                break
        return torch.stack(out, dim=1)
'''),
    Accepted(cell='greedy_decode', name='one row at a time, padded with <eos>', source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    rows = []
    with torch.no_grad():
        for b in range(src.size(0)):
            L = int(src_len[b])
            states, state, mask = model.encode(src[b : b + 1, :L], src_len[b : b + 1])
            y = torch.tensor([model.bos_id], device=src.device)
            row = []
            for _ in range(max_len):
                logits, state, _ = model.decoder.step(y, state, states, mask)
                y = logits.argmax(dim=-1)
                row.append(int(y))
                if row[-1] == model.eos_id:
                    break
            rows.append(row)
    T = max(len(r) for r in rows)
    return torch.tensor([r + [model.eos_id] * (T - len(r)) for r in rows], dtype=torch.long, device=src.device)
'''),
    Accepted(cell='greedy_decode', name='finished rows dropped from the batch', source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    with torch.no_grad():
        B = src.size(0)
        states, state, mask = model.encode(src, src_len)
        active = torch.arange(B, device=src.device)
        y = torch.full((B,), model.bos_id, dtype=torch.long, device=src.device)
        steps = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1)
            column = torch.full((B,), model.eos_id, dtype=torch.long, device=src.device)
            column[active] = y
            steps.append(column)
            keep = y != model.eos_id
            if not bool(keep.any()):
                break
            active, y, states, mask = active[keep], y[keep], states[keep], mask[keep]
            state = {k: v[keep] for k, v in state.items()}
        return torch.stack(steps, 1)
'''),
    Accepted(cell='greedy_decode', name='device taken from the parameters, preallocated output', source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    device = next(model.parameters()).device
    src, src_len = src.to(device), src_len.to(device)
    B = src.size(0)
    out = torch.full((B, max_len), model.eos_id, dtype=torch.long, device=device)
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.full((B,), model.bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(B, dtype=torch.bool, device=device)
        t = 0
        while t < max_len and not finished.all():
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1).masked_fill(finished, model.eos_id)
            out[:, t] = y
            finished |= y == model.eos_id
            t += 1
    return out[:, :t]
'''),
    Accepted(cell='accuracy_by_bucket', name='plain loops', source='''\
def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters found at the same position in the prediction."""
    if not target:
        return 1.0 if not prediction else 0.0
    return sum(1 for i, ch in enumerate(target) if i < len(prediction) and prediction[i] == ch) / len(target)


def accuracy_by_bucket(predictions: list[str], targets: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """One dict {"lo", "hi", "n", "exact", "char"} per non-empty bucket [edges[j], edges[j+1])."""
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if not idx:
            continue
        rows.append({"lo": lo, "hi": hi - 1, "n": len(idx),
                     "exact": sum(predictions[i] == targets[i] for i in idx) / len(idx),
                     "char": sum(char_accuracy(predictions[i], targets[i]) for i in idx) / len(idx)})
    return rows
'''),
    Accepted(cell='accuracy_by_bucket', name='bisect into groups, statistics.mean', source='''\
import bisect
import statistics

def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters found at the same position in the prediction."""
    if len(target) == 0:
        return 1.0
    hits = sum(p == t for p, t in zip(prediction, target))
    return float(hits / len(target))


def accuracy_by_bucket(predictions: list[str], targets: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """One dict {"lo", "hi", "n", "exact", "char"} per non-empty bucket [edges[j], edges[j+1])."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        j = bisect.bisect_right(edges, n) - 1
        if 0 <= j < len(edges) - 1:
            groups.setdefault(j, []).append(i)
    out = []
    for j in sorted(groups):
        idx = groups[j]
        out.append(dict(lo=edges[j], hi=edges[j + 1] - 1, n=len(idx),
                        exact=statistics.mean(float(predictions[i] == targets[i]) for i in idx),
                        char=statistics.mean(char_accuracy(predictions[i], targets[i]) for i in idx)))
    return out
'''),
    Accepted(cell='teacher_forcing_loss', name='CPU scalar accumulator, boolean row selection', source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    y_prev = tgt.new_full((tgt.size(0),), bos_id)
    total, count = torch.tensor(0.0), 0
    for t in range(tgt.size(1)):
        logits, state, _ = model.decoder.step(y_prev, state, states, mask)
        real = tgt[:, t] != pad_id
        if real.any():
            total = total + F.cross_entropy(logits[real], tgt[real, t], reduction="sum")
            count += int(real.sum())
        y_prev = tgt[:, t]
    return total / count
'''),
    # second blind red team (round 2): right answers that must keep passing
    Accepted(cell='encode', name='summary gathered from the unpacked states, split in two halves', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    x = encoder.embed(src)
    packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
    B = src.size(0)
    idx = torch.arange(B, device=src.device)
    half = states.size(-1) // 2
    fwd = states[idx, src_len.to(src.device) - 1, :half]
    bwd = states[:, 0, half:]
    return states, torch.cat([fwd, bwd], dim=-1)
'''),
    Accepted(cell='encode', name='sort by length, pack sorted, unsort', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    lens, order = torch.sort(src_len.cpu(), descending=True)
    undo = torch.argsort(order)
    x = encoder.embed(src[order.to(src.device)])
    out, h_n = encoder.gru(pack_padded_sequence(x, lens, batch_first=True))
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
    summary = h_n.transpose(0, 1).reshape(src.size(0), -1)
    undo = undo.to(src.device)
    return states[undo], summary[undo]
'''),
    Accepted(cell='encode', name='lengths as a Python list, h_n[-2], h_n[-1]', source='''\
def encode(encoder: Encoder, src: torch.Tensor, src_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, src_len (B,) -> states (B, S, H) with zeros at padding, summary (B, H) = [h_L ; g_1]."""
    packed = pack_padded_sequence(encoder.embed(src), src_len.tolist(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, padding_value=0.0, total_length=src.shape[1])
    return states, torch.cat((h_n[-2], h_n[-1]), dim=1)
'''),
    Accepted(cell='teacher_forcing_loss', name='log_softmax + gather, masked mean', source='''\
def teacher_forcing_loss(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor,
                         bos_id: int, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of tgt (B, T) given src, with the true previous tokens as decoder inputs."""
    states, state, mask = model.encode(src, src_len)
    inputs = tgt.roll(1, dims=1)
    inputs[:, 0] = bos_id
    nll = []
    for t in range(tgt.size(1)):
        logits, state, _ = model.decoder.step(inputs[:, t], state, states, mask)
        logp = torch.log_softmax(logits, dim=-1)
        nll.append(-logp.gather(1, tgt[:, t:t + 1]).squeeze(1))
    nll = torch.stack(nll, dim=1)
    keep = tgt != pad_id
    return (nll * keep).sum() / keep.sum()
'''),
    Accepted(cell='greedy_decode', name='preallocated eos buffer, loop with break', source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    B = src.size(0)
    out = torch.full((B, max_len), model.eos_id, dtype=torch.long, device=src.device)
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.full((B,), model.bos_id, dtype=torch.long, device=src.device)
        alive = torch.ones(B, dtype=torch.bool, device=src.device)
        steps = 0
        for t in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(dim=-1)
            out[alive, t] = y[alive]
            alive = alive & (y != model.eos_id)
            steps = t + 1
            if not alive.any():
                break
    return out[:, :steps]
'''),
    Accepted(cell='accuracy_by_bucket', name='bisect bucket index, dict accumulators', source='''\
import bisect


def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters found at the same position in the prediction."""
    if not target:
        return 1.0
    hits = 0
    for i, ch in enumerate(target):
        if i < len(prediction) and prediction[i] == ch:
            hits += 1
    return hits / len(target)


def accuracy_by_bucket(predictions: list[str], targets: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """One dict {"lo", "hi", "n", "exact", "char"} per non-empty bucket [edges[j], edges[j+1])."""
    groups = {}
    for p, t, n in zip(predictions, targets, lengths):
        if n < edges[0] or n >= edges[-1]:
            continue
        j = bisect.bisect_right(edges, n) - 1
        groups.setdefault(j, []).append((p, t))
    rows = []
    for j in sorted(groups):
        g = groups[j]
        rows.append(dict(lo=edges[j], hi=edges[j + 1] - 1, n=len(g),
                         exact=sum(p == t for p, t in g) / len(g),
                         char=sum(char_accuracy(p, t) for p, t in g) / len(g)))
    return rows
'''),
    Accepted(cell='greedy_decode', name="model.eval() for decoding, the caller's mode restored", source='''\
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> torch.Tensor:
    """Most likely token at every step, fed back as the next input -> ids (B, T <= max_len)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        states, state, mask = model.encode(src, src_len)
        y = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        outs = []
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state, states, mask)
            y = logits.argmax(-1)
            y = torch.where(done, torch.full_like(y, model.eos_id), y)
            outs.append(y)
            done = done | (y == model.eos_id)
            if done.all():
                break
    model.train(was_training)
    return torch.stack(outs, dim=1)
'''),
]
