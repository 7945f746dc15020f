"""The checks students read: right answers pass silently, wrong ones fail with a useful message."""

from __future__ import annotations

import pytest
import torch

from course_utils.checks import (
    CheckFailed,
    check,
    check_close,
    check_raises,
    check_scalar,
    check_shape,
    check_type,
    substitute,
)


def test_passing_checks_write_nothing(capsys):
    check(True, "never shown")
    check_type(3, int, "n")
    check_shape(torch.zeros(2, 3), (2, 3), "x")
    check_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]), "x")
    check_scalar(0.5, 0.5, "p")
    raised = check_raises(lambda: 1 / 0, ZeroDivisionError, "division")
    assert isinstance(raised, ZeroDivisionError) and "division" in str(raised)  # returned, for message checks
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_check_failed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)


def test_shape_message_says_expected_and_got():
    with pytest.raises(CheckFailed, match=r"x has shape \(3, 2\), but should have shape \(2, 3\)"):
        check_close(torch.zeros(3, 2), torch.zeros(2, 3), "x")


def test_value_message_gives_largest_error_and_where():
    expected = torch.tensor([[0.2, 0.8], [0.5, 0.5]])
    got = torch.tensor([[0.2, 0.8], [0.9, 0.5]])
    with pytest.raises(CheckFailed) as failure:
        check_close(got, expected, "weights", hint="rows sum to one")
    message = str(failure.value)
    assert "1 of 4 entries" in message
    assert "Largest absolute error 0.4 at index (1, 0)" in message
    assert "expected 0.5, got 0.9" in message
    assert message.endswith("Hint: rows sum to one")


def test_nan_and_none_get_their_own_messages():
    with pytest.raises(CheckFailed, match="contains NaN"):
        check_close(torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 1.0]), "p")
    with pytest.raises(CheckFailed, match="forget a `return`"):
        check_close(None, torch.zeros(1), "result")
    with pytest.raises(CheckFailed, match="should be a Tensor, but is a list"):
        check_close([1.0], torch.ones(1), "result")


def test_tolerances_are_respected():
    check_close(torch.tensor([1.0]), torch.tensor([1.05]), "x", atol=0.1)
    with pytest.raises(CheckFailed):
        check_close(torch.tensor([1.0]), torch.tensor([1.05]), "x", atol=1e-3, rtol=0)


def test_expected_may_be_a_list_or_numpy():
    import numpy as np

    check_close(torch.tensor([1.0, 2.0]), [1.0, 2.0], "x")
    check_close(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0]), "x")


def test_check_scalar():
    check_scalar(torch.tensor(2.0), 2.0, "s")
    with pytest.raises(CheckFailed, match="s is 3, but should be 2"):
        check_scalar(3.0, 2.0, "s")
    with pytest.raises(CheckFailed, match="single number"):
        check_scalar(torch.zeros(2), 0.0, "s")


def test_check_raises_reports_wrong_or_missing_exception():
    with pytest.raises(CheckFailed, match="raised nothing"):
        check_raises(lambda: None, ValueError, "f")
    with pytest.raises(CheckFailed, match="raised KeyError"):
        check_raises(lambda: {}["x"], ValueError, "f")


def test_substitute_restores_names_even_after_failure():
    namespace = {"f": "mine"}
    with pytest.raises(RuntimeError):
        with substitute(namespace, f="reference", g="new"):
            assert namespace == {"f": "reference", "g": "new"}
            raise RuntimeError
    assert namespace == {"f": "mine"}


def test_infinities_must_match_exactly():
    expected = torch.tensor([[0.0, float("-inf")], [0.0, 0.0]])
    check_close(torch.tensor([[0.0, float("-inf")], [0.0, 0.0]]), expected, "mask")
    for wrong in (torch.zeros(2, 2), torch.tensor([[0.0, float("inf")], [0.0, 0.0]]), torch.tensor([[0.0, -1e9], [0.0, 0.0]])):
        with pytest.raises(CheckFailed, match=r"at index \(0, 1\), but should have -inf"):
            check_close(wrong, expected, "mask")
    with pytest.raises(CheckFailed, match="contains inf"):
        check_close(torch.tensor([float("inf"), 1.0]), torch.tensor([2.0, 1.0]), "x")


# ---- behaviour checks: device, dtype, backward, generator, reference, bans ----------

import torch.nn.functional as F  # noqa: E402

from course_utils.checks import (  # noqa: E402
    banned_calls,
    check_backward,
    check_defined_here,
    check_device_dtype,
    check_generator,
    own_work,
)


def _causal_softmax(x, *, device_kw=True, to_style=False):
    T = x.size(-1)
    if to_style:
        keep = torch.tril(torch.ones(T, T)).to(x.device) == 1
    else:
        keep = torch.ones(T, T, dtype=torch.bool, **({"device": x.device} if device_kw else {})).tril()
    return x.masked_fill(~keep, float("-inf")).softmax(-1)


