"""The guards: what is checked before anything is trusted.

Access to paths and URLs, request limits, the sanitizer, tenant schemas held to bounds,
principals, and watermarks with the task's gate. Imports only `core.model`.
"""
