"""The hand-over between the cascading cache and the cascade attention inside one forward call (same thread).

``CascadingLayer.update`` leaves its layer in :data:`PENDING` for the attention call that follows
(:func:`take_pending`); ``CascadingKVCache.get_mask_sizes`` leaves the cache in :data:`SIZING` for the mask function
that ``transformers`` runs right after it (:func:`take_sizing`). Its own module, below both :mod:`.cache` (which
writes the hand-over and switches a model to the cascade attention) and :mod:`.attention` (which takes it), so that
neither imports the other both ways.
"""

from __future__ import annotations

import threading

from transformers.cache_utils import Cache, CacheLayerMixin

PENDING = threading.local()  # the layer whose chunk waits for its attention call (same thread, same forward)
SIZING = threading.local()  # the cascading cache whose attention mask is being built (see take_sizing)


def take_pending(layer_idx: int | None = None) -> CacheLayerMixin | None:
    """Pop the layer (a ``CascadingLayer``) handed over by the last ``CascadingLayer.update`` (``None`` when there
    is none)."""
    layer = getattr(PENDING, "layer", None)
    PENDING.layer = None
    if (
        layer is not None
        and layer_idx is not None
        and layer.layer_idx is not None
        and layer.layer_idx != layer_idx
    ):
        raise RuntimeError(
            f"cascade attention of layer {layer_idx} received the cache of layer {layer.layer_idx}"
        )
    return layer


def take_sizing() -> Cache | None:
    """Pop the cascading cache (a ``CascadingKVCache``) that sized the attention mask being built
    (``CascadingKVCache.get_mask_sizes`` runs right before the mask function inside ``transformers``'
    ``create_causal_mask``); ``None`` for other caches."""
    cache = getattr(SIZING, "cache", None)
    SIZING.cache = None
    return cache
