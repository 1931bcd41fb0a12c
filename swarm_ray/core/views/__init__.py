"""Views: a task as callers see it, read from what the driver and the scheduler keep.

The task's status (`TaskStatus`), what each sub-task's attempts did and the critical
path, and a watermark traced back to what made it. Read only: nothing here decides.
"""
