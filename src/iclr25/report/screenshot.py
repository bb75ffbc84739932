"""Render an HTML file in headless Chromium (Debian ``chromium``) and save a PNG screenshot.

``python -m iclr25.report.screenshot runs/index.html runs/index.png [WIDTH [HEIGHT]]``
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for c in CANDIDATES:
        p = shutil.which(c)
        if p:
            return p
    return None


def screenshot(
    html_path: str | Path, png_path: str | Path, width: int = 1280, height: int = 2000, timeout: float = 90.0
) -> Path:
    exe = find_chromium()
    if exe is None:
        raise RuntimeError("no Chromium found on PATH (install Debian's `chromium` package)")
    html_path, png_path = Path(html_path).resolve(), Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as prof:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={prof}",
            f"--window-size={width},{height}",
            f"--screenshot={png_path}",
            html_path.as_uri(),
        ]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    if not png_path.is_file() or png_path.stat().st_size == 0:
        raise RuntimeError(f"Chromium wrote no screenshot to {png_path}")
    return png_path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3, 4) or not all(a.isdigit() for a in argv[2:]):
        print(
            "usage: python -m iclr25.report.screenshot INDEX.html OUT.png [WIDTH [HEIGHT]]", file=sys.stderr
        )
        return 2
    size = [int(a) for a in argv[2:]]
    print(screenshot(argv[0], argv[1], *size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
