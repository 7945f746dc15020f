"""Curated wrong answers of notebook 12 (ViT and mixture of experts); each must be rejected."""

from course_grader.authoring.mistakes import Accepted, Mistake

# a greedy loop with a tensor counter read in an `if` (meta cannot run it), `keep` made without device=
_COUNTED_KEEP = """\
def capacity_keep(experts, n_experts, capacity):
    N, k = experts.shape
    keep = torch.zeros(N, k, dtype=torch.bool)
    counts = torch.zeros(n_experts, dtype=torch.long)
    for j in range(k):
        for n in range(N):
            e = int(experts[n, j])
            if counts[e] < capacity:
                keep[n, j] = True
                counts[e] += 1
    return keep
"""

MISTAKES = [
    # ---------------------------------------------------------------- patchify
    Mistake(kind="logic", cell="patchify", name="patch order column-major (rows and columns swapped)",
            rejected_by=("test_patchify",),
            replace=(("x = x.permute(0, 2, 4, 1, 3, 5)", "x = x.permute(0, 4, 2, 1, 3, 5)"),)),
    Mistake(kind="logic", cell="patchify", name="plain reshape without permute",
            rejected_by=("test_patchify",),
            source=("def patchify(images, patch_size):\n"
                    "    B, C, H, W = images.shape\n"
                    "    p = patch_size\n"
                    "    return images.reshape(B, (H // p) * (W // p), C * p * p)\n")),
    Mistake(kind="logic", cell="patchify", name="channel last inside a patch (i, j, c)",
            rejected_by=("test_patchify",),
            replace=(("x = x.permute(0, 2, 4, 1, 3, 5)", "x = x.permute(0, 2, 4, 3, 5, 1)"),)),
    Mistake(kind="logic", cell="patchify", name="patch transposed (column by column inside a patch)",
            rejected_by=("test_patchify",),
            replace=(("x = x.permute(0, 2, 4, 1, 3, 5)", "x = x.permute(0, 2, 4, 1, 5, 3)"),)),
    Mistake(kind="boundary", cell="patchify", name="assumes square images (N = (H/p)^2)",
            rejected_by=("test_patchify",),
            replace=(("return x.reshape(B, (H // p) * (W // p), C * p * p)", "return x.reshape(B, (H // p) ** 2, C * p * p)"),)),
    Mistake(kind="device", cell="patchify", name="loop into torch.zeros without device/dtype",
            rejected_by=("test_patchify",),
            source=("def patchify(images, patch_size):\n"
                    "    B, C, H, W = images.shape\n"
                    "    p = patch_size\n"
                    "    out = torch.zeros(B, (H // p) * (W // p), C * p * p)\n"
                    "    n = 0\n"
                    "    for r in range(H // p):\n"
                    "        for c in range(W // p):\n"
                    "            out[:, n] = images[:, :, r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(B, -1)\n"
                    "            n += 1\n"
                    "    return out\n")),
    Mistake(kind="reference", cell="patchify", name="reference import", rejected_by=("test_patchify",),
            source="from course_utils.vit import patchify\n"),
    # ---------------------------------------------------------------- patch_embed
    Mistake(kind="logic", cell="patch_embed", name="weight not transposed",
            rejected_by=("test_patch_embed",),
            replace=(("out = patchify(images, patch_size) @ E.T", "out = patchify(images, patch_size) @ E.reshape(-1, E.size(0))"),)),
    Mistake(kind="logic", cell="patch_embed", name="weight flattened channel last (d, p, p, C)",
            rejected_by=("test_patch_embed",),
            replace=(("E = weight.reshape(weight.size(0), -1)", "E = weight.permute(0, 2, 3, 1).reshape(weight.size(0), -1)"),)),
    Mistake(kind="argument", cell="patch_embed", name="bias ignored",
            rejected_by=("test_patch_embed",),
            replace=(("        out = out + bias\n", "        pass\n"),)),
    Mistake(kind="boundary", cell="patch_embed", name="bias=None not handled",
            rejected_by=("test_patch_embed",),
            replace=(("    if bias is not None:\n        out = out + bias\n", "    out = out + bias\n"),)),
    Mistake(kind="ban", cell="patch_embed", name="calls the convolution",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    return F.conv2d(images, weight, bias, stride=patch_size).flatten(2).transpose(1, 2)\n")),
    Mistake(kind="reference", cell="patch_embed", name="reference import", rejected_by=("test_patch_embed",),
            source="from course_utils.vit import patch_embed\n"),
    # found by the red team: a zero bias for bias=None made on the CPU, or in the default dtype
    Mistake(kind="device", cell="patch_embed", name="bias=None replaced by torch.zeros(d) without device",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    if bias is None:\n"
                    "        bias = torch.zeros(weight.size(0))\n"
                    "    return patchify(images, patch_size) @ weight.flatten(1).T + bias\n")),
    Mistake(kind="dtype", cell="patch_embed", name="bias=None replaced by torch.zeros(d, device=...) without dtype",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    if bias is None:\n"
                    "        bias = torch.zeros(weight.shape[0], device=images.device)\n"
                    "    return patchify(images, patch_size) @ weight.flatten(1).T + bias\n")),
    Mistake(kind="ban", cell="patch_embed", name="1 x 1 conv1d over the patches",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    patches = patchify(images, patch_size).transpose(1, 2)        # (B, C p p, N)\n"
                    "    return F.conv1d(patches, weight.flatten(1).unsqueeze(-1), bias).transpose(1, 2)\n")),
    Mistake(kind="ban", cell="patch_embed", name="conv3d with a depth-1 kernel",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    out = F.conv3d(images.unsqueeze(2), weight.unsqueeze(2), bias, stride=(1, patch_size, patch_size))\n"
                    "    return out.flatten(2).transpose(1, 2)\n")),
    Mistake(kind="reference", cell="patch_embed", name="uses the course's patchify (lib_patchify from the figure cell)",
            rejected_by=("test_patch_embed",),
            source=("def patch_embed(images, weight, bias, patch_size):\n"
                    "    from course_utils.vit import patchify as lib_patchify\n"
                    "    out = lib_patchify(images, patch_size) @ weight.flatten(1).T\n"
                    "    return out if bias is None else out + bias\n")),
    # ---------------------------------------------------------------- top_k_gating
    Mistake(kind="logic", cell="top_k_gating", name="softmax over the tokens (dim=0)",
            rejected_by=("test_top_k_gating",),
            replace=(("probs = torch.softmax(logits, dim=-1)", "probs = torch.softmax(logits, dim=0)"),)),
    Mistake(kind="logic", cell="top_k_gating", name="top-k of the logits, then softmax over the k (even without normalize)",
            rejected_by=("test_top_k_gating",),
            source=("def top_k_gating(logits, k, normalize=True):\n"
                    "    top, experts = torch.topk(logits, k, dim=-1)\n"
                    "    return torch.softmax(top, dim=-1), experts\n")),
    Mistake(kind="argument", cell="top_k_gating", name="never renormalises (normalize ignored)",
            rejected_by=("test_top_k_gating",),
            replace=(("        weights = weights / weights.sum(dim=-1, keepdim=True)\n", "        pass\n"),)),
    Mistake(kind="argument", cell="top_k_gating", name="k ignored (argmax only)",
            rejected_by=("test_top_k_gating",),
            replace=(("weights, experts = torch.topk(probs, k, dim=-1)", "weights, experts = torch.topk(probs, 1, dim=-1)"),)),
    Mistake(kind="logic", cell="top_k_gating", name="experts sorted by index, weights by size (misaligned)",
            rejected_by=("test_top_k_gating",),
            replace=(("weights, experts = torch.topk(probs, k, dim=-1)",
                      "weights, experts = torch.topk(probs, k, dim=-1)\n    experts = experts.sort(dim=-1).values"),)),
    Mistake(kind="dtype", cell="top_k_gating", name="softmax of logits.float()",
            rejected_by=("test_top_k_gating",),
            replace=(("probs = torch.softmax(logits, dim=-1)", "probs = torch.softmax(logits.float(), dim=-1)"),)),
    Mistake(kind="autograd", cell="top_k_gating", name="weights detached from the router",
            rejected_by=("test_top_k_gating",),
            replace=(("    return weights, experts", "    return weights.detach(), experts"),)),
    Mistake(kind="reference", cell="top_k_gating", name="reference import", rejected_by=("test_top_k_gating",),
            source="from course_utils.moe import top_k_gating\n"),
    # ---------------------------------------------------------------- load_balancing_loss
    Mistake(kind="logic", cell="load_balancing_loss", name="without the factor E",
            rejected_by=("test_load_balancing_loss",),
            replace=(("return E * (f * P).sum()", "return (f * P).sum()"),)),
    Mistake(kind="logic", cell="load_balancing_loss", name="probabilities for both terms (sum P_i^2)",
            rejected_by=("test_load_balancing_loss",),
            replace=(("return E * (f * P).sum()", "return E * (P * P).sum()"),)),
    Mistake(kind="logic", cell="load_balancing_loss", name="f divided by N, not N k",
            rejected_by=("test_load_balancing_loss",),
            replace=(("f = counts / experts.numel()", "f = counts / N"),)),
    Mistake(kind="boundary", cell="load_balancing_loss", name="bincount without minlength (unused experts)",
            rejected_by=("test_load_balancing_loss",),
            replace=(("counts = F.one_hot(experts.reshape(-1), E).to(probs.dtype).sum(dim=0)",
                      "counts = torch.bincount(experts.reshape(-1)).to(probs.dtype)"),)),
    Mistake(kind="autograd", cell="load_balancing_loss", name="returns a Python float (.item())",
            rejected_by=("test_load_balancing_loss",),
            replace=(("return E * (f * P).sum()", "return E * (f * P).sum().item()"),)),
    Mistake(kind="device", cell="load_balancing_loss", name="counts in torch.zeros without device",
            rejected_by=("test_load_balancing_loss",),
            replace=(("counts = F.one_hot(experts.reshape(-1), E).to(probs.dtype).sum(dim=0)",
                      "counts = torch.zeros(E, dtype=probs.dtype).index_add(0, experts.reshape(-1), "
                      "torch.ones(experts.numel(), dtype=probs.dtype))"),)),
    Mistake(kind="reference", cell="load_balancing_loss", name="reference import", rejected_by=("test_load_balancing_loss",),
            source="from course_utils.moe import load_balancing_loss\n"),
    # ---------------------------------------------------------------- capacity_keep
    Mistake(kind="boundary", cell="capacity_keep", name="capacity off by one (<= capacity)",
            rejected_by=("test_capacity_keep",),
            replace=(("return (position < capacity).reshape(k, N).T", "return (position <= capacity).reshape(k, N).T"),)),
    Mistake(kind="boundary", cell="capacity_keep", name="1-based positions (an exactly full expert drops one)",
            rejected_by=("test_capacity_keep",),
            replace=(("position = (onehot.cumsum(dim=0) * onehot).sum(dim=-1) - 1", "position = (onehot.cumsum(dim=0) * onehot).sum(dim=-1)"),)),
    Mistake(kind="logic", cell="capacity_keep", name="queue in token order (second choices compete with first)",
            rejected_by=("test_capacity_keep",),
            replace=(("queue = experts.T.reshape(-1)", "queue = experts.reshape(-1)"),
                     ("return (position < capacity).reshape(k, N).T", "return (position < capacity).reshape(N, k)"))),
    Mistake(kind="device", cell="capacity_keep", name="one-hot by comparison with an arange made without device",
            rejected_by=("test_capacity_keep",),
            source=("def capacity_keep(experts, n_experts, capacity):\n"
                    "    N, k = experts.shape\n"
                    "    queue = experts.T.reshape(-1)\n"
                    "    onehot = (queue[:, None] == torch.arange(n_experts)).long()\n"
                    "    position = (onehot.cumsum(0) * onehot).sum(-1) - 1\n"
                    "    return (position < capacity).reshape(k, N).T\n")),
    # blind red team of 12: a loop with a tensor counter read in an `if` (so meta cannot run it),
    # the result made without device=: a CPU tensor for GPU inputs
    Mistake(kind="device", cell="capacity_keep", name="loop with tensor counters, keep made without device",
            rejected_by=("test_capacity_keep",),
            source=_COUNTED_KEEP),
    Mistake(kind="reference", cell="capacity_keep", name="reference import", rejected_by=("test_capacity_keep",),
            source="from course_utils.moe import capacity_keep\n"),
    # second blind red team (round 2): a softmax by hand with no max subtraction
    Mistake(kind="boundary", cell="top_k_gating", name="softmax by hand without subtracting the max (NaN for large logits)",
            rejected_by=("test_top_k_gating",),
            replace=(("probs = torch.softmax(logits, dim=-1)",
                      "e = torch.exp(logits)\n    probs = e / e.sum(dim=-1, keepdim=True)"),)),
    Mistake(kind="boundary", cell="top_k_gating", name="softmax by hand subtracting one maximum for the whole batch",
            rejected_by=("test_top_k_gating",),
            replace=(("probs = torch.softmax(logits, dim=-1)",
                      "e = torch.exp(logits - logits.max())\n    probs = e / e.sum(dim=-1, keepdim=True)"),)),
]

