"""Curated wrong answers for notebook 06 (positional encoding); each must lose points.

ACCEPTED lists alternative right answers (other styles) that must pass every test. The
mistakes marked as from the blind red team (issue 12) were written without the tests.
"""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    # Exercise 1: sinusoidal_encoding
    Mistake(
        cell="sinusoidal_encoding",
        name="sin and cos swapped",
        kind="logic",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(
            ("pe[:, 0::2] = torch.sin(angles)", "pe[:, 0::2] = torch.cos(angles)"),
            ("pe[:, 1::2] = torch.cos(angles)", "pe[:, 1::2] = torch.sin(angles)"),
        ),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="exponent i over d instead of 2i over d",
        kind="logic",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("torch.arange(0, d, 2, dtype=torch.float64)", "torch.arange(0, d // 2, dtype=torch.float64)"),),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="base 1000 instead of 10000",
        kind="logic",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("10000.0", "1000.0"),),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="concatenated layout (all sines then all cosines)",
        kind="logic",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("pe[:, 0::2]", "pe[:, : d // 2]"), ("pe[:, 1::2]", "pe[:, d // 2 :]")),
    ),
    # Exercise 2: offset_matrix
    Mistake(
        cell="offset_matrix",
        name="offset block with the sine signs swapped (M_-k)",
        kind="logic",
        rejected_by=("test_offset_matrix",),
        replace=(
            ("M[2 * i, 2 * i + 1] = s", "M[2 * i, 2 * i + 1] = -s"),
            ("M[2 * i + 1, 2 * i] = -s", "M[2 * i + 1, 2 * i] = s"),
        ),
    ),
    # Exercise 3: LearnedPositionalEmbedding
    Mistake(
        cell="learned_positional_embedding",
        name="positions counted from 1",
        kind="boundary",
        rejected_by=("test_learned_positional_embedding",),
        replace=(("torch.arange(T, device=x.device)", "torch.arange(1, T + 1, device=x.device)"),),
    ),
    Mistake(
        cell="learned_positional_embedding",
        name="frozen position table (not trainable)",
        kind="autograd",
        rejected_by=("test_learned_positional_embedding",),
        source=(
            "class LearnedPositionalEmbedding(nn.Module):\n"
            "    def __init__(self, max_len: int, d_model: int) -> None:\n"
            "        super().__init__()\n"
            "        self.max_len = max_len\n"
            "        self.embedding = nn.Embedding(max_len, d_model)\n"
            "        self.embedding.weight.requires_grad_(False)\n"
            "\n"
            "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
            "        T = x.size(1)\n"
            "        if T > self.max_len:\n"
            "            raise ValueError('too long')\n"
            "        return x + self.embedding.weight[:T]\n"
        ),
    ),
    # Exercise 4: apply_rope
    Mistake(
        cell="apply_rope",
        name="RoPE rotates clockwise (wrong sign)",
        kind="logic",
        rejected_by=("test_apply_rope",),
        replace=(("x0 * cos - x1 * sin, x0 * sin + x1 * cos", "x0 * cos + x1 * sin, -x0 * sin + x1 * cos"),),
    ),
    Mistake(
        cell="apply_rope",
        name="RoPE pairs dimension j with j + d/2 (rotate-half layout)",
        kind="logic",
        rejected_by=("test_apply_rope",),
        source=(
            "def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:\n"
            "    d = x.size(-1)\n"
            "    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)\n"
            "    angles = positions.to(torch.float64)[:, None] / 10000.0 ** (two_i / d)\n"
            "    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)\n"
            "    x0, x1 = x[..., : d // 2], x[..., d // 2 :]\n"
            "    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)\n"
        ),
    ),
    # ---- from the blind red team (issue 12) ----
    Mistake(
        cell="sinusoidal_encoding",
        name='reference import',
        rejected_by=("test_sinusoidal_encoding",),
        kind="reference",
        source="""\
from course_utils.positional import sinusoidal_encoding as _ref_pe
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    return _ref_pe(T, d)
""",
    ),
    Mistake(
        cell="offset_matrix",
        name='repeated product of M_1 (negative k -> identity)',
        rejected_by=("test_offset_matrix",),
        kind="boundary",
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    M1 = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        w = 10000 ** (-2 * i / d)
        M1[2*i:2*i+2, 2*i:2*i+2] = torch.tensor([[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]], dtype=torch.float64)
    M = torch.eye(d, dtype=torch.float64)
    for _ in range(k):
        M = M1 @ M
    return M.float()
""",
    ),
    Mistake(
        cell="offset_matrix",
        name='reads sin/cos from its own sinusoidal_encoding (not on its own)',
        rejected_by=("test_offset_matrix",),
        kind="structure",
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    pe_k = sinusoidal_encoding(abs(k) + 1, d)[abs(k)].double()
    s, c = pe_k[0::2] * (1 if k >= 0 else -1), pe_k[1::2]
    M = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        M[2*i, 2*i], M[2*i, 2*i+1], M[2*i+1, 2*i], M[2*i+1, 2*i+1] = c[i], s[i], -s[i], c[i]
    return M.float()
""",
    ),
    Mistake(
        cell="offset_matrix",
        name='returns float64',
        rejected_by=("test_offset_matrix",),
        kind="dtype",
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    b = k * omega
    blocks = [torch.stack([torch.stack([c, s]), torch.stack([-s, c])]) for c, s in zip(b.cos(), b.sin())]
    return torch.block_diag(*blocks)
""",
    ),
    Mistake(
        cell="offset_matrix",
        name='reference import',
        rejected_by=("test_offset_matrix",),
        kind="reference",
        source="""\
from course_utils.positional import offset_matrix as _ref_om
def offset_matrix(k: int, d: int) -> torch.Tensor:
    return _ref_om(k, d)
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='arange without device',
        rejected_by=("test_learned_positional_embedding",),
        kind="device",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        if T > self.max_len:
            raise ValueError(f"T={T} > max_len={self.max_len}")
        return x + self.embedding(torch.arange(T))
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='positions as plain attribute (not a buffer)',
        rejected_by=("test_learned_positional_embedding",),
        kind="device",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.positions = torch.arange(max_len)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        if T > self.max_len:
            raise ValueError(f"T={T} > max_len={self.max_len}")
        return x + self.embedding(self.positions[:T])
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='no ValueError (relies on IndexError)',
        rejected_by=("test_learned_positional_embedding",),
        kind="argument",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.embedding(torch.arange(x.shape[1], device=x.device))
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='T == max_len refused (>=)',
        rejected_by=("test_learned_positional_embedding",),
        kind="boundary",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T >= self.max_len:
            raise ValueError(f"T={T} too long for max_len={self.max_len}")
        return x + self.embedding(torch.arange(T, device=x.device))
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='.data of the table (no gradient)',
        rejected_by=("test_learned_positional_embedding",),
        kind="autograd",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"T={T} > max_len={self.max_len}")
        return x + self.embedding.weight.data[:T]
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='in-place add into the input',
        rejected_by=("test_learned_positional_embedding",),
        kind="autograd",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"T={T} > max_len={self.max_len}")
        x += self.embedding(torch.arange(T, device=x.device))
        return x
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name='reference subclass',
        rejected_by=("test_learned_positional_embedding",),
        kind="reference",
        source="""\
from course_utils.positional import LearnedPositionalEmbedding as _RefLPE
class LearnedPositionalEmbedding(_RefLPE):
    pass
""",
    ),
    Mistake(
        cell="apply_rope",
        name='positions ignored (arange(T))',
        rejected_by=("test_apply_rope",),
        kind="argument",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    T, d = x.shape[-2], x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = torch.arange(T, device=x.device, dtype=torch.float64)[:, None] * omega
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
""",
    ),
    Mistake(
        cell="apply_rope",
        name='frequency exponent i/d (pair index)',
        rejected_by=("test_apply_rope",),
        kind="logic",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(d // 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * omega
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
""",
    ),
    Mistake(
        cell="apply_rope",
        name='frequencies built without device',
        rejected_by=("test_apply_rope",),
        kind="device",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * omega
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
""",
    ),
    Mistake(
        cell="apply_rope",
        name="returns float32 whatever x's dtype",
        rejected_by=("test_apply_rope",),
        kind="dtype",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, device=x.device).float() / d)
    angles = positions.to(x.device).float()[:, None] * omega
    x = x.float()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * angles.cos() - x1 * angles.sin(), x0 * angles.sin() + x1 * angles.cos()], dim=-1).flatten(-2)
""",
    ),
    Mistake(
        cell="apply_rope",
        name='writes the rotation into x in place',
        rejected_by=("test_apply_rope",),
        kind="autograd",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * omega
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = x0 * cos - x1 * sin
    x[..., 1::2] = x0 * sin + x1 * cos
    return x
""",
    ),
    Mistake(
        cell="apply_rope",
        name='reference import',
        rejected_by=("test_apply_rope",),
        kind="reference",
        source="""\
from course_utils.positional import apply_rope as _ref_rope
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return _ref_rope(x, positions)
""",
    ),
    # Blind red team, round 2 (issue 12): escapes closed by new hidden tests.
    Mistake(
        cell="sinusoidal_encoding",
        name="cached 512-row table sliced (wrong beyond 512 positions)",
        kind="boundary",
        rejected_by=("test_sinusoidal_encoding",),
        source="""\
_PE_CACHE = {}
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    if d not in _PE_CACHE:
        pos = torch.arange(512, dtype=torch.float64)[:, None]
        angles = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        _PE_CACHE[d] = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()
    return _PE_CACHE[d][:T].clone()
""",
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="positions built in bfloat16 (rounded above 256)",
        kind="dtype",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("pos = torch.arange(T, dtype=torch.float64)[:, None]", "pos = torch.arange(T, dtype=torch.bfloat16)[:, None].double()"),),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="returns the cached tensor itself (a caller's in-place edit leaks)",
        kind="structure",
        rejected_by=("test_sinusoidal_encoding",),
        source="""\
_PE_CACHE = {}
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    if (T, d) not in _PE_CACHE:
        pos = torch.arange(T, dtype=torch.float64)[:, None]
        angles = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        _PE_CACHE[T, d] = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()
    return _PE_CACHE[T, d]
""",
    ),
    Mistake(
        cell="learned_positional_embedding",
        name="ValueError without a message",
        kind="argument",
        rejected_by=("test_learned_positional_embedding",),
        replace=(('raise ValueError(f"sequence length {T} is longer than max_len = {self.max_len}: no embedding was learned for those positions")',
                  "raise ValueError"),),
    ),
    Mistake(
        cell="apply_rope",
        name="angles computed in x.dtype (float16 angles wrong at large positions)",
        kind="dtype",
        rejected_by=("test_apply_rope",),
        replace=(
            ("two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)", "two_i = torch.arange(0, d, 2, dtype=x.dtype, device=x.device)"),
            ("positions.to(device=x.device, dtype=torch.float64)", "positions.to(device=x.device, dtype=x.dtype)"),
        ),
    ),
    Mistake(
        cell="apply_rope",
        name="positions not moved to x.device",
        kind="device",
        rejected_by=("test_apply_rope",),
        replace=(("positions.to(device=x.device, dtype=torch.float64)", "positions.to(dtype=torch.float64)"),),
    ),
]

ACCEPTED = [
    Accepted(
        cell="sinusoidal_encoding",
        name='float64 broadcast, interleaved slices',
        source="""\
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    angles = pos / 10000 ** (two_i / d)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()
""",
    ),
    Accepted(
        cell="sinusoidal_encoding",
        name='exp-log frequencies, stack/flatten',
        source="""\
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    omega = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), omega)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2).float()
""",
    ),
    Accepted(
        cell="sinusoidal_encoding",
        name='pure python loops (AMAL lab component index)',
        source="""\
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    rows = []
    for pos in range(T):
        row = []
        for h in range(d):
            if h % 2 == 0:
                row.append(math.sin(pos / 10000 ** (h / d)))
            else:
                row.append(math.cos(pos / 10000 ** ((h - 1) / d)))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(T, d)
