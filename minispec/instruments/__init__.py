"""What only reads what the engine recorded (the fault switches, which change
what the engine does, live with the runner: ``minispec.v1.worker.runner_fixes``).

* ``trace``: the recorder the engine calls at each schedule, stage and update;
* ``invariants``: minispec's invariants (stated there), checked live or on a recorded trace.

Nothing here imports the engine, so the engine can import it; nothing here has
a vLLM twin.
"""
