"""python -m atk SUBCOMMAND: the package's command line. Each subcommand is a
module with add_arguments(parser), run(args) -> exit status, DESCRIPTION and
EPILOG; it is imported only when chosen (or for --help), so `python -m atk`
loads neither torch nor libatk. Add one by adding a line to SUBCOMMANDS."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
SUBCOMMANDS = {
    "report": ("atk.report", "write an HTML tuning report (plots, tables) of an autotune cache"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m atk", description="autotune's Python package: command-line tools.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, summary) in SUBCOMMANDS.items():
        mod = importlib.import_module(module)
        sp = sub.add_parser(name, help=summary, description=mod.DESCRIPTION, epilog=mod.EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args._run(args)


if __name__ == "__main__":
    sys.exit(main())
