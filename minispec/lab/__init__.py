"""The lessons on top of the engine: scenarios, renderers and widgets.

Everything here calls ``minispec.LLM`` or reads traces; the engine never
imports it. Nothing here has a vLLM twin.
"""
