"""The workshop's exercises and their checker (notebook 08).

``checkers``: each ``check_*`` runs a learner's function and says what is wrong;
``attempts``: one run of a learner's fix on one schedule, and the sentences it turns into;
``broadcast_checker``: the Model Runner V2 exercise, judged slot by slot;
``solutions``: the reference solutions, imported only on purpose;
``answers``: what gives fix 1's and fix 2's answers away, for the handout, its slip and the spoiler check.

vLLM twin: none.
"""
