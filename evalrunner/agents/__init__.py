"""Agents the runner ships: the reference agent loop and agents run as commands."""
