"""HGM renderer: forward+backward time vs number of Gaussians and image size, tile-culled vs dense.

Random Gaussians (scale 1–4 cm in a [−0.6, 0.6]³ box, the size of HGM-tiny's body Gaussians) are rendered into
two orbit views with :func:`iclr25.hgm.render_gaussians`; the loss is the image sum. The tile and dense paths of
each configuration are timed in ``--repeats`` interleaved rounds and each keeps its best time
(:func:`iclr25.common.timing.best_times`: process CPU time on CPU, robust to other processes' load; wall time
after a sync on CUDA); the dense path is skipped where its (views·H·W·N) α tensor would exceed ``--max-dense``
elements. The speed-up column is dense / tile.

    python -m benchmarks.bench_hgm --out DIR            # CPU, ~1–2 minutes on an idle machine
    python -m benchmarks.bench_hgm --out DIR --device cuda --sizes 64,128,256 --counts 1024,4096,16384

Writes ``DIR/results.json`` and ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _sync(device: str):
    import torch

    return (lambda: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda: None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-hgm"))
    ap.add_argument("--sizes", default="32,64")
    ap.add_argument("--counts", default="256,1024,4096")
    ap.add_argument("--views", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds (best time kept)")
    ap.add_argument("--tile-size", type=int, default=8)
    ap.add_argument("--max-dense", type=float, default=6e7)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import torch

    from iclr25.common.timing import best_times
    from iclr25.hgm import orbit_cameras, render_gaussians

    torch.set_num_threads(a.threads)
    sync = _sync(a.device)
    rows = []
    for size in (int(s) for s in a.sizes.split(",")):
        cam = orbit_cameras(a.views, size, size).to(a.device)
        for n in (int(c) for c in a.counts.split(",")):
            g = torch.Generator().manual_seed(0)
            params = [
                (torch.rand(n, 3, generator=g) * 1.2 - 0.6),
                torch.randn(n, 4, generator=g),
                torch.rand(n, 3, generator=g) * 0.03 + 0.01,
                torch.rand(n, generator=g) * 0.9 + 0.05,
                torch.rand(n, 3, generator=g),
            ]
            params = [p.to(a.device).requires_grad_(True) for p in params]

            def step(backend, params=params, cam=cam):
                out = render_gaussians(*params, cam, backend=backend, tile_size=a.tile_size)
                out.image.sum().backward()

            fns = {"tile": lambda step=step, sync=sync: (step("tile"), sync())}
            if a.views * size * size * n <= a.max_dense:
                fns["dense"] = lambda step=step, sync=sync: (step("dense"), sync())
            best = best_times(fns, repeats=a.repeats, clock="process" if a.device == "cpu" else "wall")
            row = {"size": size, "gaussians": n, "views": a.views, "tile_s": best["tile"]}
            if "dense" in best:
                row["dense_s"] = best["dense"]
                row["speedup"] = row["dense_s"] / row["tile_s"]
            else:
                row["dense_s"] = row["speedup"] = None
            rows.append(row)
            print(json.dumps(row), flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    clock = "process CPU time" if a.device == "cpu" else "wall time after a sync"
    res = {"device": a.device, "threads": a.threads, "tile_size": a.tile_size, "clock": clock,
           "repeats": a.repeats, "load_avg": os.getloadavg(), "rows": rows}  # fmt: skip
    (a.out / "results.json").write_text(json.dumps(res, indent=2))
    lines = [
        f"Best of {a.repeats} interleaved rounds, {clock}, {a.threads} thread(s), load average "
        f"{res['load_avg'][0]:.1f}:",
        "",
        "| image | Gaussians | tile fwd+bwd (s) | dense fwd+bwd (s) | dense / tile |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        d = "skipped" if r["dense_s"] is None else f"{r['dense_s']:.3f}"
        sp = "—" if r["speedup"] is None else f"{r['speedup']:.1f}×"
        lines.append(f"| {r['size']}² | {r['gaussians']} | {r['tile_s']:.3f} | {d} | {sp} |")
    (a.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
