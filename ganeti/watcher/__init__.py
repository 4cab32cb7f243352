"""Self-healing: the watcher and auto-repair."""
