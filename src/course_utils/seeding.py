"""Seed every random number generator the course uses."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything"]


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python's ``random``, NumPy and torch (CPU and every GPU).

    Returns a fresh ``torch.Generator`` seeded with ``seed``, for code that wants its own
    stream (data generation, say) that later calls cannot disturb.
    """
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)
