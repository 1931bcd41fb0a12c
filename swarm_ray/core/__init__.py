"""The pure part of swarm-ray: what decides, with no Ray and no I/O library.

The task state machine, templates and plans, the scheduler and its signals, capability
specs and the registry, watermarks, the error tree, access and request limits, and the
task driver (`_driver.TaskDriver`), the one owner of a task's decisions. It runs in any
Python process and is tested without Ray; `swarm_ray.runtime` carries its decisions out.
Public names are re-exported from `swarm_ray`; the rest stays importable from its module.
"""
