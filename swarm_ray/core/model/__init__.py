"""The model: what a task is made of.

Requests, sub-tasks and their results, templates and plans, capability specs and the
registry, the task state machine, the scheduler's events and intents (signals), the
stored record, and the error tree. Imports nothing else of `core`.
"""
