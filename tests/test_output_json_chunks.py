"""``show --json`` streams the per-callpath list (output.json_chunks): the same text as
json_text of the whole summary dict."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfcast.io import tidy
from perfcast.output import envelope, json_chunks, json_text

from conftest import cli_items


@pytest.mark.parametrize("block", [1, 2, 4096])
@pytest.mark.parametrize("obj", [{"a": [1, 2, 3], "b": None, "c": [], "d": {"x": 1.5}, "e": "s"},
                                 {"only": [{"k": 1}]}, {"a": 1}, {}, [1, 2]])
def test_json_chunks_equal_json_text(obj, block):
    lazy = {k: iter(v) if isinstance(v, list) else v for k, v in obj.items()} if isinstance(obj, dict) else obj
    assert "".join(json_chunks(lazy, block)) == json_text(obj)


def test_json_chunks_encode_the_other_values_first():
    """A value that cannot be encoded fails before the first piece (nothing half-written)."""
    chunks = json_chunks({"list": iter([1, 2]), "bad": float("nan")})
    with pytest.raises(ValueError):
        next(chunks)


def test_show_json_streamed_equals_the_summary(tmp_path):
    """``show --json`` writes the per-callpath list as it is encoded: the same text as the summary
    dict's JSON (a tree with nested callpaths, a callpath without values)."""
    import json

    from click.testing import CliRunner

    from perfcast.cli import cli
    from perfcast.output import json_text

    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"p": [4, 8, 4, 8], "callpath": ["main->a", "main->a", "b", "b"],
                             "metric": ["time"] * 4, "value": [1.0, 2.0, 3.0, 4.0]}), f)
    res = CliRunner().invoke(cli, ["show", str(f), "--json"])
    assert res.exit_code == 0, res.output
    exp = tidy._read_parquet(f, None)
    exp.meta["format"] = "tidy-parquet"
    got = cli_items(res.output, "experiment")[0]
    assert got["callpaths"] == [
        {"path": "main", "name": "main", "parent": None, "depth": 0, "has_values": False},
        {"path": "main->a", "name": "a", "parent": "main", "depth": 1, "has_values": True},
        {"path": "b", "name": "b", "parent": None, "depth": 0, "has_values": True}]
    # streamed: the envelope around the summary's own text (json_text), written a piece at a time
    head = json_text(envelope("experiment", []))[:-len("[]}\n")]
    assert res.output == head + "[" + json_text({**exp.summary(), "meta": got["meta"]})[:-1] + "]}\n"
