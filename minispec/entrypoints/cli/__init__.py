"""The command line, one module per subcommand (vLLM: ``vllm/entrypoints/cli/``); ``main``
builds the parser. Nothing is imported here, so a torchrun script can import ``serve`` cheaply."""