# Right answers in other styles than the solution: every test must accept them.
ACCEPTED = [
    Accepted(cell="patchify", name="F.unfold then transpose",
             source=("def patchify(images, patch_size):\n"
                     "    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)\n")),
    Accepted(cell="patchify", name="Tensor.unfold twice, permute, reshape",
             source=("def patchify(images, patch_size):\n"
                     "    B, C, H, W = images.shape\n"
                     "    p = patch_size\n"
                     "    x = images.unfold(2, p, p).unfold(3, p, p)   # (B, C, H/p, W/p, p, p)\n"
                     "    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)\n")),
    Accepted(cell="patchify", name="nested Python loop over the patches (the prose only says a loop is not needed)",
             source=("def patchify(images, patch_size):\n"
                     "    B, C, H, W = images.shape\n"
                     "    p = patch_size\n"
                     "    out = []\n"
                     "    for r in range(H // p):\n"
                     "        for c in range(W // p):\n"
                     "            out.append(images[:, :, r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(B, -1))\n"
                     "    return torch.stack(out, dim=1)\n")),
    Accepted(cell="patchify", name="list of patches stacked",
             source=("def patchify(images, patch_size):\n"
                     "    B, C, H, W = images.shape\n"
                     "    p = patch_size\n"
                     "    patches = [images[:, :, r:r + p, c:c + p].reshape(B, -1)\n"
                     "               for r in range(0, H, p) for c in range(0, W, p)]\n"
                     "    return torch.stack(patches, dim=1)\n")),
    Accepted(cell="patch_embed", name="einsum on patches",
             source=("def patch_embed(images, weight, bias, patch_size):\n"
                     "    out = torch.einsum('bnk,dk->bnd', patchify(images, patch_size), weight.flatten(1))\n"
                     "    return out if bias is None else out + bias\n")),
    Accepted(cell="patch_embed", name="F.linear with F.unfold",
             source=("def patch_embed(images, weight, bias, patch_size):\n"
                     "    cols = F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)\n"
                     "    return F.linear(cols, weight.flatten(1), bias)\n")),
    Accepted(cell="top_k_gating", name="softmax over the selected logits when normalising (Mixtral)",
             source=("def top_k_gating(logits, k, normalize=True):\n"
                     "    top_logits, experts = logits.topk(k, dim=-1)\n"
                     "    if normalize:\n"
                     "        return top_logits.softmax(dim=-1), experts\n"
                     "    return logits.softmax(dim=-1).gather(-1, experts), experts\n")),
    Accepted(cell="load_balancing_loss", name="bincount with minlength",
             source=("def load_balancing_loss(probs, experts):\n"
                     "    E = probs.size(1)\n"
                     "    f = torch.bincount(experts.flatten(), minlength=E).to(probs.dtype) / experts.numel()\n"
                     "    return E * torch.dot(f, probs.mean(0))\n")),
    Accepted(cell="capacity_keep", name="scatter of ranks per expert, loop over experts",
             source=("def capacity_keep(experts, n_experts, capacity):\n"
                     "    queue = experts.t().flatten()\n"
                     "    keep = torch.zeros_like(queue, dtype=torch.bool)\n"
                     "    for e in range(n_experts):\n"
                     "        where = (queue == e).nonzero().flatten()\n"
                     "        keep[where[:capacity]] = True\n"
                     "    return keep.view(experts.size(1), experts.size(0)).t()\n")),
    # second blind red team (round 2)
    Accepted(cell="patchify", name="F.pixel_unshuffle then flatten and transpose",
             source=("def patchify(images, patch_size):\n"
                     "    return F.pixel_unshuffle(images, patch_size).flatten(2).transpose(1, 2)\n")),
    Accepted(cell="patch_embed", name="F.unfold inline and a matrix product (the prose allows any cutting of one's own)",
             source=("def patch_embed(images, weight, bias, patch_size):\n"
                     "    cols = F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)\n"
                     "    out = cols @ weight.reshape(weight.shape[0], -1).T\n"
                     "    return out if bias is None else out + bias\n")),
    Accepted(cell="patch_embed", name="tensordot on patchify",
             source=("def patch_embed(images, weight, bias, patch_size):\n"
                     "    out = torch.tensordot(patchify(images, patch_size), weight.flatten(1), dims=([2], [1]))\n"
                     "    return out if bias is None else out + bias\n")),
    Accepted(cell="top_k_gating", name="stable softmax by hand (row maximum subtracted)",
             replace=(("probs = torch.softmax(logits, dim=-1)",
                       "e = torch.exp(logits - logits.max(dim=-1, keepdim=True).values)\n    probs = e / e.sum(dim=-1, keepdim=True)"),)),
    Accepted(cell="top_k_gating", name="log_softmax, topk, gather, exp",
             source=("def top_k_gating(logits, k, normalize=True):\n"
                     "    logp = F.log_softmax(logits, dim=-1)\n"
                     "    idx = logp.topk(k, dim=-1).indices\n"
                     "    w = logp.gather(-1, idx).exp()\n"
                     "    return (w / w.sum(dim=-1, keepdim=True) if normalize else w), idx\n")),
    Accepted(cell="load_balancing_loss", name="histc counts",
             source=("def load_balancing_loss(probs, experts):\n"
                     "    E = probs.shape[1]\n"
                     "    counts = torch.histc(experts.to(probs.dtype), bins=E, min=0, max=E)\n"
                     "    return E * (counts / experts.numel() * probs.mean(dim=0)).sum()\n")),
    Accepted(cell="load_balancing_loss", name="unique with counts, over the experts that appear",
             source=("def load_balancing_loss(probs, experts):\n"
                     "    E = probs.shape[1]\n"
                     "    ids, counts = torch.unique(experts, return_counts=True)\n"
                     "    return E * (counts.to(probs.dtype) / experts.numel() * probs.mean(0)[ids]).sum()\n")),
    Accepted(cell="capacity_keep", name="loop with CPU tensor counters, keep moved to the input's device",
             source=_COUNTED_KEEP.replace("return keep\n", "return keep.to(experts.device)\n")),
    Accepted(cell="capacity_keep", name="Python counters, result on the input's device",
             source=("def capacity_keep(experts, n_experts, capacity):\n"
                     "    N, k = experts.shape\n"
                     "    used, keep, ex = [0] * n_experts, [[False] * k for _ in range(N)], experts.tolist()\n"
                     "    for r in range(k):\n"
                     "        for t in range(N):\n"
                     "            if used[ex[t][r]] < capacity:\n"
                     "                used[ex[t][r]] += 1\n"
                     "                keep[t][r] = True\n"
                     "    return torch.tensor(keep, dtype=torch.bool, device=experts.device)\n")),
]

# fourth blind red team (issue 24)
MISTAKES += [
    Mistake(cell="top_k_gating", name="experts returned as int32, not torch.long", kind="dtype",
            rejected_by=("test_top_k_gating",),
            replace=(("    return weights, experts\n", "    return weights, experts.to(torch.int32)\n"),)),
]
