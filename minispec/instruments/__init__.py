"""What the engine takes as plain data, and what only reads what it recorded.

* ``fixes``: the two runner-fault switches and their presets;
* ``trace``: the recorder the engine calls at each schedule, stage and update;
* ``invariants``: minispec's invariants (stated there), checked live or on a recorded trace.

Nothing here imports the engine, so the engine can import it; nothing here has
a vLLM twin.
"""
