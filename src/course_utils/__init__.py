"""Shared code of the *Attention & Transformers* course.

Notebook-facing modules, one concern each:

- :mod:`course_utils.session`   -- every notebook's first call: seed, pick the device, say which.
- :mod:`course_utils.device`    -- pick CUDA, then Apple MPS, then CPU, and say which.
- :mod:`course_utils.seeding`   -- seed Python, NumPy and torch in one call.
- :mod:`course_utils.profiles`  -- the ``COURSE_PROFILE`` switch (``ci``, ``cpu``, ``gpu``).
- :mod:`course_utils.checks`    -- what exercise tests import, in these modules:
  :mod:`course_utils.checks.assertions` (readable assertions), :mod:`course_utils.checks.probes`
  (devices, dtypes, gradients, generators), :mod:`course_utils.checks.allocations` (the tensors a
  call allocates), :mod:`course_utils.checks.integrity` (own work),
  :mod:`course_utils.checks.functions` (functions the tests hand to an answer that may
  transform them, as modules the kernel holds), and :mod:`course_utils.checks.in_place` (the
  In-place rule's messages, and ``course check``'s watch of every call the test cells make).
- :mod:`course_utils.plotting`  -- attention heatmaps and training curves.
- :mod:`course_utils.progress`  -- progress bars and live curves in the ``cpu``/``gpu`` profiles
  (silent in ``ci`` and while graded).
- :mod:`course_utils.corpus`    -- offline text: Python's documentation prose, Shakespeare's plays.
- :mod:`course_utils.attention` -- what notebook 03 builds: softmax, scaled dot-product
  attention, a single-head self-attention module.
- :mod:`course_utils.seq2seq_data`, :mod:`course_utils.rnn_seq2seq`,
  :mod:`course_utils.seq2seq_train` -- notebooks 01-02: generated sequence tasks (dates in
  three languages, length-controlled strings), GRU encoder-decoders with and without
  attention, training and accuracy by length.
- :mod:`course_utils.multihead` -- notebook 04: split/merge heads, ``MultiHeadAttention``.
- :mod:`course_utils.masking` -- notebook 05: causal and padding masks, NaN-free masked softmax.
- :mod:`course_utils.positional` -- notebook 06: sinusoidal, learned and rotary positions.
- :mod:`course_utils.blocks`, :mod:`course_utils.transformer_seq2seq` -- notebooks 07-08:
  LayerNorm, the feed-forward layer, transformer blocks, the encoder-decoder.
- :mod:`course_utils.sentiment_data`, :mod:`course_utils.sentiment_models` -- notebooks 07, 09,
  10: a generated sentiment set where word order matters, the classifiers of 07's ladder.
- :mod:`course_utils.translation` -- notebook 08: offline English -> Portuguese / French pairs.
- :mod:`course_utils.wordpiece`, :mod:`course_utils.bert` -- notebook 09: WordPiece, BERT, MLM.
- :mod:`course_utils.gpt` -- notebook 10: a GPT, generation, the KV cache, its training loop.
- :mod:`course_utils.sampling` -- notebooks 10-11: temperature, top-k, top-p, the next token
  (shared by ``gpt`` and ``llama``).
- :mod:`course_utils.bpe` -- notebook 11: byte-level BPE (SmolLM2's tokenizer), a BPE trainer.
- :mod:`course_utils.llama` -- notebook 11: RMSNorm, SwiGLU, rotate-half RoPE, grouped-query
  attention, a KV cache, a Llama-style decoder and SmolLM2's weights from GGUF
  (:mod:`course_utils.gguf_file` reads the file, :mod:`course_utils.gguf_weights` dequantises
  its tensors into a state dict).
- :mod:`course_utils.lora` -- notebook 11: ``LoRALinear``, ``add_lora``, ``merge_lora``.
- :mod:`course_utils.flash` -- notebook 13: the online softmax, softmax states and their merge,
  tiled (flash) attention forward and its recomputing backward, naive attention, a decoder's KV-cache
  bytes from notebook 10's or 11's config.
- :mod:`course_utils.preference` -- notebook 14: response log-probs, the DPO loss, preference pairs,
  GRPO's group advantages and clipped loss, the date task's verifiers.
- :mod:`course_utils.vit` -- notebook 12: the 8x8 digits, patches, patch embeddings, a ViT.
- :mod:`course_utils.moe` -- notebook 12: top-k gating, the load-balancing loss, capacity, an
  MoE feed-forward layer in notebook 10's GPT.
- :mod:`course_utils.benchmark` -- peak tensor memory and timing for the cost sections.
- :mod:`course_utils.diagrams` -- schematics drawn at run time: the RNN bottleneck against attention,
  post-LN and pre-LN, the encoder-decoder, the KV cache, GQA and RoPE's pairings, MoE routing.
- :mod:`course_utils.variants` -- a variant per student: an exercise's shapes and seeds, drawn by
  name from a secret seed (visible and hidden draws apart); the course's own values without one.
- :mod:`course_utils.fallback` -- the course's version of an unfinished exercise, called only while
  the student's raises NotImplementedError, so that later cells of a notebook still run.
- :mod:`course_utils.spread` -- a run's number beside the course's range over seeds, with a one-line
  verdict (inside / OUTSIDE).

Grading's kernel side, imported only while a notebook is graded: :mod:`course_utils.protocol`
(the checker protocol's one home): :mod:`course_utils.protocol.agent` answers the trusted checker's
questions in the student's kernel, over the plain-data format of :mod:`course_utils.protocol.wire`,
with the operations, modes and autograd bridge both sides name in
:mod:`course_utils.protocol.messages`; :mod:`course_utils.withheld` is the error the course's reference of an
exercise raises while that exercise's notebook is graded.

The student's side of the ``course`` command: :mod:`course_utils.cli` (``course check``, ``course
setup-kernel``; the grader adds the instructor's verbs), :mod:`course_utils.selfcheck` (a notebook's
visible tests, run as the grader runs them), :mod:`course_utils.execute` (one notebook in the course
kernel), :mod:`course_utils.limits` (seconds a cell may run, graded or executed), :mod:`course_utils.cells` (nbgrader's cell metadata) and :mod:`course_utils.layout` (the
kernel's name; where assignments are).

The grader (nbgrader, grading, the sandbox, review) is another package, ``course_grader`` in
``grader/``, which imports this one and is never imported by it. CONTRIBUTING.md maps both.
"""

__version__ = "0.1.0"
