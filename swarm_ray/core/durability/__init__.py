"""Durability: what a task writes before it acts, and how it is read back.

The journal's contract, the task log, the ledger of a task's state, and what becomes of
attempts that were out at a restart.
"""
