"""Views: a task as callers see it, and a watermark traced back to what made it.

Read only: nothing here decides.
"""
