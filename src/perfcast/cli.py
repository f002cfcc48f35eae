"""perfcast command line: a thin shell over the library.

Every command accepts ``--json``.  Input errors are one line on stderr and exit code 2; nothing
half-written is left behind (stores are written atomically).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from . import __version__
from .errors import PerfcastError


def parse_coords(text: str, what: str = "--point") -> dict[str, float]:
    """``p=4,n=8`` -> {"p": 4.0, "n": 8.0}."""
    coords: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise PerfcastError(f"{what} {text!r}: expected NAME=VALUE[,NAME=VALUE...]")
        k, v = (s.strip() for s in part.split("=", 1))
        try:
            coords[k] = float(v)
        except ValueError:
            raise PerfcastError(f"{what} {text!r}: {v!r} is not a number") from None
        if not k:
            raise PerfcastError(f"{what} {text!r}: empty parameter name")
    if not coords:
        raise PerfcastError(f"{what} {text!r}: no NAME=VALUE given")
    return coords


def input_options(f):
    """Options shared by every command that reads an experiment."""
    f = click.option("--format", "fmt", metavar="FORMAT",
                     help="Input format (default: detected). `perfcast formats` lists them.")(f)
    f = click.option("--point", "points", multiple=True, metavar="P=V[,Q=W]",
                     help="Coordinates of an input without parameters of its own; once per input, in order.")(f)
    f = click.option("--param", "params", multiple=True, metavar="KEY",
                     help="Metadata key to use as a parameter (e.g. Caliper/Adiak jobsize); repeatable.")(f)
    return f


def load_experiment(inputs, fmt=None, points=(), params=(), quiet=False):
    """Read EXP arguments (files, directories or a stored experiment) into one Experiment."""
    from .io import ReadOptions, load
    from .report.terminal import progress

    pts = [parse_coords(p) for p in points] if points else None
    with progress("reading", enabled=None if not quiet else False) as cb:
        return load(list(inputs), fmt, pts, ReadOptions(parameters=tuple(params), progress=cb))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", "-V", prog_name="perfcast")
def cli():
    """perfcast: automatic performance modeling of parallel applications.

    Read profiles (Extra-P, CUBE, Caliper, HPCToolkit, tidy CSV/Parquet) or collect them, find
    the kernels that do not scale, fit human-readable scaling models, predict and project.
    EXP arguments are any input the readers accept, or a stored NAME.perfcast experiment.
    """


@cli.command("import")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Directory to write, conventionally NAME.perfcast.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def import_cmd(inputs, output, force, fmt, points, params, as_json):
    """Read INPUTS (files or directories) into one stored experiment.

    Several inputs combine into one experiment: their parameter values come from the files'
    metadata, from their paths (Score-P style names such as mm.x10y1z1.r1) or from --point.
    Equal coordinates become further repetitions.

    \b
    Examples:
      perfcast import lulesh_weak_scaling_cali/ -o lulesh.perfcast
      perfcast import run4/profile.cubex run8/profile.cubex --point p=4 --point p=8 -o mm.perfcast
    """
    from . import store
    from .report.terminal import out, write_json

    if output.exists() and not force:
        raise PerfcastError("output exists; use --force to replace it", output)
    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    store.write(exp, output)
    s = exp.summary()
    if as_json:
        write_json({"output": str(output), "parameters": s["parameters"], "n_points": s["n_points"],
                    "n_callpaths": s["n_callpaths"], "metrics": [m["name"] for m in s["metrics"]],
                    "n_values": s["n_values"]})
    else:
        out.print(f"wrote {output}: {s['n_points']} point(s) over {', '.join(s['parameters']) or '(none)'}, "
                  f"{s['n_callpaths']} callpath(s), {len(s['metrics'])} metric(s), {s['n_values']} value(s)")


@cli.command("show")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@click.option("--max-callpaths", default=200, show_default=True, help="Callpaths to draw in the tree.")
@click.option("--depth", type=int, default=None, help="Deepest tree level to draw.")
@click.option("--json", "as_json", is_flag=True, help="Print the full description as JSON.")
def show_cmd(inputs, fmt, points, params, max_callpaths, depth, as_json):
    """Describe an experiment: parameters, points and repetitions, metrics, callpath tree."""
    from .report.terminal import show_experiment, write_json

    exp = load_experiment(inputs, fmt, points, params, quiet=as_json)
    if as_json:
        write_json(exp.summary())
    else:
        show_experiment(exp, max_callpaths, depth)


@cli.command("formats")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def formats_cmd(as_json):
    """List the input formats perfcast reads."""
    from .io import readers
    from .report.terminal import out, table, write_json

    rs = sorted(readers().values(), key=lambda r: r.name)
    rows = [[r.name, " ".join(r.extensions) + (" (dir)" if r.directories else ""), r.description] for r in rs]
    if as_json:
        write_json([{"name": r.name, "extensions": list(r.extensions), "directories": r.directories,
                     "description": r.description} for r in rs])
    else:
        out.print(table("Formats", ["format", "inputs", "description"], rows))


def main(argv=None) -> int:
    """Console entry point: runs the CLI, turning input errors into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="perfcast", standalone_mode=False)
        return 0
    except PerfcastError as e:
        click.echo(f"perfcast: error: {e.format()}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("perfcast: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return 2
    except KeyboardInterrupt:
        click.echo("perfcast: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # output piped into `head` and the like
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except MemoryError:
        click.echo("perfcast: error: out of memory", err=True)
        return 2
    except Exception as e:  # a bug in perfcast: one line, traceback only on request
        if os.environ.get("PERFCAST_DEBUG"):
            raise
        click.echo(f"perfcast: internal error: {type(e).__name__}: {e} (set PERFCAST_DEBUG=1 for a traceback; "
                   f"please report it)", err=True)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