def test_check_device_dtype_accepts_right_answers_in_several_styles():
    x = torch.randn(2, 4, 4)
    check_device_dtype(_causal_softmax, x, name="device=")
    check_device_dtype(lambda x: _causal_softmax(x, to_style=True), x, name=".to(x.device)")
    check_device_dtype(lambda x: x * int(x.abs().sum().item() > 0), x, name="needs data (no meta)")
    # a CPU scalar tensor may meet tensors on any device (on a GPU too), with or without meta inputs
    check_device_dtype(lambda x: torch.where(x > 0, x, torch.tensor(-1.0)), x, name="CPU scalar")
    check_device_dtype(lambda x: torch.where(x > int(x.abs().sum().item() > 0), x, torch.tensor(-1.0)), x, name="CPU scalar, needs data")
    check_device_dtype(torch.nn.Linear(4, 3), x, name="a module")
    check_device_dtype(lambda x: x[torch.arange(2)] * 2 + torch.tensor(1.0), x, name="CPU index and scalar (fine on CUDA)")


@pytest.mark.parametrize("wrong, words", [
    (lambda x: _causal_softmax(x, device_kw=False), "mixes devices"),
    (lambda x: x + torch.zeros(x.shape[-1], device=x.device), "float64 for float32"),
    (lambda x: x.float() * 2, "float32 for float64"),
    (lambda x: torch.zeros(x.shape), "returned a tensor on cpu"),
    # needs data, so it cannot run on meta inputs: meta becomes the default device instead
    (lambda x: x * int(x.abs().sum().item() > 0) + torch.zeros(x.shape[-1]), "mixes devices"),
    # moved to the CPU (meta cannot), then met a tensor made without device=: as_tensor keeps x's device
    (lambda x: torch.arange(4) < torch.as_tensor(x).cpu()[..., None], "mixes devices"),
    (lambda x: torch.zeros(x.shape) + int(x.abs().sum().item() > 0), "created without device="),
])
def test_check_device_dtype_rejects_tensors_made_without_device_or_dtype(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_device_dtype(wrong, torch.randn(2, 4, 4), name="f")


def _counted_keep(experts, capacity, *, device_kw=True, move=False):
    """Greedy capacity with a tensor counter read in an `if` (meta cannot run it: it needs data)."""
    N, k = experts.shape
    keep = torch.zeros(N, k, dtype=torch.bool, **({"device": experts.device} if device_kw else {}))
    counts = torch.zeros(int(experts.max()) + 1)  # a CPU scratch counter: fine on a GPU too
    for j in range(k):
        for n in range(N):
            e = int(experts[n, j])
            if counts[e] < capacity:
                keep[n, j] = True
                counts[e] += 1
    return keep.to(experts.device) if move else keep


def test_check_device_dtype_tracks_new_tensors_that_meta_cannot_hold():
    # red team of 12: a result made without device= and filled by reading a counter escaped, because
    # the counter's `if` cannot run on meta; such tensors are now tracked as if on another device
    experts = torch.randint(0, 4, (10, 2))
    check_device_dtype(_counted_keep, experts, 3, name="device=", check_dtype=False)
    check_device_dtype(lambda e, c: _counted_keep(e, c, device_kw=False, move=True), experts, 3,
                       name=".to(experts.device) at the end", check_dtype=False)
    check_device_dtype(lambda e, c: e[torch.arange(e.size(0))] * int(e.sum() > 0), experts, 3,
                       name="CPU index and data", check_dtype=False)
    with pytest.raises(CheckFailed, match="returned a tensor created without device="):
        check_device_dtype(lambda e, c: _counted_keep(e, c, device_kw=False), experts, 3, name="f", check_dtype=False)
    with pytest.raises(CheckFailed, match="mixes devices: .*where"):
        check_device_dtype(lambda e, c: torch.where(_counted_keep(e, c, device_kw=False), e, -1), experts, 3,
                           name="f", check_dtype=False)


def test_check_backward_rejects_in_place_and_detached_and_compares_gradients():
    x = torch.randn(2, 4, 4)
    check_backward(_causal_softmax, x, name="ok", reference=lambda x: _causal_softmax(x, to_style=True))

    def in_place(x):
        y = x.softmax(-1)
        y.mul_(2)
        return y

    with pytest.raises(CheckFailed, match="in place"):
        check_backward(in_place, x, name="f")
    with pytest.raises(CheckFailed, match="cut from the graph"):
        check_backward(lambda x: x.detach() * 2, x, name="f")
    with pytest.raises(CheckFailed, match="gradient of f"):
        check_backward(lambda x: x * 2, x, name="f", reference=lambda x: x * 3)


def test_check_generator_needs_the_generator_to_be_used():
    check_generator(lambda n, generator=None: torch.rand(n, generator=generator), 10, name="ok")
    with pytest.raises(CheckFailed, match="global random generator"):
        check_generator(lambda n, generator=None: torch.rand(n), 10, name="f")
    with pytest.raises(CheckFailed, match="same result for two different"):
        check_generator(lambda n, generator=None: torch.zeros(n), 10, name="f")


def test_own_work_catches_the_reference_called_directly_or_wrapped():
    from course_utils.attention import scaled_dot_product_attention as reference

    q = torch.randn(2, 3, 4)
    with own_work("course_utils.attention.scaled_dot_product_attention"):
        torch.softmax(q @ q.transpose(-2, -1) / 2, -1) @ q  # own code: fine
    for call in (lambda: reference(q, q, q), lambda: (lambda a: reference(a, a, a))(q)):
        with pytest.raises(CheckFailed, match="reference implementation"):
            with own_work("course_utils.attention.scaled_dot_product_attention"):
                call()
    with pytest.raises(CheckFailed, match="not from this notebook"):
        check_defined_here(reference, "scaled_dot_product_attention")


@pytest.mark.parametrize("route", [
    lambda x: torch.softmax(x, -1), lambda x: F.softmax(x, -1), lambda x: x.softmax(-1),
    lambda x: torch.nn.Softmax(-1)(x), lambda x: torch.special.softmax(x, -1), lambda x: x.log_softmax(-1).exp(),
])
def test_banned_calls_catch_every_route_to_a_banned_function(route):
    x = torch.randn(3, 5)
    with pytest.raises(CheckFailed, match="asks you not to use"):
        with banned_calls("softmax", "log_softmax"):
            route(x)
    with banned_calls("softmax", "log_softmax"):
        e = (x - x.amax(-1, keepdim=True)).exp()
        e / e.sum(-1, keepdim=True)


def test_leaves_unchanged_catches_in_place_changes_and_mode_switches():
    from course_utils.checks import leaves_unchanged

    x, lengths = torch.randn(3), torch.tensor([2, 1])
    with leaves_unchanged("f", x, [lengths]):
        (x + 1, lengths.unsqueeze(1))            # reading is fine
    with pytest.raises(CheckFailed, match="shape"):
        with leaves_unchanged("f", lengths):
            lengths.unsqueeze_(1)
    with pytest.raises(CheckFailed, match="values"):
        with leaves_unchanged("f", x):
            x.data.clamp_(0, 1)
    y = torch.randn(2)
    with pytest.raises(CheckFailed, match="requires_grad"):
        with leaves_unchanged("f", y):
            y.requires_grad_(True)
    nan = torch.tensor([float("nan"), 1.0])
    with leaves_unchanged("f", nan):              # NaN equals NaN here
        pass
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1))
    with pytest.raises(CheckFailed, match="eval mode"):
        with leaves_unchanged("f", model):
            model.eval()
    model.train()
    with pytest.raises(CheckFailed, match="requires_grad"):
        with leaves_unchanged("f", model):
            model.requires_grad_(False)
    model.requires_grad_(True)
    with leaves_unchanged("f", model):           # switched back: fine
        model.eval()
        model.train()


