"""The renderers: pure functions from traces and records to text, figures and widgets.

vLLM twin: none.
"""
