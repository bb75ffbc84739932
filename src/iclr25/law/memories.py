"""The MLP output projections as key→value memories (paper §3, following MEMIT): locating ``W_out`` in any
supported Hugging Face decoder, reading keys (inputs of ``W_out``) and residual outputs at the subject's last
token, and the fact batches those reads run on.

``W_out`` is always exposed in the paper's orientation ``W ∈ R^{d × d_k}`` (value = W k), whatever the module
stores: ``nn.Linear`` keeps ``(d, d_k)``, GPT-2's ``Conv1D`` keeps ``(d_k, d)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .facts import Fact

# model_type -> (block template, W_out path inside the block, W_out stored transposed (Conv1D))
ARCHITECTURES: dict[str, tuple[str, str, bool]] = {
    "llama": ("model.layers.{}", "mlp.down_proj", False),
    "qwen2": ("model.layers.{}", "mlp.down_proj", False),
    "mistral": ("model.layers.{}", "mlp.down_proj", False),
    "gpt2": ("transformer.h.{}", "mlp.c_proj", True),
    "gptj": ("transformer.h.{}", "mlp.fc_out", False),
}


def _model_type(model) -> str:
    cfg = getattr(model, "config", None)
    mt = getattr(cfg, "model_type", None)
    if mt not in ARCHITECTURES:
        raise ValueError(
            f"model type {mt!r} is not supported by iclr25.law; supported model types: "
            f"{sorted(ARCHITECTURES)} (their MLP output projection is located by name)"
        )
    return mt


def n_layers(model) -> int:
    cfg = model.config
    return int(getattr(cfg, "num_hidden_layers", None) or cfg.n_layer)


@dataclass(frozen=True)
class MemoryLayer:
    """One edited layer: its index, the ``W_out`` module (and its dotted name) and the enclosing block."""

    index: int
    name: str
    module: torch.nn.Module
    block: torch.nn.Module
    transposed: bool  # weight stored as (d_k, d) (GPT-2 Conv1D)

    @property
    def W(self) -> torch.Tensor:
        """``W_out`` as a (d, d_k) view of the live parameter."""
        w = self.module.weight
        return w.t() if self.transposed else w

    @property
    def d_in(self) -> int:
        return self.W.shape[1]

    @property
    def d_out(self) -> int:
        return self.W.shape[0]

    @torch.no_grad()
    def add_(self, delta: torch.Tensor, check_precision: bool = True) -> None:
        """``W ← W + Δ`` with ``Δ`` of shape (d, d_k), in place, in the parameter's dtype.

        In a low-precision dtype (bf16 / fp16) the stored change is ``round(W + Δ) − W``; if that loses more than 1 %
        of ‖Δ‖ a ``UserWarning`` names the layer and the dtype (load the model in float32 for an exact edit)."""
        if tuple(delta.shape) != (self.d_out, self.d_in):
            raise ValueError(
                f"delta for {self.name} must have shape {(self.d_out, self.d_in)}, got {tuple(delta.shape)}"
            )
        W = self.W
        low = check_precision and W.dtype in (torch.bfloat16, torch.float16)
        before = W.double() if low else None
        W.add_(delta.to(device=W.device, dtype=W.dtype))
        if low:
            d = delta.to(device=W.device, dtype=torch.float64)
            err = float((W.double() - before - d).norm() / d.norm().clamp_min(1e-300))
            if err > 0.01:
                import warnings

                warnings.warn(
                    f"the edit of {self.name} is stored in {W.dtype}: rounding changes {err:.1%} of Δ (‖applied − Δ‖ / "
                    "‖Δ‖); load the model in float32 for an exact edit",
                    stacklevel=3,
                )


def resolve_layers(model, layers: Sequence[int | str]) -> list[MemoryLayer]:
    """``MemoryLayer``s for layer indices (``[3, 4]``) or full ``W_out`` module names
    (``"model.layers.3.mlp.down_proj"``). Unknown names and out-of-range indices raise ``ValueError``."""
    mt = _model_type(model)
    block_t, sub, transposed = ARCHITECTURES[mt]
    if isinstance(layers, (int, str)):
        layers = [layers]
    layers = list(layers)
    if not layers:
        raise ValueError("layers must name at least one layer, got an empty list")
    L = n_layers(model)
    named = dict(model.named_modules())
    out: list[MemoryLayer] = []
    for spec in layers:
        if isinstance(spec, bool) or not isinstance(spec, (int, str)):
            raise ValueError(f"layers entries must be ints or module names, got {spec!r}")
        if isinstance(spec, str):
            idx = next((i for i in range(L) if f"{block_t.format(i)}.{sub}" == spec), None)
            if idx is None:
                raise ValueError(
                    f"layer name {spec!r} is not an MLP output projection of this {mt} model; expected "
                    f"{block_t.format('<i>')}.{sub} with i in [0, {L})"
                )
        else:
            idx = int(spec)
            if not 0 <= idx < L:
                raise ValueError(f"layer index {spec} out of range: the model has {L} layers")
        name = f"{block_t.format(idx)}.{sub}"
        out.append(MemoryLayer(idx, name, named[name], named[block_t.format(idx)], transposed))
    idxs = [m.index for m in out]
    if len(set(idxs)) != len(idxs):
        raise ValueError(f"layers must be distinct, got {layers!r}")
    return sorted(out, key=lambda m: m.index)


def model_fingerprint(model) -> str:
    """A cheap content hash of a model: config plus, per parameter, its shape, sum and first values."""
    import hashlib

    h = hashlib.sha256()
    h.update(model.config.to_json_string(use_diff=False).encode())
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            h.update(name.encode())
            h.update(str(tuple(p.shape)).encode())
            h.update(flat.double().sum().cpu().numpy().tobytes())
            h.update(flat[:64].double().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


# -- fact batches ------------------------------------------------------------------------------------------


@dataclass
class FactBatch:
    """Right-padded token batch of ``len(facts) × len(templates)`` rows (fact-major).

    ``subject_pos[r]``: index of the subject's last token; ``prompt_len[r]``: number of prompt tokens;
    ``target_mask[r, t]``: True where ``input_ids[r, t]`` is a target token (so logits at t−1 predict it).
    """

    input_ids: torch.Tensor  # (R, L)
    attention_mask: torch.Tensor  # (R, L)
    subject_pos: torch.Tensor  # (R,)
    prompt_len: torch.Tensor  # (R,)
    target_mask: torch.Tensor  # (R, L) bool
    n_facts: int
    n_templates: int

    def to(self, device) -> FactBatch:
        for k in ("input_ids", "attention_mask", "subject_pos", "prompt_len", "target_mask"):
            setattr(self, k, getattr(self, k).to(device))
        return self


def _max_len(model) -> int | None:
    cfg = model.config
    return getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)


def encode_facts(
    tokenizer,
    facts: Sequence[Fact],
    templates: Sequence[str] = ("{}",),
    target: str | Sequence[int] | None = "answer",
    max_len: int | None = None,
) -> FactBatch:
    """Tokenise ``template.format(prompt) + target`` for every fact and template.

    ``target``: ``"answer"`` = each fact's own ``target``; ``None`` = no target tokens; a string = the same
    target for all facts (e.g. ``" <|endoftext|>"``); a list of ids = those tokens (e.g. ``[eos_id]``).
    """
    if not facts:
        raise ValueError("facts must hold at least one Fact, got an empty list")
    for t in templates:
        if t.count("{}") != 1:
            raise ValueError(f"templates: a context template must contain exactly one '{{}}', got {t!r}")
    texts, prefixes = [], []
    for f in facts:
        for t in templates:
            pre = t[: t.index("{}")]
            texts.append(t.format(f.prompt))
            prefixes.append(pre + f.prompt[: f.subject_end])
    p_ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
    s_len = [len(x) for x in tokenizer(prefixes, add_special_tokens=True)["input_ids"]]
    if target == "answer":
        tg = tokenizer([f.target for f in facts for _ in templates], add_special_tokens=False)["input_ids"]
    elif target is None:
        tg = [[] for _ in texts]
    elif isinstance(target, str):
        ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        tg = [ids for _ in texts]
    else:
        tg = [[int(i) for i in target] for _ in texts]
    rows = [p + t for p, t in zip(p_ids, tg)]
    L = max(len(r) for r in rows)
    for i, (p, t, sl) in enumerate(zip(p_ids, tg, s_len)):
        if target is not None and not t:
            raise ValueError(f"fact {facts[i // len(templates)]!r}: target tokenises to no tokens")
        if not 1 <= sl <= len(p):
            raise ValueError(f"fact {facts[i // len(templates)]!r}: cannot locate the subject's last token")
        if max_len is not None and len(p) + len(t) > max_len:
            raise ValueError(
                f"fact {facts[i // len(templates)]!r} is {len(p) + len(t)} tokens long, longer than the "
                f"model's context ({max_len})"
            )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    R = len(rows)
    ids = torch.full((R, L), pad, dtype=torch.long)
    am = torch.zeros((R, L), dtype=torch.long)
    tm = torch.zeros((R, L), dtype=torch.bool)
    for r, (row, p) in enumerate(zip(rows, p_ids)):
        ids[r, : len(row)] = torch.tensor(row)
        am[r, : len(row)] = 1
        tm[r, len(p) : len(row)] = True
    return FactBatch(
        ids,
        am,
        torch.tensor(s_len) - 1,
        torch.tensor([len(p) for p in p_ids]),
        tm,
        len(facts),
        len(templates),
    )


def encode_for(model, tokenizer, facts, templates=("{}",), target="answer") -> FactBatch:
    dev = next(model.parameters()).device
    return encode_facts(tokenizer, facts, templates, target, max_len=_max_len(model)).to(dev)


# -- reading keys and residuals ----------------------------------------------------------------------------


def _hidden(o):
    return o[0] if isinstance(o, tuple) else o


@contextlib.contextmanager
def capture(layers: Sequence[MemoryLayer], positions: torch.Tensor, keys: bool = True, resid: bool = False):
    """Record, per layer, the ``W_out`` input (``keys``) and/or the block output (``resid``) at one position per
    row (``positions``: (R,)). Yields a dict ``{("k"|"h", layer_index): (R, dim) tensor}``."""
    store: dict = {}
    handles = []
    rows = torch.arange(positions.numel(), device=positions.device)
    try:
        for m in layers:
            if keys:

                def pre(mod, args, _i=m.index):
                    store[("k", _i)] = args[0][rows, positions]

                handles.append(m.module.register_forward_pre_hook(pre))
            if resid:

                def post(mod, args, out, _i=m.index):
                    store[("h", _i)] = _hidden(out)[rows, positions]

                handles.append(m.block.register_forward_hook(post))
        yield store
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def add_to_block_output(block: torch.nn.Module, positions: torch.Tensor, delta: torch.Tensor):
    """Add ``delta[r]`` to block's output hidden state at ``positions[r]`` of row r (MEMIT's δ injection)."""
    rows = torch.arange(positions.numel(), device=positions.device)

    def post(mod, args, out):
        h = _hidden(out)
        add = torch.zeros_like(h)
        add[rows, positions] = delta.to(h.dtype)
        h2 = h + add
        return (h2,) + tuple(out[1:]) if isinstance(out, tuple) else h2

    handle = block.register_forward_hook(post)
    try:
        yield
    finally:
        handle.remove()


def _mean_over_templates(x: torch.Tensor, batch: FactBatch) -> torch.Tensor:
    return x.reshape(batch.n_facts, batch.n_templates, -1).mean(1)


@torch.no_grad()
def fact_keys(
    model, batch: FactBatch, layers: Sequence[MemoryLayer], chunk: int = 256
) -> dict[int, torch.Tensor]:
    """Keys (``W_out`` inputs at the subject's last token, averaged over templates): ``{layer: (N, d_k)}``
    in float64."""
    outs: dict[int, list] = {m.index: [] for m in layers}
    per = chunk * batch.n_templates
    for s in range(0, batch.input_ids.shape[0], per):
        sl = slice(s, s + per)
        with capture(layers, batch.subject_pos[sl]) as st:
            model(input_ids=batch.input_ids[sl], attention_mask=batch.attention_mask[sl])
        for m in layers:
            outs[m.index].append(st[("k", m.index)].double())
    return {i: _mean_over_templates(torch.cat(v), batch) for i, v in outs.items()}


@torch.no_grad()
def block_outputs(model, batch: FactBatch, layer: MemoryLayer, chunk: int = 256) -> torch.Tensor:
    """Residual-stream output of ``layer``'s block at the subject's last token, template-averaged, (N, d)."""
    per = chunk * batch.n_templates
    res = []
    for s in range(0, batch.input_ids.shape[0], per):
        sl = slice(s, s + per)
        with capture([layer], batch.subject_pos[sl], keys=False, resid=True) as st:
            model(input_ids=batch.input_ids[sl], attention_mask=batch.attention_mask[sl])
        res.append(st[("h", layer.index)].double())
    return _mean_over_templates(torch.cat(res), batch)
