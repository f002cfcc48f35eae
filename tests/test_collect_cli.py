"""`perfcast collect` on the command line: options and YAML, JSON output, one-line errors."""

import json

import pytest

from perfcast import store
from perfcast.cli import main

from conftest import cli_items


def test_collect_command_and_yaml(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\necho "perfcast-timer solve $(($1 * 2))"\n')
    app.chmod(0o755)
    out = tmp_path / "a.perfcast"
    rc = main(["collect", "-o", str(out), "-P", "n=1,3", "--reps", "2", "--json", "--", str(app), "{n}"])
    assert rc == 0
    summary = cli_items(capsys.readouterr().out, "campaign")[0]
    assert summary["runs"] == 4 and summary["failed"] == []
    exp = store.read(out)
    agg = exp.aggregate("mean")
    assert agg[agg.callpath == "app->solve"]["value"].tolist() == [2.0, 6.0]
    y = tmp_path / "c.yaml"
    y.write_text(f"command: [{app}, '{{n}}']\nparameters: {{n: [5]}}\nreps: 1..1\noutput: y.perfcast\n")
    assert main(["collect", str(y), "--json"]) == 0
    assert cli_items(capsys.readouterr().out, "campaign")[0]["points"] == [{"n": 5, "repetitions": 1}]
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


def test_incomplete_campaign_is_named_and_exits_3(tmp_path, capsys):
    # a deterministic flaky app: attempt k of configuration n (counted in a file) fails as chosen:
    # n=2 always, n=3 on its 1st attempt only, n=4 on its 2nd and 3rd
    app = tmp_path / "flaky.sh"
    app.write_text('#!/bin/sh\nf="$0.count.$1"; k=$(( $(cat "$f" 2>/dev/null || echo 0) + 1 )); echo $k > "$f"\n'
                   'case "$1:$k" in\n'
                   '  2:*|3:1|4:2|4:3) echo "flaky n=$1 attempt $k" >&2; exit 4;;\n'
                   'esac\necho "perfcast-timer t $1"\n')
    app.chmod(0o755)
    out = tmp_path / "f.perfcast"
    argv = ["collect", "-o", str(out), "-P", "n=1,2,3,4", "--reps", "2", "--max-failures", "2", "--json",
            "--", str(app), "{n}"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 3
    summary = cli_items(capsys.readouterr().out, "campaign")[0]
    assert summary["complete"] is False
    assert [(m["config"], m["succeeded"], m["wanted"], m["failed"], m["last_status"], m["last_reason"])
            for m in summary["incomplete"]] == [
        ({"n": 2.0}, 0, 2, 2, "failed", "exit code 4: flaky n=2 attempt 2"),
        ({"n": 4.0}, 1, 2, 2, "failed", "exit code 4: flaky n=4 attempt 3")]
    # what did succeed is written: n=1 and n=3 twice (n=3 after one failure), n=4 once
    reps = store.read(out).repetitions()
    assert dict(zip(reps["n"], reps["repetitions"])) == {1.0: 2, 3.0: 2, 4.0: 1}
    # the text output names them too; --allow-missing accepts the gaps (the resumed campaign has
    # nothing left to run: both configurations used up their failures)
    rc = main([a for a in argv if a != "--json"][:-3] + ["--allow-missing", "--", str(app), "{n}"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "incomplete: 2 configuration(s)" in text and "exit 3" not in text
    lines = [l for l in text.splitlines() if l.startswith("  n=")]
    assert len(lines) == 2
    assert "n=2" in lines[0] and "0 of 2 succeeded" in lines[0] and "flaky n=2 attempt 2" in lines[0]
    assert "n=4" in lines[1] and "1 of 2 succeeded" in lines[1] and "flaky n=4 attempt 3" in lines[1]


def test_collect_limits_options(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\necho "perfcast-timer t 1"\n')
    app.chmod(0o755)
    for opt, val in (("--timeout", "soon"), ("--timeout", "-3"), ("--output-cap", "12 parsecs"),
                     ("--output-cap", "10"), ("--first-timeout", "x")):
        argv = ["collect", "-o", str(tmp_path / "x.perfcast"), "-P", "n=1", opt, val, "--", str(app)]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("perfcast: error:") and opt.strip("-").split("-")[0] in err[0]
    assert main(["collect", "-o", str(tmp_path / "y.perfcast"), "-P", "n=1", "--reps", "1", "--timeout", "none",
                 "--output-cap", "64k", "--json", "--", str(app)]) == 0
    assert cli_items(capsys.readouterr().out, "campaign")[0]["complete"] is True
    head = json.loads((tmp_path / "y.perfcast.campaign" / "campaign.json").read_text())
    assert head["spec"]["timeout"] == 0 and head["spec"]["output_cap"] == 64 * 1024


@pytest.mark.parametrize("printed, regex", [("-1", None), ("1e999", None), ("nan", r"perfcast-timer (\S+) (\S+)"),
                                            ("-inf", r"perfcast-timer (\S+) (\S+)")])
def test_negative_or_non_finite_timer_is_refused(tmp_path, capsys, printed, regex):
    app = tmp_path / "app.sh"
    app.write_text(f'#!/bin/sh\necho "perfcast-timer ok 1.5"\necho "perfcast-timer t {printed}"\n')
    app.chmod(0o755)
    out = tmp_path / "a.perfcast"
    argv = ["collect", "-o", str(out), "-P", "n=1", "--reps", "1", "--json"]
    argv += ["--timer-regex", regex] if regex else []
    assert main([*argv, "--", str(app)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfcast: error:"), err
    assert "stdout.txt" in err[0] and f"timer 't' printed the time {printed!r}" in err[0]
    assert not out.exists()                       # nothing written


def test_varied_parameter_the_command_never_uses_is_refused(tmp_path, capsys):
    # every run would be `echo 1` .. `echo 2`: m's two values would label identical runs as two points
    out = tmp_path / "a.perfcast"
    argv = ["collect", "-o", str(out), "--reps", "1", "-P", "n=1,2", "-P", "m=3,4", "--", "echo", "{n}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parameter m has 2 values but the command never uses {m}" in err[0], err
    assert not out.exists() and not (tmp_path / "a.perfcast.campaign").exists()
    # the same from a campaign file (env and workdir are not substituted: only the command counts)
    y = tmp_path / "c.yaml"
    y.write_text("command: [echo, '{n}']\nparameters: {n: [1, 2], m: [3, 4]}\nenv: {M: '{m}'}\nreps: 1\n"
                 "output: y.perfcast\n")
    assert main(["collect", str(y)]) == 2
    assert "parameter m has 2 values" in capsys.readouterr().err
    assert not (tmp_path / "y.perfcast").exists() and not (tmp_path / "y.perfcast.campaign").exists()
    # one value stays a label of every run
    assert main(argv[:-5] + ["-P", "m=3", "--json", "--", "echo", "{n}"]) == 0
    assert store.read(out).points()[["n", "m"]].values.tolist() == [[1.0, 3.0], [2.0, 3.0]]


def test_existing_experiment_without_a_campaign_journal_needs_force(tmp_path, capsys):
    csv = tmp_path / "d.csv"
    csv.write_text("m,callpath,metric,value\n1,main,time,1\n2,main,time,2\n")
    out = tmp_path / "imp.perfcast"
    assert main(["import", str(csv), "-o", str(out)]) == 0
    argv = ["collect", "-o", str(out), "--reps", "1", "-P", "n=1", "--json", "--", "echo", "{n}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "output exists" in err[0] and "--force" in err[0], err
    kept = store.read(out)                                   # the imported experiment is untouched
    assert list(kept.parameters) == ["m"] and len(kept.points()) == 2
    assert not (tmp_path / "imp.perfcast.campaign").exists()
    # --force replaces it; then it is this campaign's own, and rerunning resumes it (nothing runs again)
    assert main(["--force" if a == "--json" else a for a in argv]) == 0
    assert list(store.read(out).parameters) == ["n"]
    capsys.readouterr()
    assert main(argv) == 0
    assert cli_items(capsys.readouterr().out, "campaign")[-1]["runs"] == 1


def test_collect_output_is_a_store_name(tmp_path, capsys):
    # `-o x.json` would have written a store directory named x.json (the README: stores are NAME.perfcast)
    out = tmp_path / "x.json"
    assert main(["collect", "-o", str(out), "--reps", "1", "-P", "n=1", "--", "echo", "{n}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NAME.perfcast" in err[0], err
    assert not out.exists() and not (tmp_path / "x.json.campaign").exists()


@pytest.mark.parametrize("grid, said", [(["n=64", "n=96"], "parameter n is given twice"),
                                        (["n=64,64"], "the value 64 is given twice"),
                                        (["n=64,96,64.0"], "the value 64 is given twice")])
def test_repeated_parameter_or_value_is_refused(tmp_path, capsys, grid, said):
    # the later -P n=... replaced the earlier one; a repeated value ran as one configuration
    out = tmp_path / "a.perfcast"
    argv = ["collect", "-o", str(out), "--reps", "1", *(a for g in grid for a in ("-P", g)), "--", "echo", "{n}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not out.exists() and not (tmp_path / "a.perfcast.campaign").exists()


def test_repeated_value_in_a_campaign_file_is_refused(tmp_path, capsys):
    y = tmp_path / "c.yaml"
    y.write_text("command: [echo, '{n}']\nparameters: {n: [1, 2, 1.0]}\nreps: 1\noutput: y.perfcast\n")
    assert main(["collect", str(y)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the value 1 is given twice" in err[0], err
    assert not (tmp_path / "y.perfcast").exists() and not (tmp_path / "y.perfcast.campaign").exists()


def test_missing_program_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    noexec = tmp_path / "noexec.sh"
    noexec.write_text("#!/bin/sh\necho hi\n")
    for words, said in ((["./later.sh", "{n}"], "'./later.sh' does not exist"),
                        (["perfcast-no-such-program", "{n}"], "'perfcast-no-such-program' is not found on PATH"),
                        (["./noexec.sh", "{n}"], "'./noexec.sh' is not an executable file")):
        assert main(["collect", "-o", "g.perfcast", "--reps", "1", "-P", "n=64,128", "--", *words]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["noexec.sh"]     # nothing left behind
    # created afterwards, it runs (nothing stale was kept)
    (tmp_path / "later.sh").write_text("#!/bin/sh\necho $1\n")
    (tmp_path / "later.sh").chmod(0o755)
    assert main(["collect", "-o", "g.perfcast", "--reps", "1", "-P", "n=64,128", "--json", "--", "./later.sh",
                 "{n}"]) == 0
    assert cli_items(capsys.readouterr().out, "campaign")[0]["runs"] == 2


def test_program_after_an_mpi_launcher(tmp_path):
    from perfcast.collect.campaign import CampaignSpec, check_program
    from perfcast.errors import PerfcastError

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "mpirun").write_text("#!/bin/sh\nexit 0\n")
    (bin_ / "mpirun").chmod(0o755)
    (tmp_path / "app").write_text("")

    def check(command):
        check_program(CampaignSpec(command=command, parameters={"p": [1, 2]}, env={"PATH": str(bin_)},
                                   workdir=str(tmp_path)))

    for ok in ("mpirun -np {p} ./app", "mpirun -np {p} {wrap} ./app", "mpirun -np {p} {wrap} app",
               "mpirun -np {p} app", "mpirun --wdir /elsewhere -np {p} ./missing"):
        check(ok)                                      # no false alarm (a name: the launcher's PATH)
    for bad in ("mpirun -np {p} ./missing", "mpirun -np {p} {wrap} ./missing", "mpirun -np {p} ./app_{p}"):
        with pytest.raises(PerfcastError, match="that mpirun starts does not exist"):
            check(bad)
    with pytest.raises(PerfcastError, match="'mpirun' is not found on PATH"):
        check_program(CampaignSpec(command="mpirun -np {p} ./app", parameters={"p": [1, 2]},
                                   env={"PATH": str(tmp_path / "empty")}, workdir=str(tmp_path)))


def test_resume_says_which_configurations_were_given_up(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\n[ "$1" = 2 ] && [ ! -e "$0.fixed" ] && { echo broken >&2; exit 3; }\necho ok\n')
    app.chmod(0o755)
    out = tmp_path / "a.perfcast"
    argv = ["collect", "-o", str(out), "--reps", "1", "-P", "n=1,2", "--max-failures", "1", "--allow-missing",
            "--json", "--", str(app), "{n}"]
    assert main(argv) == 0
    assert cli_items(capsys.readouterr().out, "campaign")[0]["warnings"] == []
    (tmp_path / "app.sh.fixed").write_text("")
    assert main(argv) == 0                                # resumed: n=2 is not run again, and it says so
    captured = capsys.readouterr()
    summary = cli_items(captured.out, "campaign")[0]
    assert summary["runs"] == 2 and summary["complete"] is False
    (w,) = summary["warnings"]
    assert "n=2" in w and "given up" in w and "exit code 3: broken" in w and "--max-failures 2" in w
    assert w in captured.err
    argv[argv.index("--max-failures") + 1] = "2"          # as it says: retried, and now it succeeds
    assert main(argv) == 0
    summary = cli_items(capsys.readouterr().out, "campaign")[0]
    assert summary["runs"] == 3 and summary["complete"] is True


def test_cv_metric_no_run_prints_is_warned_about(tmp_path, capsys):
    app = tmp_path / "app.sh"
    app.write_text('#!/bin/sh\necho "perfcast-timer solve 0.5"\n')     # the same time every run: cv 0
    app.chmod(0o755)
    base = ["collect", "--reps", "2..4", "-P", "n=1", "--json"]
    assert main([*base, "-o", str(tmp_path / "a.perfcast"), "--cv-metric", "solve", "--", str(app)]) == 0
    summary = cli_items(capsys.readouterr().out, "campaign")[0]
    assert summary["runs"] == 2 and summary["warnings"] == []          # stopped by --cv at --reps MIN
    assert main([*base, "-o", str(tmp_path / "b.perfcast"), "--cv-metric", "nosuch", "--", str(app)]) == 0
    captured = capsys.readouterr()
    summary = cli_items(captured.out, "campaign")[0]
    assert summary["runs"] == 4                                          # nothing for --cv: --reps MAX
    (w,) = summary["warnings"]
    assert "--cv-metric nosuch" in w and "no timer 'nosuch'" in w and "solve" in w
    assert captured.err.count("no timer 'nosuch'") == 1


def test_collect_help_and_error_prefixes_are_said_once(tmp_path, capsys):
    from perfcast.errors import PerfcastError

    assert main(["collect", "--help"]) == 0
    text = capsys.readouterr().out
    assert "90% interval" in text and "[10%]" in text and "%%" not in text
    for opt, said in ((["-P", "n=64,abc"], "perfcast: error: -P 'n=64,abc': 'abc' is not a number"),
                      (["-P", "n=1", "--timeout", "-3"],
                       "perfcast: error: --timeout '-3': expected seconds >= 0 (0 or 'none': no limit)")):
        assert main(["collect", "-o", str(tmp_path / "t.perfcast"), *opt, "--", "echo"]) == 2
        assert capsys.readouterr().err.strip() == said
    # the one rule: a message that starts with its place does not get it twice; others get it once
    assert PerfcastError("--target 'm=4': unknown", where="--target").format() == "--target 'm=4': unknown"
    assert PerfcastError("--target: unknown", where="--target").format() == "--target: unknown"
    assert PerfcastError("unknown parameter 'm'", where="--target").format() == "--target: unknown parameter 'm'"
    assert PerfcastError("-Px", where="-P").format() == "-P: -Px"
