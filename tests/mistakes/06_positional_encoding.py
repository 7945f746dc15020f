"""Curated wrong answers for notebook 06 (positional encoding); each must lose points."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    # Exercise 1: sinusoidal_encoding
    Mistake(
        cell="sinusoidal_encoding",
        name="sin and cos swapped",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(
            ("pe[:, 0::2] = torch.sin(angles)", "pe[:, 0::2] = torch.cos(angles)"),
            ("pe[:, 1::2] = torch.cos(angles)", "pe[:, 1::2] = torch.sin(angles)"),
        ),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="exponent i over d instead of 2i over d",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("torch.arange(0, d, 2, dtype=torch.float64)", "torch.arange(0, d // 2, dtype=torch.float64)"),),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="base 1000 instead of 10000",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("10000.0", "1000.0"),),
    ),
    Mistake(
        cell="sinusoidal_encoding",
        name="concatenated layout (all sines then all cosines)",
        rejected_by=("test_sinusoidal_encoding",),
        replace=(("pe[:, 0::2]", "pe[:, : d // 2]"), ("pe[:, 1::2]", "pe[:, d // 2 :]")),
    ),
    # Exercise 2: offset_matrix
    Mistake(
        cell="offset_matrix",
        name="offset block with the sine signs swapped (M_-k)",
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
        rejected_by=("test_learned_positional_embedding",),
        replace=(("torch.arange(T, device=x.device)", "torch.arange(1, T + 1, device=x.device)"),),
    ),
    Mistake(
        cell="learned_positional_embedding",
        name="frozen position table (not trainable)",
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
        rejected_by=("test_apply_rope",),
        replace=(("x0 * cos - x1 * sin, x0 * sin + x1 * cos", "x0 * cos + x1 * sin, -x0 * sin + x1 * cos"),),
    ),
    Mistake(
        cell="apply_rope",
        name="RoPE pairs dimension j with j + d/2 (rotate-half layout)",
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
]
