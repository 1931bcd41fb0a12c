"""The driver: the one owner of a task's decisions.

`TaskDriver.step(input) -> Step(commands, notices)`, its mixins (adopting a plan, inputs
from outside, resuming), the commands and the orders it gives, what it admits, announces
and records at a task's end, and how a request becomes its first input.
"""
