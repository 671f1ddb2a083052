"""adk_actors."""
