"""Planning: how a request finds its template and becomes a plan.

The template router, the planning API an LLM planner uses, and catalogs found by import
path.
"""
