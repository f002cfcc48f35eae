"""`perfcast collect` on the command line: options and YAML, JSON output, one-line errors."""

import json

from perfcast import store
from perfcast.cli import main


def test_collect_command_and_yaml(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\necho "perfcast-timer solve $(($1 * 2))"\n')
    app.chmod(0o755)
    out = tmp_path / "a.perfcast"
    rc = main(["collect", "-o", str(out), "-P", "n=1,3", "--reps", "2", "--json", "--", str(app), "{n}"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 4 and summary["failed"] == []
    exp = store.read(out)
    agg = exp.aggregate("mean")
    assert agg[agg.callpath == "app->solve"]["value"].tolist() == [2.0, 6.0]
    y = tmp_path / "c.yaml"
    y.write_text(f"command: [{app}, '{{n}}']\nparameters: {{n: [5]}}\nreps: 1..1\noutput: y.perfcast\n")
    assert main(["collect", str(y), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["points"] == [{"n": 5, "repetitions": 1}]
    assert store.read(tmp_path / "y.perfcast").aggregate("mean")["value"].max() == 10.0


def test_collect_errors_are_one_line(tmp_path, capsys):
    cases = [
        ["collect", "-o", str(tmp_path / "x.perfcast"), "--", "true"],                      # no -P
        ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=a", "--", "true"],          # bad value
        ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=1", "--reps", "5..2", "--", "true"],
        ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=1", "--", "echo", "{m}"],   # unknown placeholder
        ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=1", "--collect", "nope", "--", "true"],
        ["collect", "-P", "n=1", "--", "true"],                                              # no output
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("perfcast: error:"), (argv, err)
