"""The runs the lessons make and measure.

``schedule``: a ``Schedule`` (plain data) and the one engine builder and runner for it,
with the cached greedy reference; ``scenarios``: what is run (the forum thread's
scenario, seeded random schedules); ``metrics``: acceptance and divergence measured on
traces; ``overlap``: what the batch queue buys, timed; ``v2_watch``: Model Runner V2's
broadcast and slots, watched through the engine's listener.

vLLM twin: none.
"""
