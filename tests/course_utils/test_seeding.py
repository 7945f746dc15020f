"""course_utils.seeding."""

from __future__ import annotations

import random

import numpy as np
import torch

from course_utils.seeding import seed_everything


def test_seed_everything_repeats_every_generator():
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    seed_everything(124)
    assert draw() != first


def test_seed_everything_returns_an_independent_generator():
    gen = seed_everything(5)
    a = torch.rand(2, generator=gen)
    assert torch.equal(a, torch.rand(2, generator=torch.Generator().manual_seed(5)))
