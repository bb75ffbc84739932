"""The lowest ``transformers`` release whose model forward takes the cache as ``cache=`` (checked at import).

The streaming path passes the cascading cache as ``model(..., cache=cache)`` and ``model.generate(...,
cache=cache)``. Releases before :data:`MIN_TRANSFORMERS` name that argument ``past_key_values``: their
``forward`` swallows ``cache=`` in ``**kwargs`` and builds a fresh ``DynamicCache``, so a strided prefill runs
"cleanly" while the cascading cache stays empty and the logits are those of a plain full-attention model. The
bound was found by running the cache path (prefill logits against dense attention, ``get_seq_length``, streaming
``generate`` against ``generate``) on each release; ``pyproject.toml`` declares the same bound. Measured on a
tiny Llama/Qwen2/Mistral (68 tokens, stride 7): 5.17.0, 5.20.0, 5.22.0 and 5.23.0 keep the cache empty
(``get_seq_length() == 0``, prefill logits off the dense ones by 0.75-0.89; ``generate(cache=...)`` is refused as
an unused argument); 5.24.0 holds all 68 tokens with logits within 4e-7 of dense attention.
"""

from __future__ import annotations

import re

from ..registry import DependencyVersionError

MIN_TRANSFORMERS = "5.24.0"


def _release(version: str) -> tuple[int, ...]:
    """``"5.22.1.dev0"`` → ``(5, 22, 1)``: the numeric release segment (pre/dev tags never raise the version)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    if not m:
        raise DependencyVersionError(f"cannot read the transformers version {version!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def check_transformers(version: str | None = None) -> str:
    """``DependencyVersionError`` naming the installed version when it is older than :data:`MIN_TRANSFORMERS`;
    returns the version otherwise. ``version`` defaults to ``transformers.__version__``."""
    if version is None:
        import transformers

        version = transformers.__version__
    have, need = _release(version), _release(MIN_TRANSFORMERS)
    width = max(len(have), len(need))
    if have + (0,) * (width - len(have)) < need + (0,) * (width - len(need)):
        raise DependencyVersionError(
            f"iclr25.cascading_kv needs transformers>={MIN_TRANSFORMERS}, but transformers {version} is installed "
            "(its models take the cache as `past_key_values`, so the cascading cache would silently stay empty): "
            f"pip install 'transformers>={MIN_TRANSFORMERS}'"
        )
    return version
