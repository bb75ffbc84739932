"""Parameter counts of Quantum-PEFT vs LoRA (the paper's "logarithmic in the width" claim).

Per N×M weight: Quantum-PEFT = count(N) + count(M) + K, with count(2^n) = (2L+1)·n − 2L angles
(QSD node for other sizes); LoRA rank r = r·(N + M).
"""

from __future__ import annotations

from .unitary import columns_param_count


def count_parameters(in_features: int, out_features: int, rank: int, layers: int, node: str = "qsd") -> int:
    """Trainable Quantum-PEFT parameters of one ``nn.Linear(in_features, out_features)``: θ_U + θ_V + Λ."""
    for name, v in (("in_features", in_features), ("out_features", out_features), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if rank > min(in_features, out_features):
        raise ValueError(
            f"rank must be <= min(in_features, out_features) = {min(in_features, out_features)}, got {rank}"
        )
    return (
        columns_param_count(out_features, rank, layers, node)
        + columns_param_count(in_features, rank, layers, node)
        + rank
    )


def lora_parameters(in_features: int, out_features: int, r: int) -> int:
    """LoRA rank-r parameters of one linear layer: A (r×M) + B (N×r)."""
    for name, v in (("in_features", in_features), ("out_features", out_features), ("r", r)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return r * (in_features + out_features)


def comparison_table(
    sizes: list[tuple[int, int]], rank: int = 1, layers: int = 1, lora_rank: int = 1, node: str = "qsd"
) -> list[dict]:
    """Rows ``{in, out, qpeft, lora, ratio = qpeft / lora}`` for each (in_features, out_features)."""
    rows = []
    for m, n in sizes:
        q, lo = count_parameters(m, n, rank, layers, node), lora_parameters(m, n, lora_rank)
        rows.append({"in": m, "out": n, "qpeft": q, "lora": lo, "ratio": q / lo})
    return rows


def comparison_markdown(rows: list[dict]) -> str:
    out = ["| in × out | Quantum-PEFT | LoRA | QPEFT / LoRA | LoRA / QPEFT |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['in']} × {r['out']} | {r['qpeft']:,} | {r['lora']:,} | {r['ratio']:.4f} | {1 / r['ratio']:.1f}× |"
        )
    return "\n".join(out)
