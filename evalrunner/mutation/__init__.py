"""Proof that a suite catches broken agent machinery: the mutant catalogue and its runner."""
