"""A run directory's life: one owner, a record nothing overwrites, an end that says how to go on.

* :mod:`gclab.rundir.lock`: the directory's lock, one process at a time.
* :mod:`gclab.rundir.guard`: the Hydra callback that takes the lock and refuses a run that
  would overwrite a record, before Hydra writes into the directory.
* :mod:`gclab.rundir.interrupts`: stops from outside (Ctrl-C, SIGTERM, a lost cluster).
* :mod:`gclab.rundir.resumehint`: the sentence a stopped run ends with, naming the
  command that resumes it.

The package imports none of its modules here, so the runtime and the CLI import
:mod:`gclab.rundir.interrupts` without Hydra's callback machinery.
"""
