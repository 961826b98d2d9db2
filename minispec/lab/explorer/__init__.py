"""The explorer and the mutation benchmark: every schedule of a scope run against a runner
design, what each exercised, and which kind of check catches which slip.

A layer of the lab above the fault catalogue (``minispec.lab.faults``), whose presets it
explores and warns about, and below the renderers (``minispec.lab.viz``). vLLM twin: none.
"""
