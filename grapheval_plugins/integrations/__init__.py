"""Adapters for host frameworks (LangChain, DeepEval, Ragas). Each uses the core's public API only."""
