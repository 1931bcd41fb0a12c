"""Scheduling: one owner of the DAG's state and its pure policies.

The scheduler and its table of sub-task records, and the policies it applies: failures
(retry, fallback), breakers, waits for a person, expansion, the budget's stop, dispatch-time
inputs, and the facts it tells.
"""
