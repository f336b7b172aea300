"""LLM backends shared by the LLM judge, generators and LLM-driven attacks."""

from __future__ import annotations

from robusteval.llm.backends import LLMBackend, LocalCausalLM, OpenAICompatible, load_backend, resolve_backend

__all__ = ["LLMBackend", "LocalCausalLM", "OpenAICompatible", "load_backend", "resolve_backend"]