def test_check_device_dtype_moves_module_arguments_with_the_tensors():
    import torch.nn.functional as F

    from course_utils.checks import check_device_dtype

    word, norm = torch.nn.Embedding(20, 8), torch.nn.LayerNorm(8)
    ids = torch.randint(0, 20, (3, 6))

    def one_hot_lookup(ids, word, norm):        # right: follows the table's device and dtype
        return norm(F.one_hot(ids, word.num_embeddings).to(word.weight.dtype) @ word.weight)

    def cast_to_float32(ids, word, norm):       # wrong: float64 tables give float32
        return norm(word(ids)).float()

    check_device_dtype(one_hot_lookup, ids, word, norm, name="lookup")
    with pytest.raises(CheckFailed, match="float32 for float64"):
        check_device_dtype(cast_to_float32, ids, word, norm, name="lookup")
    assert word.weight.device.type == "cpu" and word.weight.dtype == torch.float32  # the caller's module untouched


def test_functions_handed_to_answers_are_modules_that_torch_func_can_transform():
    """course_utils.checks.functions: what a hidden test passes to an answer that may transform it."""
    from course_utils.checks.functions import CumsumThen, CumsumTimesFlip, RollThen, SquaredNorms

    x = torch.randn(4, 3)
    A, W = torch.randn(3, 2), torch.randn(3, 5)
    assert torch.allclose(CumsumThen()(x), x.cumsum(0))
    assert torch.allclose(CumsumThen(W)(x), x.cumsum(0) @ W)
    assert torch.allclose(RollThen(A)(x), torch.roll(x, 1, dims=0) @ A)
    assert SquaredNorms(3)(x).shape == (4, 3) and torch.allclose(SquaredNorms(3)(x)[:, 0], (x ** 2).sum(1))
    assert torch.allclose(CumsumTimesFlip()(x), x.cumsum(0) * x.flip(0))
    jac = torch.func.jacrev(RollThen(A))(x)  # (T, d_out, T, d)
    assert torch.allclose(jac.abs().sum((1, 3)), A.abs().sum() * torch.roll(torch.eye(4), 1, dims=0))


def test_check_backward_lets_an_unwritten_backward_say_so():
    """A custom Function whose backward still raises NotImplementedError: not a failed formula (13's
    TiledAttention with forward written): the error goes on, so `course check` says TODO."""
    class Half(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise NotImplementedError

    with pytest.raises(NotImplementedError):
        check_backward(Half.apply, torch.randn(3), name="Half")
