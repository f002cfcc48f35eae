"""One JSON layout for every command (issue 19, item 3): the schema the package ships is a valid
JSON Schema, every command that has `--json` names its kind in it, and every kind is checked
against it by some test of the command (`conftest.cli_json`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema

from perfcast.output import SCHEMA_FILE, SCHEMA_VERSION, envelope

from conftest import REPO, cli_items, cli_json

SCHEMA = json.loads(SCHEMA_FILE.read_text())
KINDS = SCHEMA["properties"]["kind"]["enum"]


def test_the_schema_is_a_valid_json_schema_and_matches_the_envelope():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema"]["const"] == SCHEMA_VERSION
    doc = envelope("models", [])
    assert list(doc) == ["perfcast", "schema", "kind", "items"]
    cli_json(json.dumps(doc), "models")


def _written_kinds() -> set[str]:
    """The kinds the command-line code writes: the first argument of every write_json /
    write_json_chunks / envelope / enveloped_chunks call in src/perfcast."""
    kinds = set()
    for path in (REPO / "src" / "perfcast").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in
                    ("write_json", "write_json_chunks", "envelope", "enveloped_chunks") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                kinds.add(node.args[0].value)
    return kinds


def test_every_kind_written_is_in_the_schema_and_checked_by_a_test():
    written = _written_kinds()
    assert written and written <= set(KINDS), written - set(KINDS)
    # a kind is checked when some test passes it to cli_json / cli_items (which validate), or runs
    # the command through test_cli_analysis.js (which validates it as the kind named by the command)
    checked = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        text = path.read_text()
        checked |= set(re.findall(r'cli_(?:json|items)\([^()]*(?:\([^()]*\))?[^()]*,\s*"([a-z-]+)"\)', text))
        checked |= set(re.findall(r'\bjs\(capsys, "([a-z-]+)"', text))
    assert written <= checked, f"kinds written but never checked against the schema: {sorted(written - checked)}"


def test_a_wrong_field_is_refused():
    bad = envelope("predictions", [{"callpath": "a", "metric": "t", "unit": "", "at": {"p": 4}, "value": 1.0,
                                    "lower": 0.5, "upper": 2.0, "level": 0.9, "clipped": False,
                                    "confidence": "medium", "formula": "1", "status": "ok"}])
    cli_json(json.dumps(bad), "predictions")
    bad["items"][0]["value"] = None            # a prediction always has a value
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(bad))
    assert errors
    model = envelope("models", [{"callpath": "a", "metric": "t", "parameters": ["p"], "status": "ok", "formula": "1",
                                 "unit": "", "aggregate": "", "rank": 1, "warnings": [], "upper": [4]}])
    # "upper" is an interval bound everywhere; a model's largest measured values are largest_measured
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(model))


def test_formats(capsys):
    from conftest import cli

    code, out, err = cli(capsys, "formats", "--json")
    assert code == 0, err
    names = [f["name"] for f in cli_items(out, "formats")]
    assert "extrap-text" in names or any(n.startswith("extrap") for n in names)
