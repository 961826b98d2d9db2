"""``python -m minispec``: the command line, ``minispec.entrypoints.cli.main`` (vLLM's is the
``vllm`` command, ``vllm/entrypoints/cli/main.py``)."""

from minispec.entrypoints.cli.main import main

if __name__ == "__main__":
    main()
