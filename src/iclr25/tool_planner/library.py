"""The released toolkit-library file: tools with their functionality text f(a) and toolkit (Tool-Planner §3.1).

The official release stores its tool library as JSON lines (one object per API, the file is named ``.json``)
with six keys:

- ``functionality``: f(a), the LLM-written one-paragraph functionality of the API (what §3.1 embeds);
- ``id``: the API's integer id;
- ``api_dest``: ``name`` (the API name, lower case, spaces → ``_``), ``package_name`` (the standardised
  ToolBench tool name), ``type_name`` (the RapidAPI category), ``desc`` (the API description),
  ``package_desc`` (the tool description);
- ``api_doc``: the raw ToolBench tool-JSON ``api_list`` entry (``name``, ``url``, ``description``,
  ``method``, ``required_parameters``, ``optional_parameters``, ``code``, ...);
- ``toolkit``: the API's toolkit id, ``-1`` when the library is not clustered yet;
- ``toolkit_fun``: the toolkit's description d_j (an LLM summary), ``""`` when there is none.

:func:`load_toolkit_library` reads such a file (a JSON array of the same objects is accepted too) into a
:class:`ToolkitLibrary`; each API becomes a :class:`Tool` the way the release builds its function schema (the
ToolBench entry is taken from ``api_dest`` name/desc and ``api_doc``'s parameter lists, the tool name is
``package_name``, then :func:`toolbench_to_openai`). :meth:`ToolkitLibrary.toolkits` rebuilds the stored
toolkits with their stored descriptions; :meth:`ToolkitLibrary.index` embeds the stored functionality texts so
that an unclustered library can be clustered with :func:`build_toolkits`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .schemas import Tool, _check_quirks, toolbench_to_openai
from .toolkits import Embedder, ToolIndex, ToolkitSet, toolkits_from_labels

LIBRARY_KEYS = ("functionality", "id", "api_dest", "api_doc", "toolkit", "toolkit_fun")
API_DEST_KEYS = ("name", "package_name", "type_name", "desc")
API_DOC_KEYS = ("required_parameters", "optional_parameters")


@dataclass(frozen=True)
class LibraryEntry:
    """One row of a toolkit library: the converted tool, its functionality text and stored toolkit."""

    id: int
    tool: Tool
    functionality: str
    toolkit: int  # -1: not clustered
    toolkit_description: str
    category: str  # the RapidAPI category (api_dest.type_name)


@dataclass
class ToolkitLibrary:
    """A loaded toolkit library (rows in file order)."""

    entries: list[LibraryEntry]
    path: str = ""

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def tools(self) -> list[Tool]:
        return [e.tool for e in self.entries]

    @property
    def functionality(self) -> dict[str, str]:
        """Tool name → stored functionality text f(a)."""
        return {e.tool.name: e.functionality for e in self.entries}

    @property
    def clustered(self) -> bool:
        """Whether every row has a toolkit (the release clusters the whole library when any row has -1)."""
        return all(e.toolkit >= 0 for e in self.entries)

    def index(self, embedder: Embedder | None = None) -> ToolIndex:
        """A :class:`ToolIndex` over the library that embeds the stored functionality texts f(a)."""
        text = self.functionality
        return ToolIndex(self.tools, embedder, text=lambda t: text[t.name])

    def toolkits(self, embedder: Embedder | None = None, index: ToolIndex | None = None) -> ToolkitSet:
        """The stored toolkits. A toolkit's description is its ``toolkit_fun`` (the last non-empty one of its
        rows in file order, as the release overwrites it row by row), else its members' functionality texts
        joined. Toolkit ids are the stored ids when they are 0 … K-1 (as the release writes them); with gaps
        they are renumbered in ascending order, with a warning. ``ValueError`` when the library is not
        clustered (cluster it with ``build_toolkits(library.index(), k)``)."""
        unclustered = [e.id for e in self.entries if e.toolkit < 0]
        if unclustered:
            raise ValueError(
                f"toolkit library {self.path or '<memory>'}: {len(unclustered)} rows have toolkit -1 (not "
                f"clustered; ids {unclustered[:5]}); cluster it with build_toolkits(library.index(), k)"
            )
        index = index if index is not None else self.index(embedder)
        if [t.name for t in index.tools] != [e.tool.name for e in self.entries]:
            raise ValueError("index must be built over this library's tools, in file order (library.index())")
        labels = [e.toolkit for e in self.entries]
        used = sorted(set(labels))
        if used != list(range(len(used))):
            warnings.warn(
                f"toolkit library {self.path or '<memory>'}: toolkit ids {used[:10]} are not 0..{len(used) - 1}; "
                "renumbered in ascending order",
                stacklevel=2,
            )
        descriptions: dict[int, str] = {}
        for e in self.entries:
            if e.toolkit_description:
                descriptions[e.toolkit] = e.toolkit_description
        return toolkits_from_labels(index, labels, descriptions=descriptions)


def _row_error(where: str, msg: str) -> ValueError:
    return ValueError(f"toolkit library {where}: {msg}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _entry(row: Any, where: str, quirks: str) -> LibraryEntry:
    if not isinstance(row, Mapping):
        raise _row_error(where, f"each row must be a JSON object, got {type(row).__name__}")
    missing = [k for k in LIBRARY_KEYS if k not in row]
    if missing:
        raise _row_error(where, f"missing keys {missing} (a row has {list(LIBRARY_KEYS)}), got {sorted(row)}")
    if not isinstance(row["functionality"], str):
        raise _row_error(where, f"functionality must be a str, got {row['functionality']!r:.80}")
    if not _is_int(row["id"]):
        raise _row_error(where, f"id must be an int, got {row['id']!r}")
    if not _is_int(row["toolkit"]) or row["toolkit"] < -1:
        raise _row_error(where, f"toolkit must be an int >= -1 (-1: not clustered), got {row['toolkit']!r}")
    if not isinstance(row["toolkit_fun"], str):
        raise _row_error(where, f"toolkit_fun must be a str, got {row['toolkit_fun']!r:.80}")
    dest, doc = row["api_dest"], row["api_doc"]
    if not isinstance(dest, Mapping) or any(not isinstance(dest.get(k), str) for k in API_DEST_KEYS):
        got = sorted(dest) if isinstance(dest, Mapping) else type(dest).__name__
        raise _row_error(where, f"api_dest must be an object with str {list(API_DEST_KEYS)}, got {got}")
    if not isinstance(doc, Mapping) or any(not isinstance(doc.get(k), list) for k in API_DOC_KEYS):
        got = sorted(doc) if isinstance(doc, Mapping) else type(doc).__name__
        raise _row_error(where, f"api_doc must be an object with list {list(API_DOC_KEYS)}, got {got}")
    # the ToolBench entry the release builds from a row (its fetch_api_json), then the standard converter
    api = {
        "category_name": dest["type_name"],
        "api_name": dest["name"],
        "api_description": dest["desc"],
        "required_parameters": doc["required_parameters"],
        "optional_parameters": doc["optional_parameters"],
        "tool_name": dest["package_name"],
    }
    try:
        tool = toolbench_to_openai(api, dest["package_name"], quirks=quirks)
    except ValueError as e:
        raise _row_error(where, str(e)) from None
    meta = {**tool.meta, "library_id": row["id"], "api_doc": dict(doc)}
    tool = Tool(tool.name, tool.description, tool.parameters, tool.category, meta)
    return LibraryEntry(
        id=row["id"],
        tool=tool,
        functionality=row["functionality"],
        toolkit=row["toolkit"],
        toolkit_description=row["toolkit_fun"],
        category=dest["type_name"],
    )


def load_toolkit_library(path: str | Path, quirks: str = "none") -> ToolkitLibrary:
    """Read a toolkit-library file in the released format (JSON lines of the six-key rows described in the
    module docstring; a JSON array of rows is accepted too). ``quirks`` is passed to
    :func:`toolbench_to_openai`. ``ValueError`` naming the file and line for a malformed row, a duplicated id
    or two rows that convert to the same function name."""
    _check_quirks(quirks)
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    rows: Sequence[tuple[str, Any]]
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise _row_error(str(path), f"not valid JSON: {e.msg} (line {e.lineno})") from None
        rows = [(f"{path} row {i}", r) for i, r in enumerate(data)]
    else:
        parsed = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                parsed.append((f"{path}:{i}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise _row_error(f"{path}:{i}", f"not valid JSON: {e.msg}") from None
        rows = parsed
    if not rows:
        raise _row_error(str(path), "no rows (expected one JSON object per line)")
    entries: list[LibraryEntry] = []
    seen_id: dict[int, str] = {}
    seen_name: dict[str, str] = {}
    for where, row in rows:
        e = _entry(row, where, quirks)
        if e.id in seen_id:
            raise _row_error(where, f"id {e.id} is already used at {seen_id[e.id]}")
        if e.tool.name in seen_name:
            raise _row_error(where, f"converts to function name {e.tool.name!r}, as {seen_name[e.tool.name]}")
        seen_id[e.id], seen_name[e.tool.name] = where, where
        entries.append(e)
    return ToolkitLibrary(entries=entries, path=str(path))
