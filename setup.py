"""Build hook: ships the committed reference results as package data (everything else is in pyproject.toml).

``results/quick/<slug>/claims.json`` and the small figures beside it (``*.png``, also under ``figures/``) are
copied into the wheel as ``iclr25/_reference/<slug>/...``, and ``results/real/<slug>/...`` (the committed
``real``-preset runs) the same way as ``iclr25/_reference_real/<slug>/...``, so ``iclr25 report`` from a pip install
has its reference columns (``iclr25.report.default_reference_dir`` and ``default_real_reference_dir`` prefer a
repository checkout's ``results/quick`` and ``results/real``).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
REFERENCES = {  # folder of committed results -> its folder inside the installed package
    ROOT / "results" / "quick": "_reference",
    ROOT / "results" / "real": "_reference_real",
}
PATTERNS = ("*/claims.json", "*/*.png", "*/figures/*.png")


def reference_files(folder: Path) -> list[Path]:
    return sorted({p for pat in PATTERNS for p in folder.glob(pat) if p.is_file()})


class BuildPyWithReference(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads results/ from the checkout itself
            return
        for folder, packaged in REFERENCES.items():
            for src in reference_files(folder):  # none when the folder does not exist (yet)
                dest = Path(self.build_lib) / "iclr25" / packaged / src.relative_to(folder)
                self.mkpath(str(dest.parent))
                self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildPyWithReference})
