"""Small helpers with no knowledge of the cluster (file I/O)."""
