"""The fault family of 2026 (notebook 09): what each fault preset reproduces and where it
bites (``catalogue``), each one run and caught (``reproduce``), and the designs and
threads of the pipeline hand-over it belongs to (``pp_sync``). The switches themselves
are the engine's (``minispec/v1/worker/fault_presets.py``).

vLLM twin: none.
"""
