"""``iclr25 config SLUG --preset full`` lists what a run would download (``cli.downloads_of``); nothing is fetched."""

from __future__ import annotations

import types

import pytest

from iclr25.harness.cli import downloads_of


class _Cfg:
    def downloads(self):
        return [
            {"what": "model", "source": "org/model-8b", "bytes": 16_000_000_000},
            {"what": "dataset", "source": "pg19", "bytes": None},
        ]


def test_config_method_is_used_and_totals_known_sizes():
    got = downloads_of(types.SimpleNamespace(), _Cfg())
    assert [d["source"] for d in got] == ["org/model-8b", "pg19"]
    assert sum(d["bytes"] for d in got if isinstance(d["bytes"], int)) == 16_000_000_000


def test_experiment_function_is_the_fallback_and_nothing_declared_is_none():
    exp = types.SimpleNamespace(downloads=lambda cfg: [{"what": "model", "source": cfg.hub_id, "bytes": 1}])
    assert downloads_of(exp, types.SimpleNamespace(hub_id="a/b")) == [
        {"what": "model", "source": "a/b", "bytes": 1}
    ]
    assert downloads_of(types.SimpleNamespace(), object()) is None


def test_an_item_without_its_keys_is_refused_by_name():
    exp = types.SimpleNamespace(downloads=lambda cfg: [{"what": "model"}])
    with pytest.raises(ValueError, match=r"missing \['source', 'bytes'\]"):
        downloads_of(exp, object())
