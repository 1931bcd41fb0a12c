"""The Ray edge of swarm-ray: where the core's decisions meet Ray, stores and the disk.

The orchestrator actor (wiring: it feeds drivers and carries out their commands), the
three executors behind one seam, the SQLite, Redis and result stores, uploads, the
client, health, metrics, audit and rollouts. It imports `swarm_ray.core`, never a
workload (`documents`, `video`) or `llm`.
"""
