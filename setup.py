"""Build hook: ships the committed reference results as package data (everything else is in pyproject.toml).

``results/quick/<slug>/claims.json`` and the small figures beside it (``*.png``, also under ``figures/``) are
copied into the wheel as ``iclr25/_reference/<slug>/...``, so ``iclr25 report`` from a pip install has its
reference column (``iclr25.report.default_reference_dir`` prefers a repository checkout's ``results/quick``).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
REFERENCE = ROOT / "results" / "quick"
PATTERNS = ("*/claims.json", "*/*.png", "*/figures/*.png")


def reference_files() -> list[Path]:
    return sorted({p for pat in PATTERNS for p in REFERENCE.glob(pat) if p.is_file()})


class BuildPyWithReference(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads results/quick from the checkout itself
            return
        for src in reference_files():
            dest = Path(self.build_lib) / "iclr25" / "_reference" / src.relative_to(REFERENCE)
            self.mkpath(str(dest.parent))
            self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildPyWithReference})
