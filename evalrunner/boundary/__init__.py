"""The agent's boundary: the model side (provider, conversation monitor), the tool side, the
observer."""
