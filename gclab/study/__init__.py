"""Studies: many training runs over schemes, loss settings and seeds, run resumably.

``python -m gclab.study`` runs the packet-loss study of docs/study.md (or any spec):
:mod:`gclab.study.spec` turns the spec into units, :mod:`gclab.study.replay` is the
shortcut that replays exact runs under other losses, :mod:`gclab.study.verify` checks it
against real runs, :mod:`gclab.study.runner` runs it all and writes the report.
"""