""",
    ),
    Accepted(
        cell="sinusoidal_encoding",
        name='PyTorch-tutorial float32 computation',
        source="""\
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    position = torch.arange(T).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(T, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
""",
    ),
    Accepted(
        cell="offset_matrix",
        name='loop over pairs, float64 then float32',
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    M = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        b = k * 10000 ** (-2 * i / d)
        c, s = math.cos(b), math.sin(b)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = -s, c
    return M.float()
""",
    ),
    Accepted(
        cell="offset_matrix",
        name='block_diag of 2x2 blocks',
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    b = k * omega
    blocks = [torch.stack([torch.stack([c, s]), torch.stack([-s, c])]) for c, s in zip(b.cos(), b.sin())]
    return torch.block_diag(*blocks).float()
""",
    ),
    Accepted(
        cell="offset_matrix",
        name='vectorised index assignment',
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    idx = torch.arange(0, d, 2)
    b = k * torch.pow(10000.0, -idx.double() / d)
    M = torch.zeros(d, d, dtype=torch.float64)
    M[idx, idx] = b.cos(); M[idx, idx + 1] = b.sin()
    M[idx + 1, idx] = -b.sin(); M[idx + 1, idx + 1] = b.cos()
    return M.to(torch.float32)
""",
    ),
    Accepted(
        cell="learned_positional_embedding",
        name='arange on x.device',
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence of length {T} is longer than max_len={self.max_len}")
        positions = torch.arange(T, device=x.device)
        return x + self.embedding(positions)
""",
    ),
    Accepted(
        cell="learned_positional_embedding",
        name='slice the weight table',
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        if T > self.embedding.num_embeddings:
            raise ValueError(f"T={T} > max_len={self.max_len}: no position embedding for it")
        return x + self.embedding.weight[:T].unsqueeze(0)
""",
    ),
    Accepted(
        cell="learned_positional_embedding",
        name='registered buffer of positions, expand per batch',
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.register_buffer("positions", torch.arange(max_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        if T > self.max_len:
            raise ValueError("too long: " + str(T) + " > max_len = " + str(self.max_len))
        pos = self.positions[:T].unsqueeze(0).expand(B, T)
        return x + self.embedding(pos)
""",
    ),
    Accepted(
        cell="apply_rope",
        name='slices + stack/flatten, float64 angles',
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(device=x.device, dtype=torch.float64)[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
""",
    ),
    Accepted(
        cell="apply_rope",
        name='complex multiplication',
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(x.device).double()[:, None] * omega
    rot = torch.polar(torch.ones_like(angles), angles).to(torch.complex128 if work == torch.float64 else torch.complex64)
    z = torch.view_as_complex(x.to(work).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)
""",
    ),
    Accepted(
        cell="apply_rope",
        name='rotate-half trick with repeat_interleave (float32 angles, LLaMA style)',
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device).double() / d))
    angles = torch.outer(positions.to(x.device).double(), inv_freq)
    cos = angles.cos().repeat_interleave(2, dim=-1).to(x.dtype)
    sin = angles.sin().repeat_interleave(2, dim=-1).to(x.dtype)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + rotated * sin
""",
    ),
    # Right answers from the blind red team, round 2 (guard against over-tightening).
    Accepted(
        cell="sinusoidal_encoding",
        name="outer product into an empty float32 buffer",
        source="""\
def sinusoidal_encoding(T: int, d: int) -> torch.Tensor:
    pos = torch.arange(T, dtype=torch.float64)
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(pos, inv)
    pe = torch.empty(T, d, dtype=torch.float32)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles.cos()
    return pe
""",
    ),
    Accepted(
        cell="offset_matrix",
        name="float32 throughout, diagonal blocks by strided slices",
        source="""\
def offset_matrix(k: int, d: int) -> torch.Tensor:
    omega = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    M = torch.zeros(d, d)
    M[0::2, 0::2] = torch.diag(c)
    M[0::2, 1::2] = torch.diag(s)
    M[1::2, 0::2] = torch.diag(-s)
    M[1::2, 1::2] = torch.diag(c)
    return M
""",
    ),
    Accepted(
        cell="learned_positional_embedding",
        name="GPT-2 style init (std 0.02), weight slice",
        source="""\
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        return x + self.embedding.weight[:T]
""",
    ),
    Accepted(
        cell="apply_rope",
        name="Python loop over positions (only slower)",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)
    rows = []
    for t in range(x.shape[-2]):
        angle = float(positions[t]) * omega
        c, s = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        a, b = x[..., t, 0::2], x[..., t, 1::2]
        rows.append(torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2))
    return torch.stack(rows, dim=-2)
""",
    ),
    Accepted(
        cell="apply_rope",
        name="cos/sin read from its own sinusoidal_encoding table",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    pe = sinusoidal_encoding(int(positions.max()) + 1, d).to(x.device)
    table = pe[positions.to(x.device)]
    sin, cos = table[:, 0::2].to(x.dtype), table[:, 1::2].to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
""",
    ),
    Accepted(
        cell="apply_rope",
        name="2x2 rotation matrices applied with einsum",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)
    angles = positions.to(device=x.device, dtype=torch.float64)[:, None] * omega  # (T, d/2)
    c, s = angles.cos(), angles.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2).to(x.dtype)  # (T, d/2, 2, 2)
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    return torch.einsum("tpij,...tpj->...tpi", R, pairs).reshape(x.shape)
""",
    ),
    Accepted(
        cell="apply_rope",
        name="x.view into (d/2, 2) pairs (the last dim of transposed heads is still contiguous)",
        source="""\
def apply_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    omega = 10000 ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)
    angles = positions.to(x.device, torch.float64)[:, None] * omega
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    pairs = x.view(*x.shape[:-1], d // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).view(x.shape)
""",
    ),
]
