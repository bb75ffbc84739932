"""CoRE MOF 2019: the computation-ready experimental metal-organic frameworks as pymatgen ``Structure``s with
their table properties (Zeo++ pore diameters, density, surface areas, metals, open metal sites).

The CIFs come in one ``tar.xz`` per subset (``2014``, ``2019-ASR`` all solvent removed, ``2019-FSR`` free
solvent removed); entries are parsed with pymatgen's ``CifParser`` only when selected (``names`` / ``limit``), so
reading a handful does not parse 12,020 files.
"""

from __future__ import annotations

import csv
import io
import tarfile
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .store import path

SUBSETS = ("2014", "2019-ASR", "2019-FSR")


@dataclass
class MOFEntry:
    name: str  # the CSV's `filename` (the CIF's stem)
    structure: Any  # pymatgen.core.Structure
    properties: dict[str, str] = field(default_factory=dict)  # the CSV row (strings, as the table has them)

    @property
    def density(self) -> float:
        """The table's density in g/cm^3 (the CSV column ``cm3_g`` holds Zeo++'s density despite its name)."""
        return float(self.properties["cm3_g"])

    @property
    def metals(self) -> tuple[str, ...]:
        return tuple(m.strip() for m in self.properties.get("All_Metals", "").split(",") if m.strip())


def _check(subset: str) -> None:
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")


def core_mof_table(subset: str = "2019-ASR") -> dict[str, dict[str, str]]:
    """``{name: CSV row}`` for every MOF of ``subset`` (12,020 for 2019-ASR)."""
    _check(subset)
    text = (path("core-mof-2019") / "CoRE_MOF" / "data" / f"{subset}.csv").read_text(
        encoding="utf-8", errors="replace"
    )
    rows = csv.DictReader(io.StringIO(text))
    return {r["filename"]: {k: v for k, v in r.items() if k} for r in rows if r.get("filename")}


def iter_cifs(subset: str = "2019-ASR", names: Iterable[str] | None = None) -> Iterator[tuple[str, str]]:
    """``(name, CIF text)`` in archive order (all, or those in ``names``)."""
    _check(subset)
    want = set(names) if names is not None else None
    archive = path("core-mof-2019") / "CoRE_MOF" / "data" / f"{subset}.tar.xz"
    with tarfile.open(archive, mode="r:xz") as tf:
        for m in tf:
            if not m.isfile() or not m.name.endswith(".cif"):
                continue
            name = m.name.rsplit("/", 1)[-1].removesuffix(".cif")
            if want is not None and name not in want:
                continue
            f = tf.extractfile(m)
            if f is not None:
                yield name, f.read().decode("utf-8", errors="replace")


def structure_from_cif(text: str) -> Any:
    """A pymatgen ``Structure`` from CIF text (the primitive cell is not taken: CoRE MOF's cell is kept)."""
    from pymatgen.io.cif import CifParser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pymatgen warns about rounded occupancies and missing symmetry tags
        return CifParser(io.StringIO(text)).parse_structures(primitive=False)[0]


def load_core_mof(
    subset: str = "2019-ASR", *, names: Iterable[str] | None = None, limit: int | None = None
) -> list[MOFEntry]:
    """CoRE MOF entries as :class:`MOFEntry` (``Structure`` + table row), in archive order: those named in
    ``names``, or the first ``limit`` (all when both are ``None``; parsing all 12,020 takes many minutes)."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    table = core_mof_table(subset)
    out = []
    for name, text in iter_cifs(subset, names):
        out.append(MOFEntry(name, structure_from_cif(text), table.get(name, {})))
        if limit is not None and len(out) >= limit:
            break
    return out
