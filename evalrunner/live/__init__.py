"""Live mode: a real model behind the provider interface, its concurrency cap and token budget."""
