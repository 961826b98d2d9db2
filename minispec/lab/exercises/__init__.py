"""The workshop's exercises and their checker (notebook 08).

``checkers``: each ``check_*`` runs a learner's function and says what is wrong;
``attempts``: one run of a learner's fix on one schedule, and the sentences it turns into;
``broadcast_checker``: the Model Runner V2 exercise, judged slot by slot;
``solutions``: the reference solutions, imported only on purpose;
``answers``: what gives fix 1's and fix 2's answers away, for the handout, its slip and the spoiler check.

What a notebook imports from here (``from minispec.lab.exercises import ...``), by module:

* ``checkers``: ``check_draft_slots``, ``check_acceptance``, ``check_fix1``, ``check_fault2``,
  ``check_fix2``, ``check_condense``, ``check_recovered``, ``check_broadcast``, ``condense_trace``,
  ``thread_trace``, ``decoder``, ``show_solution``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "checkers": ("check_draft_slots", "check_acceptance", "check_fix1", "check_fault2", "check_fix2",
                 "check_condense", "check_recovered", "check_broadcast", "condense_trace", "thread_trace",
                 "decoder", "show_solution"),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
