"""RoPE handling for the cascade attention: which decoder families are supported, and exact (un)rotation.

The cascade re-assigns positions (the paper's "cache positions", §3: sinks ``0..S−1``, cached tokens
``S..S+n−1`` in age order, the chunk after them), so it must undo the model's rotation of the chunk and rotate keys
and queries itself, with the model's own ``cos``/``sin`` (its rotary module: frequencies, scaling type and
``attention_scaling`` included). That is only exact when it knows how the family applies RoPE:

* half-split (``rotate_half`` = ``cat(−x₂, x₁)``, Llama/GPT-NeoX layout) or interleaved pairs (Cohere:
  ``stack(−x_odd, x_even)``, ``cos``/``sin`` repeated per pair), detected from the rotary module's ``cos`` layout;
* partial rotary (GPT-NeoX, StableLM, Phi: only the first ``rotary_dim`` channels of a head are rotated);
* one rotary module at static frequencies, or (Gemma 3) one frequency set per layer type (``sliding_attention`` /
  ``full_attention``): each layer then gets the :class:`Rotary` of its own type (:func:`rotaries_for`).

Families are listed explicitly (:data:`SUPPORTED_MODEL_TYPES`, each covered by a logits-equality test against the
plain model); anything else is refused with a ``ValueError`` naming the model type, instead of running silently
wrong (e.g. Cohere 2 has RoPE-free global layers).

Positions the rotation table must cover (:meth:`CascadingLayer.max_rotary_position`): a chunk of ``q`` tokens sits at
cache positions up to ``S + N + q − 1``; a decoded query is rotated by its position minus each slot group's offset,
which reaches ``S + N + W − 1`` (a cascade of ``W`` slots whose ring start has moved past its first slot); slot moves
rotate by reference differences in ``(−W, W)``.
"""

from __future__ import annotations

import torch

# model_type -> expected layout ("half" or "interleaved"); each one has an exactness test in tests/cascading_kv
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "half",
    "mistral": "half",
    "qwen2": "half",
    "qwen3": "half",
    "gemma": "half",
    "gemma2": "half",  # attention-logit softcapping and per-layer sliding windows are honoured
    "phi3": "half",
    "stablelm": "half",  # partial rotary
    "gpt_neox": "half",  # partial rotary
    "phi": "half",  # partial rotary
    "cohere": "interleaved",
    "gemma3_text": "half",  # one rotary frequency set per layer type (local/global), per-layer sliding windows
}
REFUSED_MODEL_TYPES: dict[str, str] = {
    "gemma3": (
        "its image tokens attend bidirectionally inside an image (Gemma3ForConditionalGeneration), a mask the "
        "cascade's causal chunk attention does not apply; the text-only Gemma3ForCausalLM (gemma3_text) is supported"
    ),
    "cohere2": "its global-attention layers use no RoPE at all",
    "llama4": "it mixes RoPE and NoPE layers and chunked attention",
}
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Half-split layout (Llama, GPT-NeoX): ``cat(−x₂, x₁)``."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """Interleaved layout (Cohere): ``(x₀, x₁, x₂, x₃, …) → (−x₁, x₀, −x₃, x₂, …)``."""
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """``x·cos + rot(x)·sin`` on the first ``cos.shape[-1]`` channels of ``x`` (the rest pass through).

    ``cos``/``sin`` broadcast against ``x[..., :rotary_dim]`` (e.g. ``(L, rd)`` for ``x`` ``(B, H, L, D)``).
    """
    rd = cos.shape[-1]
    rot = rotate_pairs if interleaved else rotate_half
    if rd == x.shape[-1]:
        return x * cos + rot(x) * sin
    xr = x[..., :rd]
    y = xr * cos + rot(xr) * sin
    rest = x[..., rd:]
    return torch.cat((y, rest.expand(*y.shape[:-1], rest.shape[-1])), dim=-1)


def unrope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Exact inverse of :func:`rope` (also when ``cos, sin`` carry an ``attention_scaling`` factor ``a``)."""
    rd = cos.shape[-1]
    rot = rotate_pairs if interleaved else rotate_half
    n = cos * cos + sin * sin
    if rd == x.shape[-1]:
        return (x * cos - rot(x) * sin) / n
    xr = x[..., :rd]
    return torch.cat(((xr * cos - rot(xr) * sin) / n, x[..., rd:]), dim=-1)


