"""Plausible wrong answers to notebook 00; each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(cell="count_parameters", name="counts parameter tensors, not numbers",
            rejected_by=("test_count_parameters",), replace=(("sum(p.numel() for p", "sum(1 for p"),), kind="logic"),
    Mistake(cell="count_parameters", name="counts frozen parameters too",
            rejected_by=("test_count_parameters",), replace=((" if p.requires_grad", ""),), kind="logic"),
    # found by the blind red team of issue 12 (they kept full marks before)
    Mistake(cell='count_parameters', name='tied parameters counted twice (per submodule _parameters)', kind='logic',
            rejected_by=('test_count_parameters',), source='''\
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    total = 0
    for m in module.modules():
        for p in m._parameters.values():
            if p is not None and p.requires_grad:
                total += p.numel()
    return total
'''),
    # third blind red-team pass: escapes closed by a scalar parameter and two same-shape layers
    Mistake(cell='count_parameters', name='np.prod of shapes summed (float for a 0-dim parameter)', kind='dtype',
            rejected_by=('test_count_parameters',), source='''\
import numpy as np
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    total = 0
    for p in module.parameters():
        if p.requires_grad:
            total += np.prod(p.shape).item()
    return total
'''),
    Mistake(cell='count_parameters', name='dedup keyed by name suffix and shape (undercounts twin layers)', kind='logic',
            rejected_by=('test_count_parameters',), source='''\
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    seen = {}
    for name, p in module.named_parameters():
        if p.requires_grad:
            seen[name.split(".")[-1] + str(tuple(p.shape))] = p.numel()
    return sum(seen.values())
'''),
]

# right answers in other styles, written blind from the release (issue 12): each must pass its tests
ACCEPTED = [
    Accepted(cell='count_parameters', name='generator sum with requires_grad filter', source='''\
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
'''),
    Accepted(cell='count_parameters', name='named_parameters loop with math.prod of shape', source='''\
import math
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    total = 0
    for _name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        total += math.prod(p.shape)
    return int(total)
'''),
    Accepted(cell='count_parameters', name='filter then torch.numel with explicit int', source='''\
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    trainable = filter(lambda p: p.requires_grad, module.parameters())
    return int(sum(torch.numel(p) for p in trainable))
'''),
    Accepted(cell='count_parameters', name='set of parameters (dedup by identity)', source='''\
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    return sum(p.numel() for p in set(module.parameters()) if p.requires_grad)
'''),
    Accepted(cell='count_parameters', name='int(np.prod(shape)) per parameter', source='''\
import numpy as np
def count_parameters(module: torch.nn.Module) -> int:
    """Number of trainable (requires_grad) parameters of `module`."""
    return int(sum(int(np.prod(p.shape)) for p in module.parameters() if p.requires_grad))
'''),
]
