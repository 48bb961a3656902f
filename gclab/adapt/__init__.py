"""Adaptive coding: re-choose the scheme online from the delays the server observes.

``adapt=search`` (:mod:`gclab.adapt.options`) re-runs the parameter search every
``adapt.every`` jobs on a delay model built from the last ``adapt.window`` rounds'
observed arrival times (:mod:`gclab.adapt.observe`), chooses among ``adapt.schemes``
(:mod:`gclab.adapt.decide`) and switches at a job boundary once the old scheme's pending
jobs are decoded: in the simulator (:mod:`gclab.adapt.simulate`) and in training
(:mod:`gclab.runtime.server` drives the same controller). docs/simulator.md,
"Adaptive coding", has the rules and the measurements.
"""