def _sign(rd: int, interleaved: bool, like: torch.Tensor) -> torch.Tensor:
    """Signs that turn the plain channel swap into ``rot``: ``rot(x) = swap(x) · sign``."""
    if interleaved:
        return torch.tensor([-1.0, 1.0], dtype=like.dtype, device=like.device).repeat(rd // 2)
    return torch.cat([-torch.ones(rd // 2, dtype=like.dtype, device=like.device),
                      torch.ones(rd - rd // 2, dtype=like.dtype, device=like.device)])  # fmt: skip


def rope_folded(
    x: torch.Tensor, cos: torch.Tensor, ssin: torch.Tensor, interleaved: bool = False
) -> torch.Tensor:
    """:func:`rope` with the sign folded into ``ssin = sin · sign``: ``x·cos + swap(x)·ssin`` (fewer kernels)."""
    rd = cos.shape[-1]
    full = rd == x.shape[-1]
    xr = x if full else x[..., :rd]
    sw = xr.unflatten(-1, (rd // 2, 2)).flip(-1).flatten(-2) if interleaved else xr.roll(rd // 2, -1)
    y = torch.addcmul(xr * cos, sw, ssin)
    if full:
        return y
    rest = x[..., rd:]
    return torch.cat((y, rest.expand(*y.shape[:-1], rest.shape[-1])), dim=-1)


class Rotary:
    """The model's rotary module plus what the cascade needs to rotate exactly.

    ``model_cos_sin(like, position_ids)`` — the model's own ``(cos, sin)`` ``(b, L, rd)`` (used to undo its rotation);
    ``table(device)`` — ``(cos, sin)`` for integer positions ``−T..T`` ``(2T+1, rd)`` in float32, scaled like the
    model's (row ``T + p`` is position ``p``); ``unit`` variants divide out ``attention_scaling`` (pure rotations,
    used to move an already rotated key by a small position difference).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        model_type: str,
        interleaved: bool,
        rotary_dim: int,
        layer_type: str | None = None,
    ) -> None:
        self.module = module
        self.model_type = model_type
        self.interleaved = bool(interleaved)
        self.rotary_dim = int(rotary_dim)
        self.layer_type = layer_type  # Gemma 3: the module computes cos/sin per layer type
        attr = "attention_scaling" if layer_type is None else f"{layer_type}_attention_scaling"
        self.scaling = float(getattr(module, attr, 1.0) or 1.0)
        self._T = 0
        self._tab: dict = {}
        self._memo: tuple | None = None
        self.layouts: dict = {}  # slot layouts shared by all layers (they move in lockstep), see CascadingLayer.layout
        self.moves: dict = {}  # index/cos/sin tensors of single-token slot moves, see CascadingLayer._commit_single
        self.masks: dict = {}  # additive causal masks of a full cache's chunks (cascade_attention_forward)

    def cos_sin(self, like: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary module's ``(cos, sin)`` at ``position_ids`` ``(b, L)`` (of this layer type, when it has types)."""
        if self.layer_type is None:
            return self.module(like, position_ids)
        return self.module(like, position_ids, self.layer_type)

    def model_cos_sin(
        self, like: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``(b, 1, L, rd)`` exactly as the model computed them (memoised for the same ids tensor)."""
        return self._model(like, position_ids)[:2]

    def model_inverse(
        self, like: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos/n, −sin/n·sign)`` with ``n = cos² + sin²``: :meth:`apply` with these undoes the model's rotation."""
        return self._model(like, position_ids)[2:]

    def _model(self, like: torch.Tensor, position_ids: torch.Tensor) -> tuple:
        m = self._memo
        if m is not None and m[0] is position_ids and m[1] == like.dtype and m[2] == like.device:
            return m[3]
        pos = position_ids.to(like.device)
        if pos.ndim == 1:
            pos = pos[None]
        cos, sin = self.cos_sin(like, pos)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        n = cos * cos + sin * sin
        sign = _sign(cos.shape[-1], self.interleaved, cos)
        out = (cos, sin, cos / n, -sin / n * sign)  # the inverse with the sign folded in (for rope_folded)
        self._memo = (
            position_ids,
            like.dtype,
            like.device,
            out,
        )  # the same ids tensor is passed to every layer
        return out

    def apply(self, x: torch.Tensor, cos: torch.Tensor, ssin: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` with ``(cos, sin·sign)`` from :meth:`at` / :meth:`model_inverse`."""
        return rope_folded(x, cos, ssin, self.interleaved)

    def ensure(self, max_abs_position: int, device: torch.device) -> None:
        if max_abs_position <= self._T and self._tab.get("device") == device:
            return
        T = max(int(max_abs_position), 2 * self._T, 64)
        pos = torch.arange(-T, T + 1, device=device)[None]
        like = torch.zeros(1, dtype=torch.float32, device=device)
        cos, sin = self.cos_sin(like, pos)
        cos, sin = cos[0].float(), sin[0].float()
        sin = sin * _sign(cos.shape[-1], self.interleaved, cos)  # folded for rope_folded
        self._T = T
        self._tab = {"device": device, "f32": (cos, sin, cos / self.scaling, sin / self.scaling)}
        self.layouts = {}
        self.moves = {}
        self.masks = {}

    @property
    def table_center(self) -> int:
        """Row of position 0 in :meth:`table` (the table covers positions ``−T..T``)."""
        return self._T

    def table(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole ``(cos, sin·sign)`` table ``(2T+1, rd)`` in ``dtype``, model-scaled (:meth:`at` indexes it)."""
        t = self._tab.get(dtype)
        if t is None:
            t = self._tab[dtype] = tuple(x.to(dtype) for x in self._tab["f32"])
        return t[0], t[1]

    def at(
        self, positions: torch.Tensor, dtype: torch.dtype, unit: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin·sign)`` of integer ``positions`` (any shape) → ``(*shape, rd)`` in ``dtype``, for :meth:`apply`.

        ``unit=True`` divides out ``attention_scaling`` (a pure rotation, to move an already rotated key).
        """
        t = self._tab.get(dtype)
        if t is None:
            t = self._tab[dtype] = tuple(x.to(dtype) for x in self._tab["f32"])
        idx = positions + self._T
        return (t[2][idx], t[3][idx]) if unit else (t[0][idx], t[1][idx])


def _layout(module: torch.nn.Module, device: torch.device, layer_type: str | None = None) -> tuple[str, int]:
    """``("half" | "interleaved", rotary_dim)`` read off the rotary module's ``cos`` at position 1."""
    like = torch.zeros(1, dtype=torch.float32, device=device)
    pos = torch.tensor([[1]], device=device)
    cos, _ = module(like, pos) if layer_type is None else module(like, pos, layer_type)
    c = cos[0, 0].float()
    rd = c.shape[-1]
    half = bool(torch.equal(c[: rd // 2], c[rd // 2 :]))
    inter = bool(torch.equal(c[0::2], c[1::2]))
    if half == inter:  # rd <= 2 or an unknown layout
        return ("half" if half and rd <= 2 else "unknown"), rd
    return ("half" if half else "interleaved"), rd


def _model_type(model: torch.nn.Module) -> str:
    """The decoder's model type, refusing (``ValueError`` naming it) the families the cascade cannot run exactly."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    names = [getattr(model.config, "model_type", None), getattr(cfg, "model_type", type(model).__name__)]
    for mt in names:
        if mt in REFUSED_MODEL_TYPES:
            raise ValueError(
                f"model_type {mt!r} is not supported by the cascading KV cache: {REFUSED_MODEL_TYPES[mt]}, so "
                f"re-assigning cache positions cannot be done exactly. Supported: {sorted(SUPPORTED_MODEL_TYPES)}"
            )
    mt = names[1]
    if mt not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"model_type {mt!r} is not supported by the cascading KV cache (it needs a decoder whose RoPE it knows "
            f"how to undo and re-apply exactly). Supported: {sorted(SUPPORTED_MODEL_TYPES)}"
        )
    if getattr(cfg, "use_bidirectional_attention", False):
        raise ValueError(
            f"model_type {mt!r} with use_bidirectional_attention=True is not supported by the cascading KV cache: "
            "its tokens attend to later tokens, so a chunk cannot be committed before the rest of the stream is seen"
        )
    return mt


def _check_rope_type(mt: str, rope_type: str, what: str = "") -> None:
    if rope_type not in STATIC_ROPE_TYPES:
        raise ValueError(
            f"model_type {mt!r} uses rope_type {rope_type!r}{what}, whose frequencies depend on the sequence length; "
            f"the cascading cache supports static RoPE types {STATIC_ROPE_TYPES}"
        )


def rotaries_for(model: torch.nn.Module) -> list[Rotary]:
    """One :class:`Rotary` per decoder layer of a supported ``transformers`` decoder (layers of one rotary frequency
    set share one object); ``ValueError`` naming the model type otherwise."""
    mt = _model_type(model)
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    mods = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    typed = getattr(cfg, "layer_types", None) is not None and all(
        hasattr(m, f"{t}_inv_freq") for m in mods for t in set(cfg.layer_types)
    )
    if not typed:
        mods = [m for m in mods if hasattr(m, "inv_freq")]
    if len(mods) != 1:
        raise ValueError(
            f"model_type {mt!r}: expected exactly one rotary-embedding module with inv_freq, found {len(mods)}"
        )
    module = mods[0]
    n_layers = cfg.num_hidden_layers
    if not typed:
        _check_rope_type(mt, getattr(module, "rope_type", "default"))
        layout, rd = _layout(module, module.inv_freq.device)
        if layout != SUPPORTED_MODEL_TYPES[mt]:
            raise ValueError(
                f"model_type {mt!r}: rotary cos/sin layout is {layout!r}, expected {SUPPORTED_MODEL_TYPES[mt]!r}"
            )
        return [Rotary(module, mt, layout == "interleaved", rd)] * n_layers
    per_type: dict[str, Rotary] = {}
    for t in sorted(set(cfg.layer_types)):
        _check_rope_type(mt, module.rope_type.get(t, "default"), f" on its {t!r} layers")
        layout, rd = _layout(module, getattr(module, f"{t}_inv_freq").device, t)
        if layout != SUPPORTED_MODEL_TYPES[mt]:
            raise ValueError(
                f"model_type {mt!r} ({t!r} layers): rotary cos/sin layout is {layout!r}, expected "
                f"{SUPPORTED_MODEL_TYPES[mt]!r}"
            )
        per_type[t] = Rotary(module, mt, layout == "interleaved", rd, layer_type=t)
    return [per_type[t] for t in cfg.layer_types[:n_layers]]


def rotary_for(model: torch.nn.Module) -> Rotary:
    """The :class:`Rotary` of a supported ``transformers`` decoder's first layer (:func:`rotaries_for` gives every
    layer's); ``ValueError`` naming the model type otherwise."""
    return rotaries_for(model)[0]
