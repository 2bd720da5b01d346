"""Live mode: a real model behind the provider interface, its budget, and redaction of what is
recorded."""
